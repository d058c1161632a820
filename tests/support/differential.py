"""Runs :mod:`tests.support.scenarios` through berthmaster and kube-scheduler on one API server.

For each scenario the harness shapes a fixed pool of kwok nodes (labels, taints, cordon,
capacity, by PATCH: within a run of scenarios only deletions change the node count, so no new
node waits for the node-lifecycle controller; :meth:`Harness.grow` adds nodes back between
runs), waits until the controller's cordon taint matches, creates the scenario's running pods
(bound by ``spec.nodeName``), then for each incoming pod, in turn:

1. a copy for kube-scheduler; its outcome is read from the API server: bound (``spec.nodeName``),
   nominated (``status.nominatedNodeName`` with the failure: preemption), or unschedulable (the
   ``PodScheduled=False`` condition's message, the same text as the FailedScheduling event);
2. the copy is removed (after a preemption, once its victims are gone, they are created
   again), leaving the scenario as it was;
3. the same for berthmaster's copy;
4. when both bound the pod, their scores are compared: kube-scheduler's, read from its log
   (``-v=10``, :mod:`tests.support.kube_scheduler_log`), against berthmaster's engine asked to
   explain the same pod on a snapshot of the scenario (``Engine.schedule(explain=True,
   sample=False)``): the same feasible nodes, the same final score on every one of them, and
   berthmaster's node among kube-scheduler's top-scored. Where kube-scheduler stopped looking
   once it found enough feasible nodes (over 100 nodes: pkg/scheduler/schedule_one.go,
   numFeasibleNodesToFind) its scores are normalised over that sample, so they are not
   compared; those pods are counted apart;
5. when both bound the pod on different nodes, each node must be feasible for the other
   scheduler: berthmaster's engine is asked about kube-scheduler's node (on a snapshot of the
   scenario), and a third copy pinned to berthmaster's node (node affinity on
   ``metadata.name``) must be bound by kube-scheduler.

The ReplicaSets and StatefulSets that own some pods exist for the whole run, each kept
terminating (a finalizer holds it after its deletion): their controllers then neither create
nor delete pods (pkg/controller/replicaset/replica_set.go, syncReplicaSet, manages replicas only
when ``DeletionTimestamp`` is nil; pkg/controller/statefulset/stateful_set_control.go, likewise),
while the garbage collector leaves their pods alone (the owner exists), and both schedulers
still read their selectors for default spreading.

Scenarios with storage (:mod:`tests.support.volume_scenarios`) have their StorageClasses,
volumes, claims and CSI objects made before their pods; a copy that mounts claims may be bound
only once its claims are, so while it waits the harness plays the provisioner, and before the
next copy it puts the storage back as the scenario made it
(:mod:`tests.support.differential_storage`). Both schedulers therefore bind such pods for
real: PreBind's writes, the PV controller's binding and the wait included.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, group_path, resource_path
from berthmaster.scheduler.engine import Decision, Engine
from berthmaster.scheduler.snapshot import Snapshot
from berthmaster.tooling.devcluster.nodes import fake_node
from tests.support.differential_storage import PATHS as STORAGE_PATHS
from tests.support.differential_storage import Storage
from tests.support.kube_scheduler_log import Binding, ScoreCycle, ScoreLog
from tests.support.scenarios import (
    APPS,
    CONTROLLER_KINDS,
    CONTROLLER_LABEL,
    GPU,
    IMAGE,
    NAMESPACES,
    NODE_PREFIX,
    PRIORITY_CLASSES,
    RUNTIME_CLASS,
    RUNTIME_OVERHEAD,
    SERVICES,
    UNSCHEDULABLE_TAINT,
    NodeSpec,
    Scenario,
    controller_name,
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
LOG_WAIT = 15.0  # seconds for kube-scheduler's binding line to reach its log
DESCRIBED_LINES = 40  # of a scenario, in a disagreement's text
HOLD_FINALIZER = "berthmaster.test/differential-hold"
# berthmaster's Policy priority names -> the kube-scheduler Score plugin each one is (names
# not listed are taken as they are)
PLUGIN_OF_PRIORITY = {
    "TaintTolerationPriority": "TaintToleration",
    "NodeAffinityPriority": "NodeAffinity",
    "LeastRequestedPriority": "NodeResourcesFit",
    "MostRequestedPriority": "NodeResourcesFit",
    "EvenPodsSpreadPriority": "PodTopologySpread",
    "InterPodAffinityPriority": "InterPodAffinity",
    "BalancedResourceAllocation": "NodeResourcesBalancedAllocation",
    "ImageLocalityPriority": "ImageLocality",
}


@dataclass(frozen=True)
class Outcome:
    kind: str  # "bound" | "nominated" | "unschedulable"
    node: str | None
    message: str
    # kube-scheduler's, from its log, when it bound the pod: evaluated / feasible node counts
    # and its score cycle (None: a single feasible node, bound without scoring)
    binding: Binding | None = field(default=None, compare=False, repr=False)
    cycle: ScoreCycle | None = field(default=None, compare=False, repr=False)
    # the copy as the API server stored it: admission filled spec.overhead (RuntimeClass) and
    # spec.priority (Priority), which the engine reads
    created: JSON | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Disagreement:
    scenario: Scenario
    pod: JSON
    what: str
    kube: Outcome
    berthmaster: Outcome
    detail: str = ""
    kind: str = ""  # what it is, without the figures: disagreements of one kind share it
    config: str = ""  # the KubeSchedulerConfiguration both ran, when not the default profile

    def __str__(self) -> str:
        detail = f"\n{self.detail}" if self.detail else ""
        if self.config:
            detail += "\n  under the configuration:\n" + "\n".join(
                f"    {line}" for line in self.config.splitlines())
        scenario = self.scenario.describe().splitlines()
        if len(scenario) > DESCRIBED_LINES:
            left = len(scenario) - DESCRIBED_LINES
            scenario = [*scenario[:DESCRIBED_LINES],
                        f"  ... {left} more lines (the seed and the scenario index give them)"]
        return (f"{self.what}\n  kube-scheduler: {self.kube}\n  berthmaster:    "
                f"{self.berthmaster}{detail}\n  pod {describe_pod(self.pod)}\n"
                + "\n".join(scenario))


async def _until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 60.0) -> Any:
    return await wait_for(check, timeout=timeout, what=what, interval=POLL)


class Harness:
    """One control plane, two schedulers, a pool of nodes; see the module docstring."""

    def __init__(self, kube: KubeClient, kube_scheduler: str, berthmaster: str,
                 engine: Engine, kube_log: Path) -> None:
        self.kube = kube
        self.kube_scheduler = kube_scheduler
        self.berthmaster = berthmaster
        self.engine = engine
        self.kube_log = kube_log
        self.config = ""
        self.scores = ScoreLog()
        self._log_offset = 0
        self._log_partial = ""
        self.nodes: dict[str, NodeSpec] = {}
        self.owners: dict[tuple[str, str, str], str] = {}  # (namespace, kind, name) -> uid
        self.compared = 0
        self.outcomes: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()
        self.storage = Storage(kube)

    # ------------------------------------------------------------------ setup
    def use(self, kube_scheduler: str, berthmaster: str, engine: Engine, kube_log: Path,
            config: str = "") -> None:
        """Compare another pair of schedulers from now on (e.g. both under a generated
        configuration, ``config``'s text, which disagreements then quote): a fresh
        kube-scheduler process, its log read from the start."""
        self.kube_scheduler, self.berthmaster = kube_scheduler, berthmaster
        self.engine, self.kube_log, self.config = engine, kube_log, config
        self.scores = ScoreLog()
        self._log_offset, self._log_partial = 0, ""

    async def prepare(self, node_count: int) -> None:
        """Namespaces, priority classes, the RuntimeClass, Services, the (terminating)
        controllers and ``node_count`` Ready nodes."""
        for name, labels in NAMESPACES.items():
            # an earlier run's namespace of that name may still be terminating
            await wait_for(lambda name=name, labels=labels: self._namespace(  # type: ignore[misc]
                name, labels), timeout=180, what=f"namespace {name}", interval=0.5)
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
            for service, selector in SERVICES.items():
                with contextlib.suppress(KubeError):
                    await self.kube.create(resource_path(CORE, "services", name), {
                        "apiVersion": "v1", "kind": "Service",
                        "metadata": {"name": service, "namespace": name},
                        "spec": {"selector": selector,
                                 "ports": [{"port": 80, "targetPort": 8080}]}})
            for kind in CONTROLLER_KINDS:
                for app in APPS:
                    await self._hold_controller(name, kind, app)
        await self.grow(node_count)

    async def grow(self, node_count: int) -> None:
        """At least ``node_count`` nodes in the pool, each Ready without the node-lifecycle
        controller's taints (scenarios only ever shrink the pool: a run of scenarios after
        another, e.g. under another configuration, starts by growing it back)."""
        for i in range(node_count):
            name = f"{NODE_PREFIX}{i}"
            if name in self.nodes:
                continue
            with contextlib.suppress(KubeError):
                await self.kube.create(resource_path(CORE, "nodes"), fake_node(name))
            self.nodes[name] = NodeSpec(name, {}, [], {}, False)  # as fake_node() made it
        for name in list(self.nodes):
            await _until(lambda name=name: self._ready(name),  # type: ignore[misc]
                         f"node {name} Ready without lifecycle taints")

    def _controller_path(self, namespace: str, kind: str, name: str | None = None) -> str:
        plural = "replicasets" if kind == "ReplicaSet" else "statefulsets"
        return resource_path(group_path("apps", "v1"), plural, namespace, name)

    async def _hold_controller(self, namespace: str, kind: str, app: str) -> None:
        """The ``kind`` of ``app`` in ``namespace``, made (or found) and left terminating; its
        uid is kept for the ownerReferences of the pods it owns."""
        name = controller_name(kind, app)
        value = "rs" if kind == "ReplicaSet" else "ss"
        labels = {"app": app, CONTROLLER_LABEL: value}
        selector: JSON = ({"matchLabels": {"app": app}, "matchExpressions": [
            {"key": CONTROLLER_LABEL, "operator": "In", "values": [value]}]}
            if kind == "ReplicaSet" else {"matchLabels": labels})
        spec: JSON = {"replicas": 0, "selector": selector, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "c", "image": IMAGE}]}}}
        if kind == "StatefulSet":
            spec["serviceName"] = "diff-svc-web"
        path = self._controller_path(namespace, kind)
        with contextlib.suppress(KubeError):
            await self.kube.create(path, {
                "apiVersion": "apps/v1", "kind": kind,
                "metadata": {"name": name, "namespace": namespace,
                             "finalizers": [HOLD_FINALIZER]},
                "spec": spec})
        found = await self.kube.get(self._controller_path(namespace, kind, name))
        if not found["metadata"].get("deletionTimestamp"):
            await self.kube.delete(self._controller_path(namespace, kind, name))
        self.owners[(namespace, kind, name)] = found["metadata"]["uid"]

    def owned(self, pod: JSON) -> JSON:
        """``pod`` with its controller's uid in its ownerReference (the scenarios leave it
        empty)."""
        refs = pod["metadata"].get("ownerReferences")
        if not refs:
            return pod
        body = dict(pod)
        body["metadata"] = {**pod["metadata"], "ownerReferences": [
            {**ref, "uid": self.owners[(pod["metadata"]["namespace"], ref["kind"],
                                        ref["name"])]} for ref in refs]}
        return body

    async def cleanup(self) -> None:
        self.storage.use(None)
        with contextlib.suppress(KubeError, AssertionError):
            await self.storage.ensure()
        for namespace, kind, name in self.owners:
            with contextlib.suppress(KubeError):
                await self.kube.patch(self._controller_path(namespace, kind, name),
                                      {"metadata": {"finalizers": None}})
        for name in NAMESPACES:
            with contextlib.suppress(KubeError):
                await self.kube.delete(resource_path(CORE, "namespaces", name=name))
        for name in self.nodes:
            with contextlib.suppress(KubeError):
                await self.kube.delete(resource_path(CORE, "nodes", name=name))

    async def _namespace(self, name: str, labels: dict[str, str]) -> bool:
        """``name`` exists and is not terminating: created if missing; False while an earlier
        run's namespace of that name is still being deleted (its pods go first)."""
        try:
            await self.kube.create(resource_path(CORE, "namespaces"), {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": labels}})
            return True
        except KubeError as error:
            if not error.conflict:
                raise
        try:
            found = await self.kube.get(resource_path(CORE, "namespaces", name=name))
        except KubeError as error:
            if error.not_found:
                return False
            raise
        return not found["metadata"].get("deletionTimestamp")

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
                              {"status": {"capacity": resources, "allocatable": resources,
                                          "images": spec.images or None}})
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
            resource_path(CORE, "pods", pod["metadata"]["namespace"]), self.owned(pod))
            for pod in pods))
        await self._resize(pods)

    async def _resize(self, pods: list[JSON]) -> None:
        """Write the status of the running pods a scenario resized in place (its container
        statuses' ``resources`` and ``allocatedResources``, a ``PodResizePending``
        condition), as a kubelet reports them, once kwok made them Running: its pod-ready
        stage writes the container statuses once, and nothing of kwok's touches them after."""
        resized = [pod for pod in pods if pod.get("status")]

        async def write(pod: JSON) -> None:
            path = resource_path(CORE, "pods", pod["metadata"]["namespace"],
                                 pod["metadata"]["name"])

            async def running() -> bool:
                status = (await self.kube.get(path)).get("status") or {}
                return status.get("phase") == "Running"

            await _until(running, f"pod {pod['metadata']['name']} running")
            await self.kube.patch(resource_path(CORE, "pods", pod["metadata"]["namespace"],
                                                pod["metadata"]["name"], sub="status"),
                                  {"status": pod["status"]}, kind="strategic")

        await asyncio.gather(*(write(pod) for pod in resized))

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
        """Create a copy of ``pod`` for ``scheduler``, read the outcome, leave no trace; with
        kube-scheduler's binding and scores from its log when it bound the copy."""
        body = self.owned(copy_for(pod, scheduler, suffix))
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        key = f"{namespace}/{name}"
        if scheduler == self.kube_scheduler:
            self._read_log()  # the lines of an earlier copy of this name are behind us
            self.scores.forget(key)
        await self._storage_ready()
        claims = bool(body["spec"].get("volumes"))
        provisioner = asyncio.create_task(self.storage.provision()) if claims else None
        try:
            created = await self.kube.create(resource_path(CORE, "pods", namespace), body)
            outcome: Outcome = await _until(lambda: self._outcome(namespace, name),
                                            f"{scheduler}'s decision on {namespace}/{name}")
        finally:
            if provisioner is not None:
                provisioner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await provisioner
        if claims and outcome.kind != "unschedulable":
            self.storage.touched(body)
        outcome = Outcome(outcome.kind, outcome.node, outcome.message, created=created)
        if outcome.kind == "bound" and scheduler == self.kube_scheduler:
            outcome = await self._with_scores(outcome, key)
        await self._delete(namespace, name)
        if outcome.kind == "nominated":
            assert outcome.node is not None
            await self._restore(existing, outcome.node, scheduler)
        return outcome

    def _read_log(self) -> None:
        """Feed kube-scheduler's log lines written since the last read to ``self.scores``."""
        with self.kube_log.open("rb") as handle:
            handle.seek(self._log_offset)
            data = handle.read()
        self._log_offset += len(data)
        lines = (self._log_partial + data.decode("utf-8", errors="replace")).split("\n")
        self._log_partial = lines.pop()
        self.scores.feed(lines)

    async def _with_scores(self, outcome: Outcome, key: str) -> Outcome:
        """``outcome`` with kube-scheduler's binding line and last score cycle for ``key`` (the
        binding is logged once the API server accepted it: it may trail the bound pod)."""
        async def logged() -> Binding | None:
            self._read_log()
            return self.scores.bindings.get(key)

        binding: Binding = await _until(logged, f"kube-scheduler's log line binding {key}",
                                        LOG_WAIT)
        cycle = self.scores.last_cycle(key) if binding.feasible > 1 else None
        self.scores.forget(key)
        return Outcome(outcome.kind, outcome.node, outcome.message, binding, cycle,
                       outcome.created)

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
        await self._create_existing([
            p for p in existing
            if (p["metadata"]["namespace"], p["metadata"]["name"]) not in present])

    async def _storage_ready(self) -> None:
        """The scenario's storage as it made it; the seconds that took, by phase."""
        before = Counter(self.storage.seconds)
        await self.storage.ensure()
        for phase, seconds in (self.storage.seconds - before).items():
            self.seconds[f"storage {phase}"] += seconds

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
        self.storage.use(scenario.storage)
        await self._storage_ready()

    async def snapshot(self) -> Snapshot:
        """The scenario's cluster as berthmaster's engine sees it (its storage as the scenario
        made it)."""
        await self._storage_ready()
        nodes, _ = await self.kube.list_all(resource_path(CORE, "nodes"))
        namespaces, _ = await self.kube.list_all(resource_path(CORE, "namespaces"))
        services: list[JSON] = []
        replica_sets: list[JSON] = []
        stateful_sets: list[JSON] = []
        for name in NAMESPACES:
            services.extend((await self.kube.list_all(resource_path(CORE, "services", name)))[0])
            replica_sets.extend((await self.kube.list_all(
                self._controller_path(name, "ReplicaSet")))[0])
            stateful_sets.extend((await self.kube.list_all(
                self._controller_path(name, "StatefulSet")))[0])
        storage = {kind: (await self.kube.list_all(path))[0]
                   for kind, path in STORAGE_PATHS.items()}
        return Snapshot.build(nodes=nodes, pods=await self._namespace_pods(),
                              namespaces=namespaces, services=services,
                              replica_sets=replica_sets, stateful_sets=stateful_sets,
                              storage_classes=storage["StorageClass"],
                              csi_drivers=storage["CSIDriver"], csi_nodes=storage["CSINode"],
                              csi_storage_capacities=storage["CSIStorageCapacity"],
                              persistent_volume_claims=storage["PersistentVolumeClaim"],
                              persistent_volumes=storage["PersistentVolume"])

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
        snapshot = await self.snapshot()
        started = time.monotonic()
        kube = await self.place(pod, self.kube_scheduler, "k", scenario.existing)
        self.seconds["kube-scheduler"] += time.monotonic() - started
        started = time.monotonic()
        bm = await self.place(pod, self.berthmaster, "b", scenario.existing)
        self.seconds["berthmaster"] += time.monotonic() - started
        if count:
            self.outcomes[f"{kube.kind}/{bm.kind}"] += 1
            if pod["spec"].get("volumes"):
                self.outcomes[f"with claims {kube.kind}/{bm.kind}"] += 1

        def disagreement(what: str, kind: str, detail: str = "") -> Disagreement:
            return Disagreement(scenario, pod, what, kube, bm, detail, kind, self.config)

        if kube.kind != bm.kind:
            return disagreement("the schedulers disagree on whether the pod fits",
                                f"fit: kube-scheduler {kube.kind}, berthmaster {bm.kind}")
        if kube.kind != "bound":
            if kube.message != bm.message:
                return disagreement("FailedScheduling texts differ", "FailedScheduling text")
            return None
        assert kube.node is not None and bm.node is not None and bm.created is not None
        explained = self.engine.schedule(bm.created, snapshot, explain=True, sample=False)
        found = self._judge_scores(kube, bm, explained, len(snapshot.node_list()), count,
                                   disagreement)
        if found is not None:
            return found
        if kube.node == bm.node:
            return None
        if not await self._berthmaster_feasible(bm.created, kube.node):
            return disagreement(f"kube-scheduler's node {kube.node} is infeasible for "
                                "berthmaster", "kube-scheduler's node infeasible for berthmaster")
        check = await self.place(pinned(pod, bm.node), self.kube_scheduler, "p",
                                 scenario.existing)
        if check.kind != "bound":
            return disagreement(f"berthmaster's node {bm.node} is infeasible for "
                                f"kube-scheduler: {check.message}",
                                "berthmaster's node infeasible for kube-scheduler")
        return None

    def _judge_scores(self, kube: Outcome, bm: Outcome, explained: Decision, total: int,
                      count: bool, disagreement: Callable[..., Disagreement]
                      ) -> Disagreement | None:
        """Both bound the pod: the same feasible nodes, the same final score on each, and
        berthmaster's node among kube-scheduler's best (see the module docstring)."""
        assert kube.binding is not None and bm.node is not None
        cycle = kube.cycle
        kube_nodes = set(cycle.totals) if cycle is not None else {kube.node}
        bm_nodes = set(explained.scores)
        if kube.binding.evaluated < total:
            # kube-scheduler scored the first feasible nodes it found: only membership holds
            if count:
                self.outcomes["scores not compared: kube-scheduler scored a sample"] += 1
            extra = sorted(kube_nodes - bm_nodes)
            if extra:
                return disagreement(f"kube-scheduler found {extra} feasible, berthmaster not",
                                    "feasible nodes differ")
            return None
        if kube_nodes != bm_nodes:
            return disagreement(
                f"feasible nodes differ: only kube-scheduler {sorted(kube_nodes - bm_nodes)}, "
                f"only berthmaster {sorted(bm_nodes - kube_nodes)}", "feasible nodes differ")
        if cycle is None:
            if count:
                self.outcomes["one feasible node (nothing scored)"] += 1
            return None
        differing = sorted(n for n in kube_nodes if cycle.totals[n] != explained.scores[n])
        if differing:
            plugins, lines = self._plugin_differences(cycle, explained, differing)
            return disagreement(
                f"final scores differ on {len(differing)} of {len(kube_nodes)} nodes",
                f"final scores differ ({', '.join(plugins) or 'no plugin differs'})",
                "\n".join(lines))
        if count:
            self.outcomes["scores compared (all equal)"] += 1
            self.outcomes["node scores compared"] += len(kube_nodes)
        top = cycle.top()
        if bm.node not in top:
            return disagreement(
                f"berthmaster's node {bm.node} scored {cycle.totals.get(bm.node)}, "
                f"kube-scheduler's best {sorted(top)} {max(cycle.totals.values())}",
                "berthmaster's node not among kube-scheduler's best")
        return None

    def _weighted(self, explained: Decision, node: str) -> dict[str, int]:
        """berthmaster's weighted score per kube-scheduler plugin name on ``node``."""
        out: Counter[str] = Counter()
        breakdown = explained.priority_scores.get(node, {})
        for priority in self.engine.policy.priorities:
            if priority.name in breakdown:
                plugin = PLUGIN_OF_PRIORITY.get(priority.NAME, priority.name)
                out[plugin] += priority.weight * breakdown[priority.name]
        return dict(out)

    def _plugin_differences(self, cycle: ScoreCycle, explained: Decision,
                            nodes: list[str]) -> tuple[list[str], list[str]]:
        """The plugins whose weighted scores differ on ``nodes``, and a line per node with the
        totals and each differing plugin's figures (kube-scheduler / berthmaster; a plugin
        kube-scheduler skipped in PreScore has no line of its own there and counts as 0)."""
        plugins: set[str] = set()
        lines = []
        for node in nodes:
            theirs = cycle.plugins.get(node, {})
            ours = self._weighted(explained, node)
            diff = {p: (theirs.get(p, 0), ours.get(p, 0)) for p in sorted({*theirs, *ours})
                    if theirs.get(p, 0) != ours.get(p, 0)}
            plugins.update(diff)
            figures = ", ".join(f"{p} {k}/{b}" for p, (k, b) in diff.items())
            lines.append(f"  {node}: total {cycle.totals[node]}/{explained.scores[node]}"
                         f" (kube-scheduler/berthmaster){': ' + figures if figures else ''}")
        return sorted(plugins), lines
