"""Preemption choice: for a pod that fits nowhere, which node and which victims. Pure.

As upstream's default preemption:

- a pod with ``preemptionPolicy: Never`` preempts nothing; nor does a pod whose nominated
  node already has a lower-priority pod terminating by preemption (it waits for that one),
  unless that node now rejects it for good;
- only nodes rejected for reasons preemption can change are tried (resources, ports,
  anti-affinity...; not taints, selectors, cordons);
- on each, every lower-priority pod is removed; if the pod still does not fit, the node is out;
  otherwise victims are reprieved one by one, most important first (higher priority, then
  older), PDB-violating ones before the others, keeping every pod whose return still lets the
  pod fit;
- nodes are dry-run from a random offset until max(10% of them, 100) candidates are found
  (``minCandidateNodesPercentage``/``Absolute``), one of them at least violating no PDB; when
  none is found the pod's nomination is cleared;
- among the candidate nodes: fewest PDB violations, then the lowest highest-victim priority,
  then the smallest priority sum, then the fewest victims, then the latest start time of the
  highest-priority victims, then the first.

What-if removals happen on the snapshot itself, inside its ``what_if`` scope, which puts every
pod back before returning (the snapshot is single-threaded); the caller's snapshot is unchanged
afterwards.

When no preemption is possible, ``PreemptionResult.message`` is the PostFilter sentence
kube-scheduler 1.35 appends to FailedScheduling: its PostFilter plugins run in turn,
DynamicResources first (``no new claims to deallocate`` for a pod without resource claims,
dynamicresources.go, PostFilter), then DefaultPreemption, and their reasons are joined with
", " (framework/runtime/framework.go, RunPostFilterPlugins): ``no new claims to deallocate,
preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 Preemption is not helpful for
scheduling.`` Nodes are classified as upstream's preemption Evaluator does
(framework/preemption/preemption.go, findCandidates / DryRunPreemption, and
defaultpreemption/default_preemption.go, SelectVictimsOnNode): a node whose rejection was
unresolvable is not tried (``Preemption is not helpful for scheduling``, also every node
not tried); a tried node without lower-priority pods says ``No preemption victims found for
incoming pod``; a tried node where the pod still does not fit with every lower-priority pod
gone counts the reasons of the first predicate that still rejects it.

One upstream quirk is kept: when a PreFilter plugin rejects the pod as UnschedulableAndUnresolvable
(a missing or unbound immediate claim, say), kube-scheduler runs no later PreFilter plugin
(framework/runtime/framework.go, RunPreFilterPlugins), so DynamicResources, which comes after
every other PreFilter plugin of the default profile (apis/config/v1/default_plugins.go,
applyDynamicResources), never wrote its cycle state; its PostFilter then fails reading it
(dynamicresources.go, PostFilter, getStateData: the framework's ``not found`` error), which
ends the PostFilter phase with that error: the FailedScheduling text ends ``... . not found``
and no preemption is tried (:data:`DRA_STATE_NOT_FOUND`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from berthmaster.scheduler.engine import Decision, Engine, fit_error_message
from berthmaster.scheduler.model import LabelSelector, Obj, PodView, label_selector
from berthmaster.scheduler.plugins.base import Status, unresolvable
from berthmaster.scheduler.snapshot import Snapshot

NO_CLAIMS_TO_DEALLOCATE = "no new claims to deallocate"
# framework/interface.go, ErrNotFound: DynamicResources' PostFilter without its PreFilter state
DRA_STATE_NOT_FOUND = "not found"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to a terminating pod on the nominated node."
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100
_PRIORITY_OFFSET = 2**31  # upstream adds MaxInt32 + 1 so negative priorities sum sensibly


@dataclass(frozen=True)
class Preemption:
    node: str
    victims: list[dict[str, Any]]
    pdb_violations: int


@dataclass(frozen=True)
class PreemptionResult:
    """The chosen preemption (or None) and the sentence to append to FailedScheduling."""

    preemption: Preemption | None
    message: str
    statuses: dict[str, Status] = field(default_factory=dict)
    # no candidate anywhere: the pod's status.nominatedNodeName is cleared (preemption.go,
    # Preempt: NewPostFilterResultWithNominatedNode(""))
    clear_nomination: bool = False


def preemption_message(num_all_nodes: int, statuses: Mapping[str, Status]) -> str:
    """DefaultPreemption's reason when no node has victims that make room."""
    return "preemption: " + fit_error_message(num_all_nodes, statuses)


