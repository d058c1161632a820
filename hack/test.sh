#!/usr/bin/env bash
# The test suite, exactly as CI runs it: environment, Go builds, lint, types, tests.
# Usage: hack/test.sh [pytest arguments]   (the README's `make test` runs it without arguments;
# `make test-long` with `--long -m long`: only the soak runs make test leaves out)
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/venv.sh
venv_install test

echo "==> building the local control plane (reused from the cache when present)"
.venv/bin/berthmaster dev build

echo "==> ruff"
.venv/bin/ruff check .
echo "==> mypy --strict"
.venv/bin/python hack/typecheck.py

echo "==> pytest"
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
