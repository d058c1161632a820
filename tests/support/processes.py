"""A child process for the length of a ``with`` block: started with its output in a log file,
terminated at the end (killed if it has not exited after a grace period)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from berthmaster.tooling.processes import terminate


@contextlib.contextmanager
def child(command: Sequence[str], log: Path, env: Mapping[str, str] | None = None,
          grace: float = 20) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as sink:
        process = subprocess.Popen(list(command), stdout=sink, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env)
    try:
        yield process
    finally:
        terminate(process, grace)
