"""What must never happen during the fault campaign, as pure functions over API objects.

Each function returns the breaches it finds as sentences (empty: none). They read pods and
nodes through the scheduler's parsed views (``PodView``/``NodeView``: one parser of requests,
taints, selectors), but each rule is written here on its own, so a bug in a scheduler plugin is
not repeated by the check that should catch it.

Timing is the caller's: bind-time rules are given the cluster as the checker's single pod watch
saw it when the binding arrived (one stream, so one order). Where the scheduler may rightly
have decided on a slightly older view (a pod or node deleted a moment before), the caller
passes those recent departures in, and the rules count them as still there — the lenient side.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from berthmaster.scheduler.model import NodeView, PodView

Obj = dict[str, Any]
MIN_SIZE_KEY = "machine.openshift.io/cluster-api-autoscaler-node-group-min-size"
MAX_SIZE_KEY = "machine.openshift.io/cluster-api-autoscaler-node-group-max-size"
# A Machine deletion's events, in the order the drain step posts them (operator/machines/
# events.py: upstream's "Deleted" ('Node "<name>" drained') comes before DrainSucceeded).
DELETION_EVENTS = ("DrainProceeds", "Deleted", "DrainSucceeded")
DRAIN_REQUEUED = "DrainRequeued"


def occupies(pod: PodView) -> bool:
    """A pod that holds its node's resources: bound, not finished, not being deleted."""
    return bool(pod.node_name) and pod.phase not in ("Succeeded", "Failed") and not pod.deleting


# ------------------------------------------------------------------ binding


def rebinding(first_node: str | None, node_name: str) -> str | None:
    """A pod seen on ``first_node`` earlier and on ``node_name`` now was bound twice."""
    if first_node and node_name and first_node != node_name:
        return f"bound twice: first to {first_node}, then to {node_name}"
    return None


def scheduled_twice(pod: str, counts: Iterable[int]) -> str | None:
    """More than one ``Scheduled`` event (summing aggregated counts) for one pod: it was
    bound twice, or a failed second binding was reported as a success."""
    total = sum(counts)
    if total > 1:
        return f"{pod}: {total} Scheduled events"
    return None


def overcommit(node: NodeView, pods: Iterable[PodView]) -> list[str]:
    """Requests (cpu, memory, pods, extended resources) beyond allocatable, and host ports
    taken twice, among the pods occupying ``node``."""
    used: Counter[str] = Counter()
    ports: Counter[tuple[str, str, int]] = Counter()
    count = 0
    for pod in pods:
        if not occupies(pod) or pod.node_name != node.name:
            continue
        count += 1
        used.update(pod.requests)
        ports.update(set(pod.host_ports))
    used["pods"] = count
    found = [f"node {node.name}: {resource} requested {amount} > allocatable "
             f"{node.allocatable.get(resource, 0)}"
             for resource, amount in sorted(used.items())
             if amount > node.allocatable.get(resource, 0) and (amount or resource == "pods")]
    found += [f"node {node.name}: host port {protocol}/{port} ({ip or '0.0.0.0'}) used by "
              f"{times} pods" for (ip, protocol, port), times in sorted(ports.items())
              if times > 1]
    return found


def untolerated(pod: PodView, node: NodeView) -> str | None:
    """A NoSchedule/NoExecute taint of the node that the pod does not tolerate."""
    for taint in node.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(t.tolerates(taint) for t in pod.tolerations):
            return f"untolerated taint {taint.key}={taint.value}:{taint.effect}"
    return None


def node_affinity_mismatch(pod: PodView, node: NodeView) -> str | None:
    """The pod's nodeSelector or required node affinity does not select the node."""
    for key, value in pod.node_selector.items():
        if node.labels.get(key) != value:
            return f"nodeSelector {key}={value} does not match node {node.name}"
    if pod.required_node_affinity is not None and \
            not pod.required_node_affinity.matches(node.name, node.labels):
        return f"required node affinity does not select node {node.name}"
    return None


def _domain(node: NodeView | None, key: str) -> str | None:
    return None if node is None else node.labels.get(key)


