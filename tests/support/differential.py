"""Runs :mod:`tests.support.scenarios` through berthmaster and kube-scheduler on one API server.

For each scenario the harness shapes a fixed pool of kwok nodes (labels, taints, cordon,
capacity, by PATCH: only deletions change the node count, so no new node ever waits for the
node-lifecycle controller), waits until the controller's cordon taint matches, creates the
scenario's running pods (bound by ``spec.nodeName``), then for each incoming pod, in turn:

1. a copy for kube-scheduler; its outcome is read from the API server: bound (``spec.nodeName``),
   nominated (``status.nominatedNodeName`` with the failure: preemption), or unschedulable (the
   ``PodScheduled=False`` condition's message, the same text as the FailedScheduling event);
2. the copy is removed (after a preemption, once its victims are gone, they are created
   again), leaving the scenario as it was;
3. the same for berthmaster's copy;
4. when both bound the pod on different nodes, each node must be feasible for the other
   scheduler: berthmaster's engine is asked about kube-scheduler's node (on a snapshot of the
   scenario), and a third copy pinned to berthmaster's node (node affinity on
   ``metadata.name``) must be bound by kube-scheduler.

Pods of one watch stream reach a scheduler in order, so a scheduler always sees the previous
copy's deletion before the next copy's creation. Node updates travel on another stream, so a
scheduler may still see a node's previous shape: a pod whose outcomes differ is compared once
more after a short settle, and only a difference that repeats counts (one that went away is
tallied in the outcomes). Differences are returned as
:class:`Disagreement` values naming the scenario and the pod; nothing here asserts.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from berthmaster.devcluster.nodes import fake_node
from berthmaster.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.scenarios import (
    GPU,
    MAX_NODES,
    NAMESPACES,
    NODE_PREFIX,
    PRIORITY_CLASSES,
    RUNTIME_CLASS,
    RUNTIME_OVERHEAD,
    UNSCHEDULABLE_TAINT,
    NodeSpec,
    Scenario,
    copy_for,
    describe_pod,
    pinned,
)
from tests.support.waiting import wait_for

JSON = dict[str, Any]
POLL = 0.01
PREEMPTION_TIMEOUT = 60.0
VICTIM_WAIT = 15.0
VICTIM_SETTLE = 0.3
LIFECYCLE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
RETRY_SETTLE = 2.0  # seconds before a disagreement is compared once more


@dataclass(frozen=True)
class Outcome:
    kind: str  # "bound" | "nominated" | "unschedulable"
    node: str | None
    message: str


@dataclass(frozen=True)
class Disagreement:
    scenario: Scenario
    pod: JSON
    what: str
    kube: Outcome
    berthmaster: Outcome

    def __str__(self) -> str:
        return (f"{self.what}\n  kube-scheduler: {self.kube}\n  berthmaster:    "
                f"{self.berthmaster}\n  pod {describe_pod(self.pod)}\n"
                f"{self.scenario.describe()}")


async def _until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 60.0) -> Any:
    return await wait_for(check, timeout=timeout, what=what, interval=POLL)


class Harness:
    """One control plane, two schedulers, a pool of nodes; see the module docstring."""

    def __init__(self, kube: KubeClient, kube_scheduler: str, berthmaster: str,
                 engine: Engine) -> None:
        self.kube = kube
        self.kube_scheduler = kube_scheduler
        self.berthmaster = berthmaster
        self.engine = engine
        self.nodes: dict[str, NodeSpec] = {}
        self.compared = 0
        self.outcomes: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()

    # ------------------------------------------------------------------ setup
    async def prepare(self) -> None:
        """Namespaces, priority classes, the RuntimeClass and MAX_NODES Ready nodes."""
        for name, labels in NAMESPACES.items():
            with contextlib.suppress(KubeError):
                await self.kube.create(resource_path(CORE, "namespaces"), {
                    "apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": name, "labels": labels}})
        for name, (value, policy) in PRIORITY_CLASSES.items():
            with contextlib.suppress(KubeError):
                await self.kube.create(
                    resource_path(group_path("scheduling.k8s.io", "v1"), "priorityclasses"),
                    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                     "metadata": {"name": name}, "value": value, "preemptionPolicy": policy})
        with contextlib.suppress(KubeError):
            await self.kube.create(
                resource_path(group_path("node.k8s.io", "v1"), "runtimeclasses"),
                {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                 "metadata": {"name": RUNTIME_CLASS}, "handler": "runc",
                 "overhead": {"podFixed": RUNTIME_OVERHEAD}})
        for name in NAMESPACES:
            await _until(lambda name=name: self._exists(  # type: ignore[misc]
                resource_path(CORE, "serviceaccounts", name, "default")),
                f"serviceaccount default in {name}")
        for i in range(MAX_NODES):
            name = f"{NODE_PREFIX}{i}"
            with contextlib.suppress(KubeError):
                await self.kube.create(resource_path(CORE, "nodes"), fake_node(name))
            self.nodes[name] = NodeSpec(name, {}, [], {}, False)  # as fake_node() made it
        for name in list(self.nodes):
            await _until(lambda name=name: self._ready(name),  # type: ignore[misc]
                         f"node {name} Ready without lifecycle taints")

    async def cleanup(self) -> None:
        for name in NAMESPACES:
            with contextlib.suppress(KubeError):
                await self.kube.delete(resource_path(CORE, "namespaces", name=name))
        for name in self.nodes:
            with contextlib.suppress(KubeError):
                await self.kube.delete(resource_path(CORE, "nodes", name=name))

    async def _exists(self, path: str) -> bool:
        try:
            await self.kube.get(path)
        except KubeError as error:
            if error.not_found:
                return False
            raise
        return True

    async def _ready(self, name: str) -> bool:
        node = await self.kube.get(resource_path(CORE, "nodes", name=name))
        taints = (node.get("spec") or {}).get("taints") or []
        if any(t.get("key") in LIFECYCLE_TAINTS for t in taints):
            return False
        return any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (node.get("status") or {}).get("conditions") or [])

    async def _shape_nodes(self, scenario: Scenario) -> None:
        wanted = {n.name: n for n in scenario.nodes}
        for name in sorted(set(self.nodes) - set(wanted)):
            await self.kube.delete(resource_path(CORE, "nodes", name=name))
            del self.nodes[name]
        changed = [spec for name, spec in wanted.items() if self.nodes.get(name) != spec]
        await asyncio.gather(*(self._shape_node(spec) for spec in changed))
        await asyncio.gather(*(_until(lambda spec=spec: self._settled(spec),  # type: ignore[misc]
                                      f"node {spec.name}'s taints settled")
                               for spec in changed))

    async def _shape_node(self, spec: NodeSpec) -> None:
        name = spec.name
        base = fake_node(name)["metadata"]["labels"]
        labels = {**base, **spec.labels}
        previous = self.nodes[name]
        label_patch: dict[str, str | None] = {k: None for k in previous.labels
                                              if k not in labels}
        label_patch.update(labels)
        await self.kube.patch(resource_path(CORE, "nodes", name=name), {
            "metadata": {"labels": label_patch},
            "spec": {"taints": spec.taints or None, "unschedulable": spec.unschedulable}})
        resources: dict[str, str | None] = dict(spec.capacity)
        if GPU not in spec.capacity:
            resources[GPU] = None
        await self.kube.patch(resource_path(CORE, "nodes", name=name, sub="status"),
                              {"status": {"capacity": resources, "allocatable": resources}})
        self.nodes[name] = spec

    async def _settled(self, spec: NodeSpec) -> bool:
        """Whether the node-lifecycle controller's cordon taint matches ``spec``."""
        expected = {(t["key"], t["effect"]) for t in spec.taints}
        if spec.unschedulable:
            expected.add((UNSCHEDULABLE_TAINT["key"], UNSCHEDULABLE_TAINT["effect"]))
        node = await self.kube.get(resource_path(CORE, "nodes", name=spec.name))
        taints = (node.get("spec") or {}).get("taints") or []
        return {(t["key"], t["effect"]) for t in taints} == expected

    async def _namespace_pods(self) -> list[JSON]:
        pods: list[JSON] = []
        for name in NAMESPACES:
            items, _ = await self.kube.list_all(resource_path(CORE, "pods", name))
            pods.extend(items)
        return pods

    async def _clear_pods(self) -> None:
        async def delete(pod: JSON) -> None:
            meta = pod["metadata"]
            with contextlib.suppress(KubeError):
                await self.kube.delete(resource_path(CORE, "pods", meta["namespace"],
                                                     meta["name"]), gracePeriodSeconds=0)

        await asyncio.gather(*(delete(pod) for pod in await self._namespace_pods()))

        async def empty() -> bool:
            return not await self._namespace_pods()

        await _until(empty, "the previous scenario's pods gone")

    async def _create_existing(self, pods: list[JSON]) -> None:
        await asyncio.gather(*(self.kube.create(
            resource_path(CORE, "pods", pod["metadata"]["namespace"]), pod) for pod in pods))

    # ------------------------------------------------------------------ one pod
    async def _outcome(self, namespace: str, name: str) -> Outcome | None:
        pod = await self.kube.get(resource_path(CORE, "pods", namespace, name))
        node = (pod.get("spec") or {}).get("nodeName")
        status = pod.get("status") or {}
        failure = next((c for c in status.get("conditions") or []
                        if c.get("type") == "PodScheduled" and c.get("status") == "False"),
                       None)
        if node and failure is None:
            return Outcome("bound", node, "")
        if failure is None:
            return None
        message = failure.get("message") or ""
        nominated = status.get("nominatedNodeName")
        if nominated:
            return Outcome("nominated", nominated, message)
        return Outcome("unschedulable", None, message)

    async def _gone(self, namespace: str, name: str) -> bool:
        return not await self._exists(resource_path(CORE, "pods", namespace, name))

    async def _delete(self, namespace: str, name: str) -> None:
        with contextlib.suppress(KubeError):
            await self.kube.delete(resource_path(CORE, "pods", namespace, name),
                                   gracePeriodSeconds=0)
        await _until(lambda: self._gone(namespace, name), f"pod {namespace}/{name} deleted")

    async def place(self, pod: JSON, scheduler: str, suffix: str,
                    existing: list[JSON]) -> Outcome:
        """Create a copy of ``pod`` for ``scheduler``, read the outcome, leave no trace."""
        body = copy_for(pod, scheduler, suffix)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        await self.kube.create(resource_path(CORE, "pods", namespace), body)
        outcome: Outcome = await _until(lambda: self._outcome(namespace, name),
                                        f"{scheduler}'s decision on {namespace}/{name}")
        await self._delete(namespace, name)
        if outcome.kind == "nominated":
            assert outcome.node is not None
            await self._restore(existing, outcome.node, scheduler)
        return outcome

    async def _restore(self, existing: list[JSON], node: str, scheduler: str) -> None:
        """Recreate the preemption's victims: at least one running pod on the nominated
        ``node`` is being deleted (a nomination always has victims, deleted at once); once
        none is terminating any more, the missing ones are created again."""
        names = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in existing
                 if p["spec"]["nodeName"] == node}

        async def victims_deleted() -> bool:
            live = {(p["metadata"]["namespace"], p["metadata"]["name"]): p
                    for p in await self._namespace_pods()}
            return any(k not in live or live[k]["metadata"].get("deletionTimestamp")
                       for k in names)

        async def none_terminating() -> bool:
            return not any(p["metadata"].get("deletionTimestamp")
                           for p in await self._namespace_pods())

        try:
            await _until(victims_deleted, f"preemption victims on {node}", VICTIM_WAIT)
        except AssertionError:
            # counted, not asserted: the next scenario starts from scratch in any case
            self.outcomes[f"{scheduler} nominated without deleting a victim"] += 1
        await _until(none_terminating, "victims gone", PREEMPTION_TIMEOUT)
        await asyncio.sleep(VICTIM_SETTLE)  # parallel victim deletions all land
        await _until(none_terminating, "victims gone", PREEMPTION_TIMEOUT)
        present = {(p["metadata"]["namespace"], p["metadata"]["name"])
                   for p in await self._namespace_pods()}
        await asyncio.gather(*(
            self.kube.create(resource_path(CORE, "pods", p["metadata"]["namespace"]), p)
            for p in existing
            if (p["metadata"]["namespace"], p["metadata"]["name"]) not in present))

    async def _berthmaster_feasible(self, pod: JSON, node: str) -> bool:
        return self.engine.fits(pod, node, await self.snapshot())

    # ------------------------------------------------------------------ a scenario
    async def setup(self, scenario: Scenario) -> None:
        """The scenario's nodes and running pods, nothing else, in the two namespaces."""
        started = time.monotonic()
        await self._clear_pods()
        self.seconds["clear"] += time.monotonic() - started
        started = time.monotonic()
        await self._shape_nodes(scenario)
        self.seconds["nodes"] += time.monotonic() - started
        await self._create_existing(scenario.existing)

    async def snapshot(self) -> Snapshot:
        """The scenario's cluster as berthmaster's engine sees it."""
        nodes, _ = await self.kube.list_all(resource_path(CORE, "nodes"))
        namespaces, _ = await self.kube.list_all(resource_path(CORE, "namespaces"))
        return Snapshot.build(nodes=nodes, pods=await self._namespace_pods(),
                              namespaces=namespaces)

    async def run(self, scenario: Scenario) -> list[Disagreement]:
        await self.setup(scenario)
        found: list[Disagreement] = []
        for pod in scenario.incoming:
            self.compared += 1
            disagreement = await self.compare(scenario, pod, count=True)
            if disagreement is None:
                continue
            # Each scheduler's watch trails the node shapes just written on its own: a stale
            # view seen by one of them does not repeat, a real difference in semantics does.
            await asyncio.sleep(RETRY_SETTLE)
            again = await self.compare(scenario, pod, count=False)
            if again is None:
                self.outcomes["differed once, agreed when compared again"] += 1
            else:
                found.append(again)
        return found

    async def compare(self, scenario: Scenario, pod: JSON, count: bool) -> Disagreement | None:
        """Place ``pod`` with each scheduler in turn; the disagreement, if any."""
        started = time.monotonic()
        kube = await self.place(pod, self.kube_scheduler, "k", scenario.existing)
        self.seconds["kube-scheduler"] += time.monotonic() - started
        started = time.monotonic()
        bm = await self.place(pod, self.berthmaster, "b", scenario.existing)
        self.seconds["berthmaster"] += time.monotonic() - started
        if count:
            self.outcomes[f"{kube.kind}/{bm.kind}"] += 1

        def disagreement(what: str) -> Disagreement:
            return Disagreement(scenario, pod, what, kube, bm)

        if kube.kind != bm.kind:
            return disagreement("the schedulers disagree on whether the pod fits")
        if kube.kind != "bound":
            if kube.message != bm.message:
                return disagreement("FailedScheduling texts differ")
            return None
        if kube.node == bm.node:
            return None
        assert kube.node is not None and bm.node is not None
        if not await self._berthmaster_feasible(copy_for(pod, self.berthmaster, "f"),
                                                kube.node):
            return disagreement(f"kube-scheduler's node {kube.node} is infeasible for "
                                "berthmaster")
        check = await self.place(pinned(pod, bm.node), self.kube_scheduler, "p",
                                 scenario.existing)
        if check.kind != "bound":
            return disagreement(f"berthmaster's node {bm.node} is infeasible for "
                                f"kube-scheduler: {check.message}")
        return None
