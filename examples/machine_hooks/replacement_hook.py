"""Example hook-implementing controller: a preDrain hook that waits for a replacement.

"Proactive replacement" (docs/machines.md; openshift/api machine/v1beta1 ``LifecycleHooks``): a
Machine of a MachineSet is not drained until the MachineSet has a replacement Machine, created after
the deletion began, in phase Running. Machines without a MachineSet are released at once (nothing
will replace them).

    python examples/machine_hooks/replacement_hook.py --namespace workers \
        --selector machine.openshift.io/cluster-api-machineset=workers

Each pass (every ``--interval`` seconds): add the hook to running Machines that match the
selector; for each deleting Machine that carries it, remove it once a replacement runs.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

from common import add_hook, has_hook, machines, remove_hook  # type: ignore[import-not-found]

from berthmaster.foundation.kube import KubeClient

HOOK = "WaitForReplacement"
OWNER = "example.berthmaster.io/replacement-hook"
STAGE = "preDrain"
log = logging.getLogger("replacement-hook")


def machineset_of(machine: dict[str, Any]) -> str | None:
    for ref in machine["metadata"].get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "MachineSet":
            return str(ref["uid"])
    return None


def replacement_running(machine: dict[str, Any], others: list[dict[str, Any]]) -> bool:
    """A Running Machine of the same MachineSet created at or after this one's deletion."""
    owner = machineset_of(machine)
    if owner is None:
        return True
    deleted_at = machine["metadata"]["deletionTimestamp"]
    return any(
        machineset_of(other) == owner and not other["metadata"].get("deletionTimestamp")
        and other["metadata"]["creationTimestamp"] >= deleted_at
        and (other.get("status") or {}).get("phase") == "Running"
        for other in others)


async def reconcile_once(kube: KubeClient, namespace: str, selector: str | None) -> None:
    found = await machines(kube, namespace, selector)
    for machine in found:
        name = machine["metadata"]["name"]
        if not machine["metadata"].get("deletionTimestamp"):
            await add_hook(kube, machine, STAGE, HOOK, OWNER)
        elif (has_hook(machine, STAGE, HOOK) and replacement_running(machine, found)
              and await remove_hook(kube, machine, STAGE, HOOK)):
            log.info("%s: replacement is Running, removed preDrain hook %s", name, HOOK)


async def run(kube: KubeClient, namespace: str, selector: str | None,
              interval: float = 2.0) -> None:
    while True:
        try:
            await reconcile_once(kube, namespace, selector)
        except Exception as error:  # keep going: the next pass sees fresh state
            log.warning("pass failed: %s", error)
        await asyncio.sleep(interval)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--selector", default=None, help="label selector for Machines")
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--interval", type=float, default=2.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    async with await KubeClient.connect(args.kubeconfig) as kube:
        await run(kube, args.namespace, args.selector, args.interval)


if __name__ == "__main__":
    asyncio.run(main())
