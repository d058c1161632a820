"""Where the local control plane keeps its binaries and its state.

The binary cache is shared by every checkout on the machine (``$BERTHMASTER_CACHE`` or
``~/.cache/berthmaster``); the state of a running cluster (certificates, etcd data, logs, the
kubeconfig, the process table) lives in one folder per cluster name under
``$BERTHMASTER_STATE`` or ``<cache>/clusters``. The Go wrapper modules are found in the
source checkout's ``hack/`` folder, or where ``$BERTHMASTER_HACK_DIR`` points.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    configured = os.environ.get("BERTHMASTER_CACHE")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "berthmaster"


def state_root() -> Path:
    configured = os.environ.get("BERTHMASTER_STATE")
    if configured:
        return Path(configured).expanduser()
    return cache_dir() / "clusters"


def hack_dir() -> Path:
    configured = os.environ.get("BERTHMASTER_HACK_DIR")
    candidates = [Path(configured)] if configured else []
    candidates.append(Path(__file__).resolve().parents[3] / "hack")
    candidates.append(Path.cwd() / "hack")
    for candidate in candidates:
        if (candidate / "kubernetes" / "go.mod").is_file():
            return candidate
    raise FileNotFoundError(
        "cannot find the Go wrapper modules (hack/kubernetes/go.mod): run berthmaster from a "
        "source checkout, or set BERTHMASTER_HACK_DIR to the checkout's hack/ folder"
    )
