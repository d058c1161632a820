#!/usr/bin/env bash
# The README's first command: environment, Go builds, then `berthmaster demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/venv.sh
venv_install
exec .venv/bin/berthmaster demo "$@"
