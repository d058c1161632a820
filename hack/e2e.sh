#!/usr/bin/env bash
# `make e2e`: the environment, the control plane binaries (and, for the real-kubelet cluster,
# kubelet and kube-proxy), then e2e/run.py. Usage: hack/e2e.sh [--mode auto|kind|kubelet] [--keep]
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONSAFEPATH=1
if [ ! -x .venv/bin/python ]; then
  echo "==> creating the Python environment (.venv)"
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet -e '.[test]'
.venv/bin/berthmaster dev build
exec .venv/bin/python e2e/run.py "$@"
