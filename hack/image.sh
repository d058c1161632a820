#!/usr/bin/env bash
# `make image`: berthmaster's image with Docker, on machines with or without registry access.
# Usage: hack/image.sh [--tag NAME] [--node-images]
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/venv.sh
venv_install
exec .venv/bin/berthmaster dev image "$@"