def post_filter_message(preemption_reason: str) -> str:
    """The PostFilter plugins' joined reasons: DynamicResources' (the pod claims nothing to
    deallocate), then DefaultPreemption's."""
    return f"{NO_CLAIMS_TO_DEALLOCATE}, {preemption_reason}"


def failed_scheduling_message(decision: Decision, result: PreemptionResult | None) -> str:
    """kube-scheduler 1.35's FailedScheduling text (FitError.Error in framework/types.go): the
    filter histogram, then, when preemption found nothing, the PostFilter sentence."""
    if result is None or not result.message:
        return decision.message
    return f"{decision.message} {result.message}"


def _pdb_selectors(snapshot: Snapshot) -> list[tuple[str, LabelSelector, int, frozenset[str]]]:
    out = []
    for pdb in snapshot.pdbs.values():
        meta = pdb.get("metadata") or {}
        raw = (pdb.get("spec") or {}).get("selector")
        sel = label_selector(raw) if raw else None
        if sel is None or sel.empty:
            continue  # a PDB with an empty selector protects nothing here, as upstream
        status = pdb.get("status") or {}
        out.append((str(meta.get("namespace") or "default"), sel,
                    int(status.get("disruptionsAllowed") or 0),
                    frozenset((status.get("disruptedPods") or {}).keys())))
    return out


def split_by_pdb(pods: Sequence[PodView], snapshot: Snapshot
                 ) -> tuple[list[PodView], list[PodView]]:
    """(violating, non-violating): evicting a violating pod exceeds some PDB's allowance."""
    pdbs = _pdb_selectors(snapshot)
    allowed = [p[2] for p in pdbs]
    violating: list[PodView] = []
    fine: list[PodView] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, (ns, sel, _, disrupted) in enumerate(pdbs):
                if ns != pod.namespace or not sel.matches(pod.labels) or pod.name in disrupted:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else fine).append(pod)
    return violating, fine


@dataclass
class _Candidate:
    node: str
    victims: list[PodView]
    violations: int
    priorities: list[int]


def _importance(snapshot: Snapshot, pod: PodView) -> tuple[int, str]:
    return (snapshot.priority(pod), pod.start_time)


def _select_victims(pod: PodView, raw: Obj, node_name: str, snapshot: Snapshot, engine: Engine,
                    priority: int) -> _Candidate | Status:
    lower = [p for p in snapshot.pods_on(node_name) if snapshot.priority(p) < priority]
    if not lower:
        return unresolvable(NO_VICTIMS)
    with snapshot.what_if() as scenario:
        for p in lower:
            scenario.remove(p)
        rejected = engine.rejection(raw, node_name, snapshot)
        if rejected is not None:
            return rejected
        # most important first: higher priority, then earlier start
        lower.sort(key=lambda p: (-snapshot.priority(p), p.start_time))
        violating, fine = split_by_pdb(lower, snapshot)
        victims: list[PodView] = []
        violations = 0
        for group, counts in ((violating, True), (fine, False)):
            for p in group:
                scenario.put_back(p)
                if engine.fits(raw, node_name, snapshot):
                    continue
                scenario.remove(p)
                victims.append(p)
                violations += counts
        victims.sort(key=lambda p: (-snapshot.priority(p), p.start_time))
        return _Candidate(node_name, victims, violations,
                          [snapshot.priority(v) for v in victims])


