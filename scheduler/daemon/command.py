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
    from berthmaster.foundation import logs

    logs.configure("scheduler", args.log_format, args.verbosity)
    try:
        return asyncio.run(main(args))
    except KeyboardInterrupt:
        return 130


def load_configured_policy(path: str | None) -> Any:
    """The Policy file's profile (exit 2 when it is not valid); without a file, None."""
    from berthmaster.foundation.documents import DocumentError, read_text
    from berthmaster.foundation.errors import PolicyError
    from berthmaster.scheduler.policy import load_policy

    if not path:
        return None
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


def load_configuration(args: argparse.Namespace, argv: list[str]) -> Any:
    """What ``args`` ask to run: ``--config``'s KubeSchedulerConfiguration (its settings
    applied to ``args`` as kube-scheduler applies them), ``--policy``'s profile, or, with
    neither, kube-scheduler 1.35's default profile under ``--scheduler-name``. A bad file
    exits 2 naming every field that is wrong."""
    from berthmaster.foundation.documents import DocumentError, read_text
    from berthmaster.foundation.errors import PolicyError
    from berthmaster.scheduler.config import default_config, load_config
    from berthmaster.scheduler.daemon import flags

    if args.config and args.policy:
        print("berthmaster scheduler: --config and --policy cannot be used together; write "
              "the Policy as a profile (berthmaster policy convert FILE prints it)",
              file=sys.stderr)
        raise SystemExit(2)
    if args.policy:
        return load_configured_policy(args.policy)
    if not args.config:
        return default_config(args.scheduler_name)
    try:
        config = load_config(read_text(args.config), args.config, args.scheduler_name)
    except PolicyError as error:
        problems = "\n  ".join(error.problems) or str(error)
        print(f"berthmaster scheduler: the configuration {args.config} is not valid:\n  "
              f"{problems}", file=sys.stderr)
        raise SystemExit(2) from error
    except DocumentError as error:
        print(f"berthmaster scheduler: --config: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    for flag in flags.apply_config(args, config, flags.given(argv)):
        log.warning("%s is ignored when --config is given (set it in the configuration file, "
                    "as kube-scheduler)", flag, extra={"flag": flag})
    return config


async def main(args: argparse.Namespace) -> int:
    from berthmaster.foundation.serving_options import SecureServing
    from berthmaster.scheduler.daemon.service import SchedulerService

    SecureServing.from_args(args)  # a bad secure-serving flag ends the command before it connects
    configuration = load_configuration(args, sys.argv[1:])
    service = await SchedulerService.create(args, configuration)
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