def anti_affinity_violation(pod: PodView, node: NodeView, others: Iterable[PodView],
                            nodes: Mapping[str, NodeView]) -> str | None:
    """Required pod anti-affinity broken by the pod's placement, either way round: one of its
    terms matches a pod in the same topology domain, or a placed pod's term matches it."""
    for other in others:
        if other.uid == pod.uid or not occupies(other):
            continue
        other_node = nodes.get(other.node_name)
        for term in pod.anti_required:
            domain = _domain(node, term.topology_key)
            if domain is not None and domain == _domain(other_node, term.topology_key) \
                    and other.namespace in term.namespaces and term.selector.matches(other.labels):
                return (f"required anti-affinity ({term.topology_key}) with "
                        f"{other.key} on {other.node_name}")
        for term in other.anti_required:
            domain = _domain(other_node, term.topology_key)
            if domain is not None and domain == _domain(node, term.topology_key) \
                    and pod.namespace in term.namespaces and term.selector.matches(pod.labels):
                return (f"{other.key} on {other.node_name} has required anti-affinity "
                        f"({term.topology_key}) against it")
    return None


def spread_violation(pod: PodView, node: NodeView, others: Iterable[PodView],
                     nodes: Mapping[str, NodeView],
                     recently_gone: Sequence[PodView] = ()) -> str | None:
    """A ``DoNotSchedule`` topology spread constraint broken by the placement: after it, the
    node's domain holds more than ``maxSkew`` above the least-populated eligible domain.

    Eligible domains are those of nodes the pod's nodeSelector/required affinity select
    (upstream's default ``nodeAffinityPolicy: Honor``). ``recently_gone`` pods count in the
    other domains only: pods that left a moment ago (the scheduler may not have seen them go)
    and pods whose bindings landed a moment later (decided before this one, bound after)."""
    placed = [o for o in others if o.uid != pod.uid and occupies(o)]
    for constraint in pod.spread_constraints:
        if constraint.when_unsatisfiable != "DoNotSchedule":
            continue
        key = constraint.topology_key
        counts: Counter[str] = Counter()
        for candidate in nodes.values():
            if key in candidate.labels and node_affinity_mismatch(pod, candidate) is None:
                counts[candidate.labels[key]] += 0
        if key not in node.labels:
            return f"spread: node {node.name} has no {key} label"
        domain = node.labels[key]
        leaving: Counter[str] = Counter()
        for other in [*placed, *recently_gone]:
            other_domain = _domain(nodes.get(other.node_name), key)
            if other_domain is None or other_domain not in counts \
                    or other.namespace != pod.namespace \
                    or not constraint.selector.matches(other.labels):
                continue
            if other in recently_gone:
                leaving[other_domain] += 1
            else:
                counts[other_domain] += 1
        if not counts:
            continue
        floor = min(counts[d] + (leaving[d] if d != domain else 0) for d in counts)
        skew = counts[domain] + 1 - floor
        if skew > constraint.max_skew:
            return (f"spread ({key}, maxSkew {constraint.max_skew}): {counts[domain]} matching "
                    f"pods already in {domain}, fewest elsewhere {floor}")
    return None


def bind_breaches(pod: PodView, node: NodeView | None, others: Sequence[PodView],
                  nodes: Mapping[str, NodeView],
                  recently_gone: Sequence[PodView] = ()) -> list[str]:
    """Every hard constraint the pod's binding to ``node`` breaks."""
    if node is None:
        return []  # a binding to a node that is gone: the pod GC deals with it
    found = [untolerated(pod, node), node_affinity_mismatch(pod, node),
             anti_affinity_violation(pod, node, others, nodes),
             spread_violation(pod, node, others, nodes, recently_gone)]
    return [f"{pod.key} on {node.name}: {problem}" for problem in found if problem]


# ------------------------------------------------------------------ leader election


@dataclass(frozen=True)
class Takeover:
    """The Lease passed from ``old`` to ``new`` at ``at`` (seconds, the checker's clock)."""

    at: float
    old: str
    new: str


