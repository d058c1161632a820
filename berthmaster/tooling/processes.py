"""Stopping a child process the way every tool here does: SIGTERM, a grace period, then
SIGKILL, and always reaped (no zombie left behind)."""

from __future__ import annotations

import subprocess
from typing import Any


def terminate(process: subprocess.Popen[Any], grace: float = 10) -> None:
    """Ask ``process`` to stop; kill it if it has not exited within ``grace`` seconds."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
