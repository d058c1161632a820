"""The cluster as one descheduler pass sees it, and what each strategy is told and tallies.

Design: a pass LISTs each resource type once; :class:`ClusterState` indexes the result (pods by
node, the nodes the policy's ``nodeSelector`` admits, pods evicted so far in this pass) and is
shared by every strategy in the pass, so a pod evicted by one strategy is invisible to the
next. :class:`StrategyContext` is one strategy's window on it: it applies that strategy's
evictor settings (the DefaultEvictor filter), answers ``nodeFit`` through the injected
``node_fit(pod, node_name)`` predicate (the placement engine in production), and keeps the
strategy's :class:`Tally` — pods considered, evicted, and skipped by reason — for the summary.

Strategies are generators over a context: they yield :class:`Candidate` pods in the order they
want them gone and receive back whether each was evicted (see ``evictor.drive``), so their
decision stays pure while limits, PodDisruptionBudgets and the API have the last word.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Generator, Hashable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from berthmaster.foundation.keys import key_of
from berthmaster.foundation.times import parse_rfc3339
from berthmaster.scheduler.descheduler.fields import PodFilter
from berthmaster.scheduler.descheduler.protection import (
    EvictorSettings,
    claim_classes_of,
    protection_reasons,
)
from berthmaster.scheduler.descheduler.usage_metrics import ActualUsage
from berthmaster.scheduler.label_string import parse_label_selector
from berthmaster.scheduler.model import LabelSelector, NodeView, PodView
from berthmaster.scheduler.model import label_selector as compile_selector

Pod = dict[str, Any]
Node = dict[str, Any]
NodeFit = Callable[[Pod, str], bool]

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Candidate:
    """A pod a strategy wants evicted, and why (shown by --dry-run and in logs)."""

    pod: Pod
    why: str

    @property
    def key(self) -> str:
        return key_of(self.pod)

    @property
    def node_name(self) -> str:
        return str((self.pod.get("spec") or {}).get("nodeName") or "")


# What a strategy's ``decide`` returns: candidates yielded in the order the strategy wants them
# gone, each answered with whether it was evicted (the scheduler's placement outcome is
# engine.Decision; a MachineHealthCheck's is HealthCheckDecision, a Lease's LeaseDecision).
CandidateStream = Generator[Candidate, bool, None]


@dataclass
class Tally:
    """What one strategy did in one pass."""

    strategy: str
    profile: str = ""
    considered: int = 0
    evicted: list[str] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    note: str = ""
    failure: str = ""

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())


def uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid") or key_of(pod))


def _controller_uid(pod: Mapping[str, Any]) -> str:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("uid") or f"{ref.get('kind')}/{ref.get('name')}")
    return ""


def node_is_ready(node: Mapping[str, Any]) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def parse_node_selector(selector: str | None) -> Callable[[Mapping[str, str]], bool]:
    """The policy's ``nodeSelector``: the full labels.Parse syntax (``a=b``, ``a!=b``, ``a``,
    ``!a``, ``a in (x,y)``, ``a notin (x)``, ``a>1``); see berthmaster.scheduler.label_string.
    The policy loader has already rejected a string that does not parse."""
    return parse_label_selector(selector).matches



class ClusterState:
    """Indexed nodes and pods for one pass (built once from one LIST of each)."""

    def __init__(
        self,
        nodes: Iterable[Node],
        pods: Iterable[Pod],
        priority_classes: Mapping[str, int] | None = None,
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
        node_selector: str | None = None,
        node_fit: NodeFit | None = None,
        now: datetime | None = None,
        pdbs: Iterable[Mapping[str, Any]] = (),
        claims: Iterable[Mapping[str, Any]] = (),
    ):
        self.all_nodes = list(nodes)
        self.pdbs = list(pdbs)
        # (namespace, claim) -> storage class, for protectedStorageClasses
        self.claim_classes = claim_classes_of(claims)
        admits = parse_node_selector(node_selector)
        # Upstream works on Ready nodes matching the policy's nodeSelector only.
        self.nodes = [
            n for n in self.all_nodes
            if node_is_ready(n) and admits((n.get("metadata") or {}).get("labels") or {})
        ]
        self.node_order = [n["metadata"]["name"] for n in self.nodes]
        # Ready node names per selector: one list object per selector, so answers over it can
        # be remembered by its identity (the policy's selector is node_order itself)
        self._ready_names: dict[str | None, list[str]] = {node_selector: self.node_order}
        self._fits_elsewhere: dict[tuple[int, str], bool] = {}
        self.node_names = set(self.node_order)
        self.nodes_by_name = {n["metadata"]["name"]: n for n in self.all_nodes}
        self.pods_by_node: dict[str, list[Pod]] = {}
        for pod in pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name:
                self.pods_by_node.setdefault(node_name, []).append(pod)
        self.priority_classes = dict(priority_classes or {})
        self.namespace_labels = dict(namespace_labels or {})
        self.node_fit = node_fit
        self.now = now or datetime.now(UTC)
        self.evicted: set[str] = set()
        self._pod_views: dict[int, PodView] = {}
        self._owner_counts: Counter[str] | None = None
        self._node_views: dict[int, NodeView] = {}
        self._node_entries: dict[str, NodePods] = {}
        self._protection: dict[Hashable, dict[int, tuple[Pod, list[str]]]] = {}
        # read from the metrics API when the policy balances by actual usage (usage_metrics)
        self.actual_usage: ActualUsage | None = None
        # node usage by Prometheus query, run once a pass for each query (usage_prometheus)
        self.prometheus_usage: dict[str, ActualUsage] = {}
        self.prometheus_errors: dict[str, str] = {}  # why a query could not be run

    def owner_replicas(self, pod: Pod) -> int:
        """How many listed pods share this pod's controller (DefaultEvictor's minReplicas)."""
        if self._owner_counts is None:
            counts: Counter[str] = Counter()
            for pods in self.pods_by_node.values():
                for other in pods:
                    owner = _controller_uid(other)
                    if owner:
                        counts[owner] += 1
            self._owner_counts = counts
        owner = _controller_uid(pod)
        return self._owner_counts[owner] if owner else 0

    def covered_by_pdb(self, pod: Pod) -> bool:
        """Upstream's utils.IsPodCoveredByPDB: a PDB in the pod's namespace selects it (a PDB
        whose selector is null selects nothing)."""
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        for pdb in self.pdbs:
            if (pdb.get("metadata") or {}).get("namespace") != meta.get("namespace"):
                continue
            selector = (pdb.get("spec") or {}).get("selector")
            if selector is not None and compile_selector(selector).matches(labels):
                return True
        return False

    def view(self, pod: Pod) -> PodView:
        """The placement model's view of a listed pod, built once per pass."""
        found = self._pod_views.get(id(pod))
        if found is None and not self._pod_views:
            # the engine's snapshot has a view of every listed pod: index them all at once
            listed = getattr(self.node_fit, "listed_views", None)
            if listed is not None:
                self._pod_views.update((id(v.raw), v) for v in listed())
                found = self._pod_views.get(id(pod))
        if found is None or found.raw is not pod:
            shared = getattr(self.node_fit, "view_of", None)
            found = shared(pod) if shared is not None else None
            if found is None or found.raw is not pod:
                found = PodView.from_dict(pod)
            self._pod_views[id(pod)] = found
        return found

    def ready_names(self, selector: str | None) -> list[str]:
        """The names of the Ready nodes ``selector`` admits, in listing order (the same list
        object for the same selector, all pass long)."""
        found = self._ready_names.get(selector)
        if found is None:
            admits = parse_label_selector(selector).matches
            found = self._ready_names[selector] = [
                n["metadata"]["name"] for n in self.all_nodes
                if node_is_ready(n) and admits((n.get("metadata") or {}).get("labels") or {})]
        return found

    def fits_elsewhere(self, pod: Pod, names: list[str]) -> bool:
        """Upstream's PodFitsAnyOtherNode: some node of ``names`` (a :meth:`ready_names`
        list) other than the pod's own takes it. Remembered per pod and list for the pass:
        the snapshot nodeFit asks does not change within a pass, so a pod a strategy and then
        the DefaultEvictor ask about over the same nodes is answered once."""
        key = (id(names), uid(pod))
        found = self._fits_elsewhere.get(key)
        if found is None:
            current = str((pod.get("spec") or {}).get("nodeName") or "")
            found = self._fits_elsewhere[key] = any_node_fits(self.node_fit, pod, names,
                                                              current)
        return found

    def node_view(self, node: Node) -> NodeView:
        found = self._node_views.get(id(node))
        if found is None:
            found = self._node_views[id(node)] = NodeView.from_dict(node)
        return found

    def pods_on(self, node_name: str, include_terminal: bool = False) -> list[Pod]:
        """Pods bound to the node, minus those evicted earlier in this pass; terminal ones
        (Succeeded/Failed) only when asked, as upstream's ListPodsOnANode."""
        entries = self._node_entries.get(node_name)
        if entries is None:
            # read once per node and pass: strategies ask for the same node's pods again and
            # again, and a listed pod does not change within a pass
            entries = self._node_entries[node_name] = NodePods.of(
                self.pods_by_node.get(node_name, ()))
        return entries.live(self.evicted, include_terminal)

    def protection(self, pod: Pod, settings: EvictorSettings, threshold: int | None,
                   key: Hashable) -> list[str]:
        """``protection_reasons(pod, settings, threshold)``, worked out once per pod and
        ``key`` (:func:`protection_key` of those settings) in a pass: a listed pod does not
        change, and every strategy of a profile asks with the same settings."""
        memo = self._protection.setdefault(key, {})
        found = memo.get(id(pod))
        if found is None or found[0] is not pod:
            found = memo[id(pod)] = (pod, protection_reasons(pod, settings, threshold,
                                                             self.claim_classes))
        return found[1]


