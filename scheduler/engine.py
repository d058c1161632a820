"""Filter -> score -> select: one placement decision, pure, no I/O.

``Engine.schedule(pod, snapshot)``:

1. **prefilter** — each configured predicate does its pod-only work once and hands back a tiny
   per-node check (or nothing, when it cannot reject any node for this pod);
2. **filter** — nodes are visited from a rotating start index, the first failing check rejects
   a node (every check runs when the policy sets ``alwaysCheckAllPredicates``), and the walk
   stops once enough feasible nodes are found: upstream's adaptive
   ``percentageOfNodesToScore`` (at least 100 nodes, ``max(5, 50 - nodes/125)`` percent) or a
   fixed percentage. The walk takes one of three shapes, each its own method: one check per
   node (``_walk_single``), every check per node (``_walk_every``), or, when a check declares
   the only nodes it can pass (a ``NarrowedCheck``: node affinity, topology spread) or nodes it
   rejects for sure (an ``ExcludingCheck``: required anti-affinity), the nodes left
   (``_walk_narrowed``);
3. **score** — each priority scores the feasible nodes 0..100; the weighted sum decides;
   priorities that score every node alike are skipped (a constant cannot change the winner);
   the node-local priorities' sum (the resource ones: see ``Priority.local_key``) is kept in
   each node's memo until that node changes, so a node unchanged since the last pod of the
   same requests costs one lookup;
4. **select** — the highest total wins, ties broken by the engine's seedable random generator.

A pod with ``status.nominatedNodeName`` (preemption made room for it) is first tried on that
node alone and placed there when it fits, as kube-scheduler does; and every filter counts the
pods nominated to a node with at least the pod's priority as if they ran there
(``_with_nominated``).

When nothing fits, ``Decision.message`` is kube-scheduler's FitError text ("0/3 nodes are
available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu."): each rejected node counts
the reasons of the first predicate that rejected it, predicates running in the default
profile's filter order (``PREDICATE_ORDER``); the PostFilter sentence is appended by the caller
(see ``preemption.failed_scheduling_message``).

The engine keeps one piece of state, the rotating start index, like kube-scheduler; it is not
thread-safe.
"""

from __future__ import annotations

import copy
import logging
import random
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from itertools import chain, compress, count, islice
from typing import Any

