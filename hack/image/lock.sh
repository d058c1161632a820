#!/usr/bin/env bash
# Re-pin the image's dependencies (hack/image/README.md). Needs PyPI; uses a throw-away venv.
# One universal lock (uv's --universal resolution, from the oldest Python pyproject.toml allows):
# a dependency needed on one Python only carries an environment marker, and every published
# file of every pin is hashed, so the same lock installs on the host's Python (the test venv,
# hack/venv.sh) and on the image's (python3.13), on amd64 and arm64 alike. The versions already
# pinned are kept unless pyproject.toml rules them out; `hack/image/lock.sh --upgrade` moves
# every pin to the newest release.
set -euo pipefail
# uv pinned, so the same pyproject.toml always resolves the same way (bump it on purpose).
UV_VERSION=0.13.8
cd "$(dirname "$0")/../.."
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools"
"$tools/bin/pip" install --quiet "uv==$UV_VERSION"
python_floor=$(python3 -c 'import re, tomllib; print(re.search(r"[0-9.]+", tomllib.load(open("pyproject.toml", "rb"))["project"]["requires-python"])[0])')
common=(--quiet --universal --python-version "$python_floor"
        --custom-compile-command hack/image/lock.sh "$@")
# Every extra first (the tests', the AWS provider's): one resolution where all of them fit, the
# test venv's constraints. The image's lock is its runtime part, at those same versions.
"$tools/bin/uv" pip compile "${common[@]}" --all-extras --no-emit-package berthmaster \
  --output-file hack/image/requirements-test.lock pyproject.toml
"$tools/bin/uv" pip compile "${common[@]}" --generate-hashes \
  --constraint hack/image/requirements-test.lock --output-file hack/image/requirements.lock \
  pyproject.toml
"$tools/bin/uv" pip compile "${common[@]}" --generate-hashes \
  --output-file hack/image/requirements-build.lock \
  hack/image/requirements-build.in