class NodePods:
    """One node's listed pods, split once: every pod, the non-terminal ones, and their uids, so
    a node none of whose pods was evicted yet (most of them, most of the time) is answered
    with a copy of a ready list instead of a walk."""

    __slots__ = ("every", "keyed", "running", "uids")

    def __init__(self, keyed: list[tuple[str, bool, Pod]]):
        self.keyed = keyed  # (uid, terminal, pod) in listing order
        self.uids = frozenset(key for key, _, _ in keyed)
        self.every = [pod for _, _, pod in keyed]
        self.running = [pod for _, terminal, pod in keyed if not terminal]

    @classmethod
    def of(cls, pods: Iterable[Pod]) -> NodePods:
        return cls([(uid(p), (p.get("status") or {}).get("phase") in TERMINAL_PHASES, p)
                    for p in pods])

    def live(self, evicted: AbstractSet[str], include_terminal: bool) -> list[Pod]:
        """The pods not in ``evicted``, terminal ones only with ``include_terminal``."""
        if evicted.isdisjoint(self.uids):
            return list(self.every if include_terminal else self.running)
        return [p for key, terminal, p in self.keyed
                if key not in evicted and (include_terminal or not terminal)]


def protection_key(settings: EvictorSettings, threshold: int | None) -> Hashable:
    """What :func:`protection_reasons` reads of the settings and the resolved threshold."""
    return (settings.evict_local_storage_pods, settings.evict_daemonset_pods,
            settings.evict_system_critical_pods, settings.ignore_pvc_pods,
            settings.evict_failed_bare_pods, settings.protect_resource_claims,
            settings.no_eviction_policy, settings.protected_storage_classes, threshold)