def _pick(candidates: list[_Candidate]) -> _Candidate:
    for c in candidates:
        if not c.victims:
            return c

    def highest_start(c: _Candidate) -> str:
        top = c.priorities[0]
        return min(v.start_time for v, pr in zip(c.victims, c.priorities, strict=True)
                   if pr == top)

    pool = candidates
    for key in (lambda c: c.violations, lambda c: c.priorities[0],
                lambda c: sum(p + _PRIORITY_OFFSET for p in c.priorities),
                lambda c: len(c.victims)):
        best = min(key(c) for c in pool)
        pool = [c for c in pool if key(c) == best]
        if len(pool) == 1:
            return pool[0]
    latest = max(highest_start(c) for c in pool)
    return next(c for c in pool if highest_start(c) == latest)


def evaluate_preemption(pod: Obj, snapshot: Snapshot, engine: Engine,
                        decision: Decision | None = None) -> PreemptionResult:
    """Choose a preemption for ``pod`` (which ``decision`` found fitting nowhere)."""
    if decision is None:
        decision = engine.schedule(pod, snapshot, sample=False)
    if decision.prefilter_unresolvable:
        return PreemptionResult(None, DRA_STATE_NOT_FOUND)  # see the module docstring
    if not engine.policy.preemption:
        # DefaultPreemption disabled: DynamicResources' PostFilter reason alone
        return PreemptionResult(None, NO_CLAIMS_TO_DEALLOCATE)
    view = PodView.from_dict(pod)
    if view.preemption_policy == "Never":
        return PreemptionResult(None, post_filter_message("preemption: " + NEVER))
    priority = snapshot.priority(view)
    total = len(snapshot)
    if view.nominated_node and view.nominated_node not in decision.unresolvable:
        # default_preemption.go, PodEligibleToPreemptOthers: a pod whose nominated node still
        # holds a lower-priority pod being deleted *by preemption* waits for it; one whose
        # nominated node became unresolvable (or is gone) preempts again
        for p in snapshot.pods_on(view.nominated_node):
            if snapshot.priority(p) < priority and terminating_by_preemption(p):
                return PreemptionResult(None, post_filter_message("preemption: " + TERMINATING))
    statuses: dict[str, Status] = {}
    candidates: list[_Candidate] = []
    not_helpful = unresolvable(NOT_HELPFUL)
    potential = []
    for node in snapshot.node_list():
        name = node.name
        if decision.prefilter_message or name in decision.unresolvable \
                or name not in decision.reasons:
            statuses[name] = not_helpful
        else:
            potential.append(name)
    # as upstream, dry-run from a random offset until enough candidates are found
    wanted = max(len(potential) * engine.policy.min_candidate_nodes_percentage // 100,
                 engine.policy.min_candidate_nodes_absolute)
    offset = engine.random.randrange(len(potential)) if potential else 0
    non_violating = 0
    for i in range(len(potential)):
        name = potential[(offset + i) % len(potential)]
        outcome = _select_victims(view, pod, name, snapshot, engine, priority)
        if isinstance(outcome, Status):
            statuses[name] = outcome
            continue
        candidates.append(outcome)
        non_violating += outcome.violations == 0
        # preemption.go, DryRunPreemption: stop once enough were found, at least one of them
        # violating no PodDisruptionBudget
        if non_violating and len(candidates) >= wanted:
            break
    if not candidates:
        return PreemptionResult(None, post_filter_message(preemption_message(total, statuses)),
                                statuses, clear_nomination=True)
    chosen = _pick(candidates)
    return PreemptionResult(
        Preemption(chosen.node, [dict(v.raw) for v in chosen.victims], chosen.violations), "",
        statuses)


def terminating_by_preemption(pod: PodView) -> bool:
    """default_preemption.go, podTerminatingByPreemption: being deleted, with the
    DisruptionTarget condition the scheduler set before deleting it."""
    if not pod.deleting:
        return False
    conditions = ((pod.raw.get("status") or {}).get("conditions")) or ()
    return any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
               and c.get("reason") == "PreemptionByScheduler" for c in conditions)


def choose_preemption(pod: Obj, snapshot: Snapshot, engine: Engine,
                      decision: Decision | None = None) -> Preemption | None:
    """The node and victims that would let ``pod`` schedule, or None (see the module doc)."""
    return evaluate_preemption(pod, snapshot, engine, decision).preemption
