#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it: environment, Go builds, lint, types, tests.
# Usage: hack/test.sh [pytest arguments]   (the README's `make test` runs it without arguments)
set -euo pipefail
cd "$(dirname "$0")/.."
# operator/ and scheduler/ sit at the top of the checkout: never let `python -m` put the
# checkout first on sys.path, where operator/ would shadow the standard library's operator.
export PYTHONSAFEPATH=1

if [ ! -x .venv/bin/python ]; then
  echo "==> creating the Python environment (.venv)"
  python3 -m venv .venv
fi
echo "==> installing berthmaster and the test tools"
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'

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
