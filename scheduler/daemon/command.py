"""``berthmaster scheduler``: the running scheduler for pods with ``schedulerName: berthmaster``.

Design: everything runs in one asyncio event loop, started in this order and stopped in reverse:

1. the metrics/health server, then the cache (list everything, then watch) — standby replicas
   keep a warm cache too, so a takeover starts scheduling at once;
2. leader election (when enabled): wait for the Lease, then keep renewing it in a task;
3. the scheduling loop (decisions) with its binder and preemptor tasks (API writes).

Three things end a run: SIGTERM/SIGINT (graceful: finish the bindings in flight for up to a few
seconds, release the Lease, exit 0), a lost Lease (stop acting at once: cancel bindings not yet
sent and exit 1, as kube-scheduler does, so the Pod restarts as a fresh candidate), or a crash
of the loop (exit 1). API clients follow kube-scheduler: one for scheduling, one for Events and
one for leader election, each with the configured QPS/burst.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import signal
import sys
from typing import Any

log = logging.getLogger("berthmaster.scheduler")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from berthmaster.scheduler.daemon import flags

    flags.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from berthmaster import logs

    logs.configure("scheduler", args.log_format, args.verbosity)
    for flag in args.ignored_flags:
        log.warning("%s is kube-scheduler's and has no effect on berthmaster; ignored", flag,
                    extra={"flag": flag})
    try:
        return asyncio.run(main(args))
    except KeyboardInterrupt:
        return 130


def load_configured_policy(path: str | None) -> Any:
    from berthmaster.documents import DocumentError, read_text
    from berthmaster.errors import PolicyError
    from berthmaster.scheduler.policy import default_policy, load_policy

    if not path:
        return default_policy()
    try:
        return load_policy(read_text(path), source=path)
    except PolicyError as error:
        problems = "\n  ".join(error.problems) or str(error)
        print(f"berthmaster scheduler: the policy file {path} is not valid:\n  {problems}",
              file=sys.stderr)
        raise SystemExit(2) from error
    except DocumentError as error:
        print(f"berthmaster scheduler: --policy: {error}", file=sys.stderr)
        raise SystemExit(2) from None


async def main(args: argparse.Namespace) -> int:
    from berthmaster.scheduler.daemon.service import SchedulerService

    policy = load_configured_policy(args.policy)
    service = await SchedulerService.create(args, policy)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    # No cyclic collection while the initial lists load (see freeze_after_sync).
    gc.disable()
    freezing = asyncio.create_task(freeze_after_sync(service), name="gc-freeze")
    try:
        return await service.run(stop)
    finally:
        freezing.cancel()
        gc.enable()


async def freeze_after_sync(service: Any) -> None:
    """Once the initial list is loaded, collect once, move everything alive into the GC's
    permanent generation and turn the collector back on. Until then it is off: loading a
    large cluster allocates objects that all stay alive, and every full collection it
    triggers re-scans all loaded so far (20,000 pods: 3.1 s of CPU with the collector on,
    1.3 s off). Afterwards the snapshot's long-lived objects are never re-scanned by the
    cyclic collections that the watches' allocations keep triggering. Process-wide, so it is
    done here, in the command, and not by the in-process service."""
    try:
        await asyncio.gather(*(informer.synced.wait() for informer in service.cache.informers))
        gc.collect()
        gc.freeze()
    finally:
        gc.enable()
    log.debug("gc frozen after the initial sync", extra={"frozen": gc.get_freeze_count()})
