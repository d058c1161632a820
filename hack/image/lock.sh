#!/usr/bin/env bash
# Re-pin the image's dependencies (hack/image/README.md). Needs PyPI; uses a throw-away venv.
set -euo pipefail
cd "$(dirname "$0")/../.."
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools"
"$tools/bin/pip" install --quiet pip-tools
common=(--quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url
        --no-emit-find-links)
"$tools/bin/pip-compile" "${common[@]}" --output-file hack/image/requirements.lock pyproject.toml
"$tools/bin/pip-compile" "${common[@]}" --output-file hack/image/requirements-build.lock \
  hack/image/requirements-build.in
