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
echo "==> import layers (import-linter)"
.venv/bin/python hack/lint_imports.py

# BERTHMASTER_TEST_WORKERS=N (N > 1) runs pytest in N pytest-xdist workers, each with its own
# control plane, temp dirs and free ports, a test file to a worker so that module fixtures
# start once (docs/testing.md). Opt-in: under a loaded machine some integration tests still
# time out in parallel, so the default is one process.
workers=${BERTHMASTER_TEST_WORKERS:-1}
parallel=()
if [ "$workers" -gt 1 ]; then
  parallel=(-n "$workers" --dist loadfile)
fi
echo "==> pytest${parallel:+ (${workers} workers)}"
set +e
.venv/bin/python -m pytest "${parallel[@]}" "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
