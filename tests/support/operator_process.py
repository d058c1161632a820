"""``berthmaster operator`` as a child process for integration tests: started with the given
capabilities and environment against the test session's control plane, stopped (SIGTERM) when
the test ends, its log printed so a failing test shows it."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

from berthmaster.tooling.python import BERTHMASTER_CLI


@contextlib.asynccontextmanager
async def running_operator(kubeconfig: str, args: Sequence[str], log_path: Path,
                           env: Mapping[str, str] | None = None) -> AsyncIterator[None]:
    log = log_path.open("w")
    process = await asyncio.create_subprocess_exec(
        *BERTHMASTER_CLI, "operator", *args,
        "--standalone", "--liveness", "", "--kubeconfig", kubeconfig,
        # KUBECONFIG too: kopf's login reads the default path, fixed at import.
        env={**os.environ, **(env or {}), "KUBECONFIG": kubeconfig},
        stdout=log, stderr=asyncio.subprocess.STDOUT)
    try:
        yield
    finally:
        if process.returncode is None:
            process.terminate()
            await asyncio.wait_for(process.wait(), timeout=30)
        log.close()
        print(log_path.read_text()[-4000:])  # shown when a test fails
