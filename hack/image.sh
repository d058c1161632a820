#!/usr/bin/env bash
# `make image`: berthmaster's image with Docker, on machines with or without registry access.
# Usage: hack/image.sh [--tag NAME] [--node-images]
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONSAFEPATH=1
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet -e .
exec .venv/bin/berthmaster dev image "$@"
