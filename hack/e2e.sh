#!/usr/bin/env bash
# `make e2e`: the environment, the control plane binaries (and, for the real-kubelet cluster,
# kubelet and kube-proxy), then e2e/run.py. Usage: hack/e2e.sh [--mode auto|kind|kubelet] [--keep]
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/venv.sh
venv_install test
.venv/bin/berthmaster dev build
exec .venv/bin/python e2e/run.py "$@"