def bind_after_lost_lease(reporter: str, bound_at: float, takeovers: Sequence[Takeover],
                          grace: float, action: str = "bound a pod") -> str | None:
    """A binding (or another act of a leader: ``action``) by ``reporter`` more than ``grace``
    seconds after another replica took the Lease from it (and before it took it back): it
    acted without being the leader."""
    lost: float | None = None
    for takeover in sorted(takeovers, key=lambda t: t.at):
        if takeover.at > bound_at:
            break
        if takeover.old == reporter and takeover.new != reporter:
            lost = takeover.at
        elif takeover.new == reporter:
            lost = None
    if lost is not None and bound_at - lost > grace:
        return (f"{reporter} {action} {bound_at - lost:.1f}s after it lost the Lease "
                "to another replica")
    return None


# ------------------------------------------------------------------ disruption budgets


def pdb_minimum(pdb: Obj, expected: int) -> int | None:
    """The healthy count a PodDisruptionBudget guarantees for ``expected`` pods (integer or
    percentage ``minAvailable``, or ``expected - maxUnavailable``)."""
    spec = pdb.get("spec") or {}
    if "minAvailable" in spec:
        return _count(spec["minAvailable"], expected, round_up=True)
    if "maxUnavailable" in spec:
        return expected - _count(spec["maxUnavailable"], expected, round_up=True)
    return None