class StrategyContext:
    """One strategy's view: filters with its evictor settings, tallies what it did."""

    def __init__(self, state: ClusterState, settings: EvictorSettings, tally: Tally):
        self.state = state
        self.settings = settings
        self.tally = tally
        self.threshold = self._resolve_threshold()
        self._protection_key = protection_key(settings, self.threshold)
        self._selector = PodFilter(None, settings.label_selector)
        chosen = settings.namespace_label_selector or {}
        # an empty namespaceLabelSelector filters nothing (upstream's PreEvictionFilter)
        self._namespace_selector: LabelSelector | None = (
            compile_selector(chosen) if chosen.get("matchLabels") or chosen.get(
                "matchExpressions") else None)

    def _resolve_threshold(self) -> int | None:
        if self.settings.priority_threshold is not None:
            return self.settings.priority_threshold
        name = self.settings.priority_threshold_class
        if name:
            if name not in self.state.priority_classes:
                raise LookupError(
                    f"thresholdPriorityClassName {name!r}: no PriorityClass of that name exists; "
                    "create it or name an existing one"
                )
            return self.state.priority_classes[name]
        return None

    @property
    def nodes(self) -> list[Node]:
        return self.state.nodes

    @property
    def now(self) -> datetime:
        return self.state.now

    def pods_on(self, node_name: str, include_terminal: bool = False) -> list[Pod]:
        return self.state.pods_on(node_name, include_terminal)

    def consider(self, pods: Iterable[Pod]) -> list[Pod]:
        listed = list(pods)
        self.tally.considered += len(listed)
        return listed

    def evictable(self, pod: Pod) -> bool:
        """The DefaultEvictor filter; a refusal is tallied under its first reason."""
        reasons = self.state.protection(pod, self.settings, self.threshold,
                                        self._protection_key)
        if reasons:
            self.tally.skipped[reasons[0]] += 1
            return False
        if settings_selector_rejects(self._selector, pod):
            self.tally.skipped["pod labels do not match the evictor's labelSelector"] += 1
            return False
        meta = pod.get("metadata") or {}
        if self.settings.protect_pods_without_pdb and not self.state.covered_by_pdb(pod):
            self.tally.skipped["pod does not have a PodDisruptionBudget and is protected against "
                               "eviction"] += 1
            return False
        if self._namespace_selector is not None:
            labels = self.state.namespace_labels.get(str(meta.get("namespace", "")))
            if labels is None or not self._namespace_selector.matches(labels):
                self.tally.skipped["pod namespace do not match the namespaceLabelSelector filter "
                                   "in the policy parameter"] += 1
                return False
        if self.settings.min_replicas > 1 and self.state.owner_replicas(pod) < (
            self.settings.min_replicas
        ):
            self.tally.skipped["owner has fewer replicas than minReplicas"] += 1
            return False
        if self.settings.min_pod_age_seconds is not None:
            # upstream's evictionConstraintsForMinPodAge: counted from status.startTime; a pod
            # that has not started yet is too young
            started = parse_rfc3339((pod.get("status") or {}).get("startTime"))
            if started is None or (
                    self.now - started).total_seconds() < self.settings.min_pod_age_seconds:
                self.tally.skipped["pod is younger than minPodAge"] += 1
                return False
        return True

    def node_fit(self, pod: Pod, node_name: str) -> bool:
        """Would the placement engine put ``pod`` on ``node_name``? (True without an engine.)"""
        if self.state.node_fit is None:
            return True
        return self.state.node_fit(pod, node_name)

    def fits_other_node(self, pod: Pod) -> bool:
        """Upstream's PodFitsAnyOtherNode over the nodes a strategy works on (Ready, admitted by
        the policy's nodeSelector); strategies use it. The DefaultEvictor's nodeFit uses
        :meth:`evictor_fits_other_node`."""
        return self.state.fits_elsewhere(pod, self.state.node_order)

    def evictor_fits_other_node(self, pod: Pod) -> bool:
        """The DefaultEvictor's nodeFit: upstream's PodFitsAnyOtherNode over ReadyNodes(...,
        the evictor's own nodeSelector) - every Ready node unless that selector narrows it,
        whatever the policy's top-level nodeSelector."""
        return self.state.fits_elsewhere(pod, self.state.ready_names(self.settings.node_selector))

    def any_node_fits(self, pod: Pod, names: list[str], exclude: str = "") -> bool:
        return any_node_fits(self.state.node_fit, pod, names, exclude)

    def feasible_nodes(self, pod: Pod, names: list[str]) -> list[str]:
        fit = self.state.node_fit
        if fit is None:
            return list(names)
        feasible = getattr(fit, "feasible", None)
        if feasible is not None:
            return list(feasible(pod, names))
        return [name for name in names if fit(pod, name)]



def any_node_fits(fit: NodeFit | None, pod: Pod, names: list[str], exclude: str = "") -> bool:
    """Whether ``fit`` takes the pod on some node of ``names`` other than ``exclude`` (any
    such node when there is no ``fit``)."""
    if fit is None:
        return any(name != exclude for name in names)
    any_node = getattr(fit, "any_node", None)
    if any_node is not None:
        return bool(any_node(pod, names, exclude))
    return any(name != exclude and fit(pod, name) for name in names)


def settings_selector_rejects(selector: PodFilter, pod: Pod) -> bool:
    return selector.label_selector is not None and not selector.admits(pod)
