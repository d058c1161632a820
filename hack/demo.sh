#!/usr/bin/env bash
# The README's first command: environment, Go builds, then `berthmaster demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
# operator/ and scheduler/ sit at the top of the checkout: never let `python -m` put the
# checkout first on sys.path, where operator/ would shadow the standard library's operator.
export PYTHONSAFEPATH=1
if [ ! -x .venv/bin/python ]; then
  echo "==> creating the Python environment (.venv)"
  python3 -m venv .venv
fi
echo "==> installing berthmaster"
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
exec .venv/bin/berthmaster demo "$@"
