"""Example hook-implementing controller: a preTerminate hook that waits a fixed delay.

"Improving log reliability" (docs/machines.md; openshift/api machine/v1beta1 ``LifecycleHooks``):
after a Node is drained, its log exporter needs a while to ship the last logs, so the instance is
not terminated until ``--delay`` seconds after the Machine's Drained condition turned True.

    python examples/machine_hooks/log_flush_hook.py --namespace workers --delay 30

Each pass: add the hook to running Machines that match ``--selector``; for each deleting Machine
carrying it whose Drained condition has been True for ``--delay`` seconds, remove it. The delay
is measured from the condition's lastTransitionTime, so a restarted controller waits no longer.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from common import add_hook, has_hook, machines, remove_hook  # type: ignore[import-not-found]

from berthmaster.foundation.kube import KubeClient

HOOK = "FlushLogs"
OWNER = "example.berthmaster.io/log-flush-hook"
STAGE = "preTerminate"
log = logging.getLogger("log-flush-hook")


def drained_since(machine: dict[str, Any]) -> datetime | None:
    for condition in (machine.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Drained" and condition.get("status") == "True":
            stamp = condition.get("lastTransitionTime")
            return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return None


def flushed(machine: dict[str, Any], delay: float, now: datetime) -> bool:
    since = drained_since(machine)
    return since is not None and (now - since).total_seconds() >= delay


async def reconcile_once(kube: KubeClient, namespace: str, selector: str | None,
                         delay: float) -> None:
    for machine in await machines(kube, namespace, selector):
        name = machine["metadata"]["name"]
        if not machine["metadata"].get("deletionTimestamp"):
            await add_hook(kube, machine, STAGE, HOOK, OWNER)
        elif (has_hook(machine, STAGE, HOOK) and flushed(machine, delay, datetime.now(UTC))
              and await remove_hook(kube, machine, STAGE, HOOK)):
            log.info("%s: logs flushed for %.0fs, removed preTerminate hook", name, delay)


async def run(kube: KubeClient, namespace: str, selector: str | None, delay: float,
              interval: float = 1.0) -> None:
    while True:
        try:
            await reconcile_once(kube, namespace, selector, delay)
        except Exception as error:  # keep going: the next pass sees fresh state
            log.warning("pass failed: %s", error)
        await asyncio.sleep(interval)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--selector", default=None, help="label selector for Machines")
    parser.add_argument("--delay", type=float, default=30.0, help="seconds after the drain")
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    async with await KubeClient.connect(args.kubeconfig) as kube:
        await run(kube, args.namespace, args.selector, args.delay, args.interval)


if __name__ == "__main__":
    asyncio.run(main())