def _count(value: int | str, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = int(value[:-1]) * total
        return -(-share // 100) if round_up else share // 100
    return int(value)


def healthy(pod: Obj) -> bool:
    """Upstream's healthy pod for a budget: Running and Ready, not being deleted."""
    status = pod.get("status") or {}
    if (pod.get("metadata") or {}).get("deletionTimestamp") or status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in status.get("conditions") or ())


def pdb_breach(name: str, minimum: int, healthy_before: int, healthy_after: int,
               disrupted: str) -> str | None:
    """A budget that held and stops holding because one of its pods was disrupted (evicted or
    deleted by a component), as the Eviction API must refuse."""
    if healthy_before >= minimum > healthy_after:
        return (f"PodDisruptionBudget {name}: healthy {healthy_after} < minimum {minimum} "
                f"after {disrupted} went")
    return None


# ------------------------------------------------------------------ Machines


def hooks(machine: Obj, stage: str) -> list[str]:
    spec = machine.get("spec") or {}
    return [str(h.get("name")) for h in (spec.get("lifecycleHooks") or {}).get(stage) or ()]


def condition_status(obj: Obj, kind: str) -> str | None:
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return None


def machine_breaches(machine: Obj) -> list[str]:
    """One recorded version of a Machine: a drain begun (recorded progress or Drained=True)
    while preDrain hooks remain. A skipped drain (exclude-node-draining or no Node: Drained
    True, "Node drain skipped") waits on no hook, as upstream's drain controller."""
    name = (machine.get("metadata") or {}).get("name")
    progress = (machine.get("status") or {}).get("deletionProgress") or {}
    pre_drain = hooks(machine, "preDrain")
    drained = [c for c in (machine.get("status") or {}).get("conditions") or ()
               if c.get("type") == "Drained" and c.get("status") == "True"]
    skipped = any(c.get("message") == "Node drain skipped" for c in drained)
    if pre_drain and (progress.get("drainStartedAt") or (drained and not skipped)):
        return [f"Machine {name}: drain began with preDrain hooks {pre_drain}"]
    return []


def instance_gone_early(machine: Obj, instance_exists: bool) -> str | None:
    """The instance (for kwok Machines, the Node) deleted while preTerminate hooks remain.
    Hooks cannot be added once deletion began, so hooks present now were present then."""
    pre_terminate = hooks(machine, "preTerminate")
    meta = machine.get("metadata") or {}
    if not instance_exists and meta.get("deletionTimestamp") and pre_terminate:
        return f"Machine {meta.get('name')}: instance deleted with preTerminate hooks " \
               f"{pre_terminate}"
    return None


def deletion_event_breaches(machine: str, events: Sequence[tuple[str, int, str]]) -> list[str]:
    """The Machine's deletion events (reason, count, first time) first appear in
    ``DELETION_EVENTS`` order; Deleted and DrainSucceeded happen at most once, and DrainProceeds
    once per drain attempt: once more than DrainRequeued (machine-api-operator's drain
    controller records DrainProceeds at each attempt and DrainRequeued at each one that failed,
    e.g. on a PodDisruptionBudget that refuses an eviction past the attempt's timeout)."""
    found = []
    first: dict[str, str] = {}
    totals: Counter[str] = Counter()
    for reason, count, when in events:
        if reason in DELETION_EVENTS or reason == DRAIN_REQUEUED:
            totals[reason] += count
        if reason in DELETION_EVENTS:
            first[reason] = min(first.get(reason, when), when)
    for reason, total in sorted(totals.items()):
        allowed = totals[DRAIN_REQUEUED] + 1 if reason == "DrainProceeds" else 1
        if reason in DELETION_EVENTS and total > allowed:
            found.append(f"Machine {machine}: {reason} happened {total} times"
                         + (f" after {totals[DRAIN_REQUEUED]} DrainRequeued"
                            if reason == "DrainProceeds" else ""))
    seen = [r for r in DELETION_EVENTS if r in first]
    for earlier, later in pairwise(seen):
        if first[later] < first[earlier]:
            found.append(f"Machine {machine}: {later} ({first[later]}) before {earlier} "
                         f"({first[earlier]})")
    return found


# ------------------------------------------------------------------ autoscaling


def replicas_breach(machine_set: Obj) -> str | None:
    """An autoscaled MachineSet whose replicas left its MachineAutoscaler's min/max."""
    meta = machine_set.get("metadata") or {}
    notes = meta.get("annotations") or {}
    if MIN_SIZE_KEY not in notes or MAX_SIZE_KEY not in notes:
        return None
    replicas = int((machine_set.get("spec") or {}).get("replicas") or 0)
    low, high = int(notes[MIN_SIZE_KEY]), int(notes[MAX_SIZE_KEY])
    if not low <= replicas <= high:
        return f"MachineSet {meta.get('name')}: replicas {replicas} outside [{low}, {high}]"
    return None


def cluster_limit_breach(machine_sets: Iterable[Obj], other_nodes: int,
                         max_nodes_total: int | None) -> str | None:
    """Autoscaled replicas plus the nodes no MachineSet owns above ``maxNodesTotal``."""
    if max_nodes_total is None:
        return None
    total = other_nodes + sum(int((m.get("spec") or {}).get("replicas") or 0)
                              for m in machine_sets)
    if total > max_nodes_total:
        return f"ClusterAutoscaler: {total} nodes wanted > maxNodesTotal {max_nodes_total}"
    return None


# ------------------------------------------------------------------ liveness and memory


def unschedulable_reason(pod: Obj) -> str | None:
    """The PodScheduled=False/Unschedulable message of a pending pod (None when missing)."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False" \
                and condition.get("reason") == "Unschedulable":
            return str(condition.get("message") or "")
    return None


def stale_reason(pod: Obj, node_count: int, last_event: float | None,
                 last_fault: float) -> str | None:
    """A pending pod whose scheduling failure is not reported, or not reported for the cluster
    as it is: no ``FailedScheduling`` event or no Unschedulable condition; or neither a
    ``FailedScheduling`` event since the last fault (``last_event``, ``last_fault``: seconds)
    nor a message that counts the nodes the cluster has (``0/N nodes are available``)."""
    meta = pod.get("metadata") or {}
    key = f"{meta.get('namespace')}/{meta.get('name')}"
    message = unschedulable_reason(pod)
    if last_event is None:
        return f"{key}: pending with no FailedScheduling event"
    if message is None:
        return f"{key}: pending with no PodScheduled=False Unschedulable condition"
    if last_event < last_fault and not message.startswith(f"0/{node_count} nodes are available"):
        return f"{key}: reason out of date for {node_count} nodes: {message[:100]}"
    return None


def rss_breach(component: str, start_kib: int, end_kib: int, bound_kib: int) -> str | None:
    """Resident memory of one process life grown by ``bound_kib`` or more."""
    if end_kib - start_kib >= bound_kib:
        return (f"{component}: RSS grew {start_kib // 1024} -> {end_kib // 1024} MiB "
                f"(bound {bound_kib // 1024} MiB)")
    return None


def rss_summary(lives: Mapping[tuple[str, int], Sequence[int]]) -> dict[str, tuple[int, int, int,
                                                                                    int]]:
    """Per component, over the whole run and across its restarts: (the first sample of its
    first life, the largest sample of any life, the last sample of its last life, the number
    of lives), in KiB. ``lives`` maps (component, pid) to that life's samples in order, lives
    in the order they began."""
    out: dict[str, tuple[int, int, int, int]] = {}
    for (name, _), samples in lives.items():
        if not samples:
            continue
        if name not in out:
            out[name] = (samples[0], max(samples), samples[-1], 1)
            continue
        start, peak, _, count = out[name]
        out[name] = (start, max(peak, *samples), samples[-1], count + 1)
    return out


# ------------------------------------------------------------------ Machine API liveness


def deletion_unblocked(machine: Obj) -> bool:
    """A Machine being deleted with no lifecycle hook left: nothing may hold its deletion."""
    return bool((machine.get("metadata") or {}).get("deletionTimestamp")) and \
        not hooks(machine, "preDrain") and not hooks(machine, "preTerminate")


def machine_set_converged(machine_set: Obj) -> bool:
    """A MachineSet whose controller has seen its spec and has as many Machines, all ready,
    as it asks for (machine-api-operator's ``MachineSetStatus``: replicas, readyReplicas,
    observedGeneration)."""
    meta, status = machine_set.get("metadata") or {}, machine_set.get("status") or {}
    wanted = int((machine_set.get("spec") or {}).get("replicas") or 0)
    observed = int(status.get("observedGeneration") or 0)
    return observed >= int(meta.get("generation") or 0) and \
        int(status.get("replicas") or 0) == wanted == int(status.get("readyReplicas") or 0)


def overdue(what: str, since: float | None, now: float, bound: float) -> str | None:
    """``what`` has been waited for since ``since`` (None: not waited for) longer than
    ``bound`` seconds."""
    if since is not None and now - since > bound:
        return f"{what} within {bound:.0f}s"
    return None


# ------------------------------------------------------------------ remediation


MACHINESET_LABEL = "machine.openshift.io/cluster-api-machineset"


def node_ready(node: Obj | None) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in ((node or {}).get("status") or {}).get("conditions") or ())


def machine_node(machine: Obj) -> str | None:
    name = ((machine.get("status") or {}).get("nodeRef") or {}).get("name")
    return str(name) if name else None


def deleting(machine: Obj | None) -> bool:
    return bool(((machine or {}).get("metadata") or {}).get("deletionTimestamp"))


def in_machine_set(machine: Obj, machine_set: str) -> bool:
    return ((machine.get("metadata") or {}).get("labels") or {}).get(MACHINESET_LABEL) == \
        machine_set


def ready_machines(machines: Iterable[Obj], machine_set: str, ready_nodes: set[str],
                   but: str) -> int:
    """Machines of ``machine_set``, not being deleted, whose Node is Ready, other than the
    Machine named ``but``."""
    return sum(1 for m in machines if in_machine_set(m, machine_set) and not deleting(m)
               and (m.get("metadata") or {}).get("name") != but
               and machine_node(m) in ready_nodes)


def remediation_awaits(machine_key: str, machines: Mapping[str, Obj], machine_set: str, wanted: int,
            ready_nodes: set[str]) -> str | None:
    """What the remediation of ``machine_key`` (``namespace/name``) still waits for: the
    Machine ``deleted``, or ``replaced by a Ready Node`` (fewer Ready Machines other than it
    than ``wanted``); None when done."""
    old = machines.get(machine_key)
    if old is not None and not deleting(old):
        return "deleted"
    name = machine_key.rsplit("/", 1)[-1]
    if ready_machines(machines.values(), machine_set, ready_nodes, name) < wanted:
        return "replaced by a Ready Node"
    return None