from berthmaster.scheduler.model import Obj, PodView
from berthmaster.scheduler.plugins.base import (
    Check,
    NarrowedCheck,
    Predicate,
    Priority,
    Status,
    exclusion,
    narrowing,
    unresolvable,
    unwrap,
)
from berthmaster.scheduler.policy import Policy
from berthmaster.scheduler.snapshot import NodeInfo, Snapshot

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE = 0  # adaptive
NO_NODES_AVAILABLE = "no nodes available to schedule pods"
_MEMO_ENTRIES = 16  # node-local score sums kept per node (one per pod shape)
_ENGINES = count()
log = logging.getLogger("berthmaster.scheduler")


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes to find before scoring (upstream's numFeasibleNodesToFind)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return num_all_nodes
    adaptive = percentage
    if adaptive <= 0:
        adaptive = 50 - num_all_nodes // 125
        if adaptive < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            adaptive = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    found = num_all_nodes * adaptive // 100
    return max(found, MIN_FEASIBLE_NODES_TO_FIND)


def fit_error_message(num_all_nodes: int, statuses: Mapping[str, Status],
                      prefilter_message: str = "") -> str:
    """kube-scheduler's FitError text: counts per reason, sorted as strings."""
    if num_all_nodes == 0:
        return NO_NODES_AVAILABLE
    message = f"0/{num_all_nodes} nodes are available:"
    if prefilter_message:
        return f"{message} {prefilter_message}."
    # predicates hand back one Status object per distinct rejection, so count those first
    # (a node each) and their reasons after
    by_status = Counter(map(id, statuses.values()))
    first = {id(s): s for s in statuses.values()}
    histogram: Counter[str] = Counter()
    for ident, nodes in by_status.items():
        for reason in first[ident].reasons:
            histogram[reason] += nodes
    parts = sorted(f"{nodes} {reason}" for reason, nodes in histogram.items())
    if parts:
        message += f" {', '.join(parts)}."
    return message


@dataclass(frozen=True)
class Decision:
    """The outcome of one decision. ``node`` is None when nothing fits; then ``message`` is the
    FailedScheduling text and ``reasons`` maps each rejected node to its reasons."""

    pod: str
    node: str | None
    message: str
    reasons: dict[str, list[str]] = field(default_factory=dict)
    scores: dict[str, int] = field(default_factory=dict)
    feasible: int = 0
    evaluated: int = 0
    total_nodes: int = 0
    # nodes rejected for reasons preemption cannot change (UnschedulableAndUnresolvable)
    unresolvable: frozenset[str] = frozenset()
    # the predicates that rejected at least one node (canonical names)
    rejected_by: frozenset[str] = frozenset()
    prefilter_message: str = ""
    # a prefilter rejected the pod as UnschedulableAndUnresolvable: kube-scheduler stops running
    # PreFilter plugins there (framework/runtime/framework.go, RunPreFilterPlugins)
    prefilter_unresolvable: bool = False
    # explain only: node -> predicate name -> "" (passed) or its reasons; node -> priority -> score
    verdicts: dict[str, dict[str, str]] = field(default_factory=dict)
    priority_scores: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def scheduled(self) -> bool:
        return self.node is not None


class Engine:
    """Places pods with a Policy's predicates and priorities; see the module docstring."""

    def __init__(self, policy: Policy | None = None, *, seed: int | None = None,
                 percentage_of_nodes_to_score: int = DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE
                 ) -> None:
        if not 0 <= percentage_of_nodes_to_score <= 100:
            raise ValueError("percentage_of_nodes_to_score must be within 0..100 (0 = adaptive)")
        if policy is None:
            from berthmaster.scheduler.config import default_profile

            policy = default_profile()
        self.policy = policy
        self.random = random.Random(seed)
        # a profile's own percentageOfNodesToScore wins over the configuration's
        self.percentage_of_nodes_to_score = (
            percentage_of_nodes_to_score if policy.percentage_of_nodes_to_score is None
            else policy.percentage_of_nodes_to_score)
        self._next_start = 0
        # names this engine's entries in NodeInfo.memo (another engine may share the snapshot)
        self._memo_token = f"e{next(_ENGINES)}"

    # ------------------------------------------------------------------ filtering
    def prefilter(self, pod: PodView, snapshot: Snapshot
                  ) -> tuple[list[tuple[Predicate, Check]], tuple[Predicate, Status] | None]:
        """Every predicate's pod-only work, and the per-node checks it leaves; or the
        predicate that rejects every node at once. Pods nominated to a node with at least
        ``pod``'s priority count there first (see :meth:`_with_nominated`)."""
        checks, rejected = self._prefilter(pod, snapshot)
        if rejected is None and snapshot.nominated_pods:
            checks = self._with_nominated(pod, snapshot) + checks
        return checks, rejected

    def _with_nominated(self, pod: PodView, snapshot: Snapshot
                        ) -> list[tuple[Predicate, Check]]:
        """runtime/framework.go, RunFilterPluginsWithNominatedPods: on a node where pods of
        ``pod``'s priority or higher are nominated (preemption made room for them), every
        filter runs as if they were there, and the node must pass that as well as without
        them. Nominated pods are few, so each such node is judged once per decision in a
        what-if scope (prefilter state and all) and its failure, if any, becomes a check
        that runs first."""
        priority = snapshot.priority(pod)
        by_name = {p.NAME: p for p in self.policy.predicates}
        failures: dict[str, tuple[Predicate, dict[str, Status]]] = {}
        for node_name, nominated in list(snapshot.nominated_pods.items()):
            others = [p for p in nominated.values()
                      if p.uid != pod.uid and snapshot.priority(p) >= priority]
            if not others or snapshot.node(node_name) is None:
                continue
            with snapshot.what_if() as scope:
                for other in others:
                    scope.place(other, node_name)
                node = snapshot.node(node_name)
                assert node is not None
                checks, rejected = self._prefilter(pod, snapshot)
                if rejected is not None:
                    predicate, status = rejected
                else:
                    outcome = self._run_checks(checks, node)
                    if outcome is None:
                        continue
                    status, name = outcome
                    predicate = by_name[name]
            failures.setdefault(predicate.NAME, (predicate, {}))[1][node_name] = status
        return [(predicate, _failure_check(found)) for predicate, found in failures.values()]

    def _prefilter(self, pod: PodView, snapshot: Snapshot
                   ) -> tuple[list[tuple[Predicate, Check]], tuple[Predicate, Status] | None]:
        checks: list[tuple[Predicate, Check]] = []
        for predicate in self.policy.predicates:
            result = predicate.prefilter(pod, snapshot)
            if result is None:
                continue
            if isinstance(result, Status):
                return checks, (predicate, result)
            checks.append((predicate, result))
        return checks, None

    def _run_checks(self, checks: list[tuple[Predicate, Check]], node: NodeInfo
                    ) -> tuple[Status, str] | None:
        if self.policy.always_check_all_predicates:
            failed = [(c(node), p.NAME) for p, c in checks]
            bad = [(s, n) for s, n in failed if s is not None]
            if not bad:
                return None
            if len(bad) == 1:
                return bad[0][0], bad[0][1]
            reasons = tuple(r for s, _ in bad for r in s.reasons)
            return Status(reasons, any(s.unresolvable for s, _ in bad)), bad[0][1]
        for predicate, check in checks:
            status = check(node)
            if status is not None:
                return status, predicate.NAME
        return None

    def fits(self, pod: Obj, node_name: str, snapshot: Snapshot) -> bool:
        """Whether every predicate passes for ``pod`` on ``node_name`` (the pod's own
        ``spec.nodeName`` is ignored: the question is "would it fit there")."""
        node = snapshot.node(node_name)
        if node is None:
            return False
        view = _unbound_view(pod)
        checks, rejected = self.prefilter(view, snapshot)
        if rejected is not None:
            return False
        return self._run_checks(checks, node) is None

    def rejection(self, pod: Obj, node_name: str, snapshot: Snapshot) -> Status | None:
        """The status rejecting ``pod`` on ``node_name`` as a scheduling cycle would give it
        (the first failing predicate's, or the prefilter's), or None when it fits."""
        node = snapshot.node(node_name)
        if node is None:
            return unresolvable(f"node {node_name!r} not found")
        checks, rejected = self.prefilter(_unbound_view(pod), snapshot)
        if rejected is not None:
            return rejected[1]
        outcome = self._run_checks(checks, node)
        return None if outcome is None else outcome[0]

    def feasible_nodes(self, pod: Obj, snapshot: Snapshot,
                       candidates: Iterable[str] | None = None) -> list[str]:
        """Every node (of ``candidates``, default all) where ``pod`` fits; no sampling."""
        view = _unbound_view(pod)
        checks, rejected = self.prefilter(view, snapshot)
        if rejected is not None:
            return []
        if candidates is None:
            nodes: Iterable[NodeInfo] = snapshot.node_list()
        else:
            nodes = (n for n in (snapshot.node(c) for c in candidates) if n is not None)
        return [n.name for n in nodes if self._run_checks(checks, n) is None]

    def first_feasible(self, pod: Obj, snapshot: Snapshot, candidates: Iterable[str]
                       ) -> str | None:
        """The first of ``candidates`` (in their order) where ``pod`` fits, or None; the
        prefilter runs once and the walk stops at the first fit."""
        view = _unbound_view(pod)
        checks, rejected = self.prefilter(view, snapshot)
        if rejected is not None:
            return None
        for name in candidates:
            node = snapshot.node(name)
            if node is not None and self._run_checks(checks, node) is None:
                return name
        return None

    def why_not(self, pod: Obj, node_name: str, snapshot: Snapshot) -> list[str]:
        """Every predicate's reasons for rejecting ``pod`` on ``node_name`` (empty: it fits)."""
        node = snapshot.node(node_name)
        if node is None:
            return [f"node {node_name!r} not found"]
        view = _unbound_view(pod)
        out: list[str] = []
        for predicate in self.policy.predicates:
            result = predicate.prefilter(view, snapshot)
            status = result if isinstance(result, Status) else (
                None if result is None else result(node))
            if status is not None:
                out.extend(status.reasons)
        return out

    # ------------------------------------------------------------------ scheduling
    def schedule(self, pod: Obj, snapshot: Snapshot, *, explain: bool = False,
                 sample: bool = True) -> Decision:
        """One placement decision (see the module docstring). ``sample=False`` looks for every
        feasible node instead of stopping at percentageOfNodesToScore's count (preemption's
        full decision), whatever the engine's setting."""
        view = PodView.from_dict(pod)
        nodes = snapshot.node_list()
        total = len(nodes)
        if total == 0:
            return Decision(view.key, None, NO_NODES_AVAILABLE)
        checks, rejected = self.prefilter(view, snapshot)
        if rejected is not None:
            return _prefilter_rejection(view, nodes, *rejected)
        nominated = snapshot.node(view.nominated_node) if view.nominated_node else None
        if nominated is not None and not explain and self._run_checks(checks, nominated) is None:
            # as upstream: a pod that preemption made room for takes its nominated node when
            # it fits there, without looking further
            return Decision(view.key, nominated.name, "", feasible=1, evaluated=1,
                            total_nodes=total)
        percentage = self.percentage_of_nodes_to_score if sample else 100
        walk = _Walk(self._next_start % total, num_feasible_nodes_to_find(total, percentage))
        allowed = _narrowed(checks)
        if allowed is not None and len(allowed) >= total:
            allowed = None
        blocked = _excluded(checks, total)
        if allowed is not None or blocked is not None:
            early = self._walk_narrowed(walk, checks, view, snapshot, allowed, blocked, explain)
            if early is not None:
                return early
        elif len(checks) == 1 and not self.policy.always_check_all_predicates:
            self._walk_single(walk, checks[0], _rotation(nodes, walk.start))
        else:
            self._walk_every(walk, checks, _rotation(nodes, walk.start))
        return self._conclude(walk, view, snapshot, explain)

    def _walk_single(self, walk: _Walk, only: tuple[Predicate, Check],
                     ordered: Iterable[NodeInfo]) -> NodeInfo | None:
        """Walk 1: one check to run per node, from the rotating start, until enough fit;
        returns the last node visited."""
        predicate, check = only
        feasible, failed, to_find = walk.feasible, walk.failed, walk.to_find
        fn = unwrap(check)
        append = feasible.append
        found = len(feasible)
        node = None
        for node in ordered:
            rejection = fn(node)
            if rejection is None:
                append(node)
                found += 1
                if found >= to_find:
                    break
            else:
                failed[node.name] = rejection
        if failed:
            walk.rejected_by.add(predicate.NAME)
        return node

    def _walk_every(self, walk: _Walk, checks: list[tuple[Predicate, Check]],
                    ordered: Iterable[NodeInfo]) -> NodeInfo | None:
        """Walk 2: every check per node (the first failure rejects it, or all run under
        alwaysCheckAllPredicates) until enough fit; returns the last node visited."""
        feasible, failed, rejected_by, to_find = (walk.feasible, walk.failed, walk.rejected_by,
                                                  walk.to_find)
        last: NodeInfo | None = None
        if self.policy.always_check_all_predicates:
            for node in ordered:
                last = node
                outcome = self._run_checks(checks, node)
                if outcome is None:
                    feasible.append(node)
                    if len(feasible) >= to_find:
                        break
                else:
                    failed[node.name] = outcome[0]
                    rejected_by.add(outcome[1])
            return last
        bare = [(predicate.NAME, unwrap(check)) for predicate, check in checks]
        for node in ordered:  # the hot loop: _run_checks inlined
            last = node
            for name, fn in bare:
                verdict = fn(node)
                if verdict is not None:
                    failed[node.name] = verdict
                    rejected_by.add(name)
                    break
            else:
                feasible.append(node)
                if len(feasible) >= to_find:
                    break
        return last

    def _walk_narrowed(self, walk: _Walk, checks: list[tuple[Predicate, Check]],
                       view: PodView, snapshot: Snapshot, allowed: Set[str] | None,
                       blocked: Set[str] | None, explain: bool) -> Decision | None:
        """Walk 3: checks declared the only nodes they can pass (``allowed``) or nodes they
        reject for sure (``blocked``); visit the rest alone, in rotation order. The skipped
        nodes are rejected for sure; they get their true reasons (a check each) only when
        someone reads them: nothing fit, or ``explain``. Returns the decision when it needs no
        more, else None (the walk is then as complete as walk 2's)."""
        nodes = snapshot.node_list()
        total, start = len(nodes), walk.start
        if allowed is not None:
            positions, members = _allowed_positions(snapshot, nodes, allowed)
        else:
            positions, members = _all_positions(snapshot, nodes), nodes
        if blocked is not None:
            keep = [n.name not in blocked for n in members]
            positions, members = list(compress(positions, keep)), list(compress(members, keep))
        first = bisect_left(positions, start)
        # a check that declared exactly the nodes it passes passes every node visited here
        visiting = checks if self.policy.always_check_all_predicates else [
            (p, c) for p, c in checks if not (isinstance(c, NarrowedCheck) and c.exact)]
        ordered = chain(islice(members, first, None), islice(members, 0, first))
        if len(visiting) == 1 and not self.policy.always_check_all_predicates:
            last = self._walk_single(walk, visiting[0], ordered)
        else:
            last = self._walk_every(walk, visiting, ordered)
        feasible = walk.feasible
        stopped_early = len(feasible) >= walk.to_find and last is not None
        if not explain and stopped_early:
            assert last is not None
            visited = (_position(snapshot, nodes, last.name) - start) % total + 1
            self._next_start = (start + visited) % total
            return self._select(view, snapshot, feasible, {}, explain, visited, total)
        if not explain and feasible:
            # the whole rotation was visited, as a full walk would have
            self._next_start = start
            return self._select(view, snapshot, feasible, {}, explain, total, total)
        # every node visited counts as evaluated: give the skipped ones their true reasons
        stop = _position(snapshot, nodes, last.name) if stopped_early and last else None
        seen = {n.name for n in feasible}
        seen.update(walk.failed)
        visited = total if stop is None else (stop - start) % total
        skipped = [n for n in islice(_rotation(nodes, start), visited) if n.name not in seen]
        # walk 2 over them, into this walk's reasons: each fails a check for sure, so nothing
        # is found feasible and the walk runs to their end
        self._walk_every(_Walk(start, total + 1, [], walk.failed, walk.rejected_by), checks,
                         skipped)
        return None

    def _conclude(self, walk: _Walk, view: PodView, snapshot: Snapshot, explain: bool
                  ) -> Decision:
        """The decision after a walk: the FitError when nothing fit, else the scored choice."""
        feasible, failed = walk.feasible, walk.failed
        total = len(snapshot.node_list())
        evaluated = len(feasible) + len(failed)
        self._next_start = (walk.start + evaluated) % total
        verdicts = self._verdicts(view, snapshot, feasible, failed) if explain else {}
        if not feasible:
            return Decision(
                view.key, None, fit_error_message(total, failed),
                {name: list(s.reasons) for name, s in failed.items()}, feasible=0,
                evaluated=evaluated, total_nodes=total,
                unresolvable=frozenset(n for n, s in failed.items() if s.unresolvable),
                rejected_by=frozenset(walk.rejected_by), verdicts=verdicts)
        reasons = {name: list(s.reasons) for name, s in failed.items()} if explain else {}
        decision = self._select(view, snapshot, feasible, reasons, explain, evaluated, total)
        if explain:
            return Decision(decision.pod, decision.node, "", reasons, decision.scores,
                            feasible=decision.feasible, evaluated=evaluated, total_nodes=total,
                            verdicts=verdicts, priority_scores=decision.priority_scores)
        return decision

    def _select(self, view: PodView, snapshot: Snapshot, feasible: list[NodeInfo],
                reasons: dict[str, list[str]], explain: bool, evaluated: int, total: int
                ) -> Decision:
        if len(feasible) == 1 and not explain:
            return Decision(view.key, feasible[0].name, "", reasons, feasible=1,
                            evaluated=evaluated, total_nodes=total)
        totals, breakdown = self._score(view, snapshot, feasible, explain)
        best = max(totals)
        if totals.count(best) == 1:
            chosen = totals.index(best)
        else:
            chosen = self.random.choice([i for i, t in enumerate(totals) if t == best])
        scores = {n.name: t for n, t in zip(feasible, totals, strict=True)} if explain else {}
        return Decision(view.key, feasible[chosen].name, "", reasons, scores,
                        feasible=len(feasible), evaluated=evaluated, total_nodes=total,
                        priority_scores=breakdown)

    def _score(self, pod: PodView, snapshot: Snapshot, nodes: list[NodeInfo], explain: bool
               ) -> tuple[list[int], dict[str, dict[str, int]]]:
        if explain:
            return self._score_each(pod, snapshot, nodes)
        totals, rest = self._local_totals(pod, snapshot, nodes)
        for priority in rest:
            result = priority.scores(pod, snapshot, nodes)
            if isinstance(result, int):
                continue  # a constant cannot change the winner
            weight = priority.weight
            if weight == 1:
                totals = [t + s for t, s in zip(totals, result, strict=True)]
            else:
                totals = [t + weight * s for t, s in zip(totals, result, strict=True)]
        return totals, {}

    def _local_totals(self, pod: PodView, snapshot: Snapshot, nodes: list[NodeInfo]
                      ) -> tuple[list[int], list[Priority]]:
        """The weighted sum of the node-local priorities per node (see plugins.base), taken
        from each node's memo where it holds one and computed (and kept) for the others; and
        the priorities left to score."""
        local: list[Priority] = []
        rest: list[Priority] = []
        parts = [self._memo_token]
        for index, priority in enumerate(self.policy.priorities):
            key = priority.local_key(pod)
            if key is None:
                rest.append(priority)
            else:
                local.append(priority)
                parts.append(f"{index}={key}")
        if not local:
            return [0] * len(nodes), rest
        key = "|".join(parts)  # built once: its hash is cached for every lookup below
        found = [n.memo.get(key) for n in nodes]
        if None in found:
            missing = [i for i, total in enumerate(found) if total is None]
            fresh = [nodes[i] for i in missing]
            sums = [0] * len(fresh)
            for priority in local:
                result, weight = priority.scores(pod, snapshot, fresh), priority.weight
                if isinstance(result, int):
                    sums = [t + weight * result for t in sums]
                else:
                    sums = [t + weight * s for t, s in zip(sums, result, strict=True)]
            for i, node, total in zip(missing, fresh, sums, strict=True):
                memo = node.memo
                if len(memo) >= _MEMO_ENTRIES:
                    memo.clear()  # many pod shapes in a row: keep the memo small
                memo[key] = found[i] = total
        return found, rest  # type: ignore[return-value]  # every None was filled above

    def _score_each(self, pod: PodView, snapshot: Snapshot, nodes: list[NodeInfo]
                    ) -> tuple[list[int], dict[str, dict[str, int]]]:
        """Every priority's scores, node by node, for ``explain`` (no memo, no skipping)."""
        totals = [0] * len(nodes)
        breakdown: dict[str, dict[str, int]] = {n.name: {} for n in nodes}
        for priority in self.policy.priorities:
            result = priority.scores(pod, snapshot, nodes)
            weight = priority.weight
            if isinstance(result, int):
                for n in nodes:
                    breakdown[n.name][priority.name] = result
                totals = [t + weight * result for t in totals]
                continue
            totals = [t + weight * s for t, s in zip(totals, result, strict=True)]
            for n, s in zip(nodes, result, strict=True):
                breakdown[n.name][priority.name] = s
        return totals, breakdown

    def _verdicts(self, pod: PodView, snapshot: Snapshot, feasible: list[NodeInfo],
                  failed: Mapping[str, Status]) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        evaluated = {n.name for n in feasible} | set(failed)
        prepared = []
        for predicate in self.policy.predicates:
            prepared.append((predicate, predicate.prefilter(pod, snapshot)))
        for node in snapshot.node_list():
            if node.name not in evaluated:
                continue
            row: dict[str, str] = {}
            for predicate, result in prepared:
                if result is None:
                    row[predicate.name] = ""
                elif isinstance(result, Status):
                    row[predicate.name] = result.explain()
                else:
                    status = result(node)
                    row[predicate.name] = "" if status is None else status.explain()
            out[node.name] = row
        return out

    def plugin_names(self, canonical: Iterable[str]) -> frozenset[str]:
        """The names this profile gives the predicates of ``canonical`` names (a
        KubeSchedulerConfiguration's plugin names, a Policy's entry names): what metrics
        label them by, as kube-scheduler labels by plugin."""
        names = {p.NAME: p.name for p in self.policy.predicates}
        return frozenset(names.get(n, n) for n in canonical)

    def unschedulable_events(self, decision: Decision, pod: PodView | None = None
                             ) -> frozenset[str]:
        """Cluster events that could make ``decision``'s pod schedulable ("Kind/Action");
        with ``pod``, as each predicate that rejected it judges for that pod."""
        events: set[str] = set()
        by_name = {p.NAME: p for p in self.policy.predicates}
        for name in decision.rejected_by:
            predicate = by_name.get(name)
            if predicate is None:
                continue
            try:
                events.update(predicate.EVENTS if pod is None else predicate.events_for(pod))
            except Exception:  # a plugin's queueing hint failed: any event requeues the pod
                # as upstream's queue does when a QueueingHintFn errs
                # (pkg/scheduler/backend/queue/scheduling_queue.go, isPodWorthRequeuing)
                log.exception("queueing hint failed", extra={"plugin": predicate.name})
                return frozenset()
        return frozenset(events)


@dataclass(slots=True)
class _Walk:
    """One filter walk's state: where it started, how many fits end it, and what it found."""

    start: int
    to_find: int
    feasible: list[NodeInfo] = field(default_factory=list)
    failed: dict[str, Status] = field(default_factory=dict)
    rejected_by: set[str] = field(default_factory=set)


def _failure_check(failures: Mapping[str, Status]) -> Check:
    """A check rejecting the nodes of ``failures`` with their statuses (see
    Engine._with_nominated)."""
    get = failures.get

    def check(node: NodeInfo) -> Status | None:
        return get(node.name)

    return check


def _rotation(nodes: list[NodeInfo], start: int) -> Iterable[NodeInfo]:
    """The nodes from ``start`` round to just before it (kube-scheduler's rotating start)."""
    return chain(islice(nodes, start, None), islice(nodes, 0, start))


def _narrowed(checks: list[tuple[Predicate, Check]]) -> Set[str] | None:
    """The nodes every narrowing check can pass (the intersection of their declared sets;
    None: no check narrows). A node outside it is rejected by some check for sure."""
    declared = [a for a in (narrowing(c) for _, c in checks) if a is not None]
    if len(declared) <= 1:
        return declared[0] if declared else None
    declared.sort(key=len)
    allowed = set(declared[0])
    for other in declared[1:]:
        allowed &= other  # type: ignore[assignment]
    return allowed


# leave blocked nodes out of the walk when they are at least 1/64 of the cluster: filtering
# costs a set lookup per node, a blocked node visited costs its checks (a few microseconds)
_EXCLUDE_FROM = 64


def _excluded(checks: list[tuple[Predicate, Check]], total: int) -> Set[str] | None:
    """The nodes some check rejects for sure (the union of the declared sets), when there are
    enough of them to be worth leaving out of the walk; else None."""
    declared = [b for b in (exclusion(c) for _, c in checks) if b]
    if not declared:
        return None
    blocked = declared[0] if len(declared) == 1 else set().union(*declared)
    return blocked if len(blocked) * _EXCLUDE_FROM >= total else None


def _prefilter_rejection(view: PodView, nodes: list[NodeInfo], predicate: Predicate,
                         status: Status) -> Decision:
    """The decision when a prefilter rejected every node at once."""
    total = len(nodes)
    message = status.reasons[0] if status.reasons else "rejected"
    reasons = {n.name: list(status.reasons) for n in nodes}
    return Decision(view.key, None, fit_error_message(total, {}, message), reasons,
                    evaluated=total, total_nodes=total,
                    unresolvable=frozenset(reasons) if status.unresolvable else frozenset(),
                    rejected_by=frozenset((predicate.NAME,)), prefilter_message=message,
                    prefilter_unresolvable=status.unresolvable)


def _position_index(snapshot: Snapshot, nodes: list[NodeInfo]) -> dict[str, int]:
    index: dict[str, int] | None = snapshot.node_cache.get("positions")
    if index is None or len(index) != len(nodes):
        index = {n.name: i for i, n in enumerate(nodes)}
        snapshot.node_cache["positions"] = index
    return index


def _position(snapshot: Snapshot, nodes: list[NodeInfo], name: str) -> int:
    return _position_index(snapshot, nodes)[name]


def _all_positions(snapshot: Snapshot, nodes: list[NodeInfo]) -> list[int]:
    """0 .. len(nodes)-1, kept in the node cache (the positions of every node)."""
    positions: list[int] | None = snapshot.node_cache.get("all-positions")
    if positions is None or len(positions) != len(nodes):
        positions = snapshot.node_cache["all-positions"] = list(range(len(nodes)))
    return positions


_POSITIONS_CACHED = 64


def _allowed_positions(snapshot: Snapshot, nodes: list[NodeInfo], allowed: Set[str]
                       ) -> tuple[list[int], list[NodeInfo]]:
    """Sorted positions (in the rotation order) of the ``allowed`` nodes and those nodes in
    that order, cached per set (the sets the plugins keep in the node cache come back pod after
    pod; the per-pod ones do not, so the cache is bounded rather than growing by one entry per
    pod). The node cache is emptied whenever a node comes, goes or changes."""
    cache: dict[int, tuple[Set[str], list[int], list[NodeInfo]]] = \
        snapshot.node_cache.setdefault("allowed-positions", {})
    cached = cache.get(id(allowed))
    if cached is not None and cached[0] is allowed:
        return cached[1], cached[2]
    index = _position_index(snapshot, nodes)
    try:  # the plugins name known nodes: map is the fast way, the filter the safe one
        positions = sorted(map(index.__getitem__, allowed))
    except KeyError:
        positions = sorted(index[n] for n in allowed if n in index)
    members = list(map(nodes.__getitem__, positions))
    if len(cache) >= _POSITIONS_CACHED:
        cache.clear()
    cache[id(allowed)] = (allowed, positions, members)
    return positions, members


def _unbound_view(pod: Obj) -> PodView:
    spec = pod.get("spec") or {}
    view = PodView.from_dict(pod)
    if not spec.get("nodeName"):
        return view
    clone: dict[str, Any] = copy.copy(dict(pod))
    clone["spec"] = {k: v for k, v in spec.items() if k != "nodeName"}
    return view.unbound(clone)
