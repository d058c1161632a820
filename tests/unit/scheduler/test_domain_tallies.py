"""The snapshot's per-domain tallies (``scheduler/domains.py``) always equal a fresh count.

A random sequence of pod adds, removals, deletions in progress, assumes and forgets, node
relabels, additions and removals runs against one snapshot whose tallies were made before the
sequence (so they are updated incrementally, or rebuilt after node changes). After every step:

- each watched selector's tally (pods per domain, pods being deleted, the occupied domains'
  nodes) equals a count over the assigned pods;
- each affinity term's carrier tally (every kind) equals a count over the term index;
- the plugins' answers built on the tallies equal the pod-by-pod computations they replaced:
  the nodes barred by a pod's own anti-affinity (including for a pod that is itself counted,
  as the descheduler asks), topology spread's counts and the inter-pod affinity score's
  weights per domain.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from berthmaster.scheduler.domains import Domains
from berthmaster.scheduler.model import AffinityTerm, PodView, affinity_term
from berthmaster.scheduler.plugins import pod_topology_spread
from berthmaster.scheduler.plugins.inter_pod_affinity import (
    HARD_POD_AFFINITY_WEIGHT,
    _domain_nodes,
    _domains_of,
    anti_affinity_blocked,
    matching_pods,
    term_matches,
    topology_scores,
)
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import make_node, make_pod, pod_affinity_term

NODES = 5
ZONES = ("a", "b", "c")
APPS = ("x", "y", "z")
NAMESPACES = ("ns1", "ns2")
HOSTNAME = "kubernetes.io/hostname"
SELECTORS: tuple[dict[str, Any], ...] = (
    {"labels": {"app": "x"}},
    {"expressions": [{"key": "app", "operator": "In", "values": ["x", "y"]}]},
    {"expressions": [{"key": "tier", "operator": "Exists"}]},
    {"expressions": [{"key": "app", "operator": "NotIn", "values": ["x"]}]},
    {},
)


def watch_terms() -> list[AffinityTerm]:
    out = []
    for selector in SELECTORS:
        for key in (HOSTNAME, "zone"):
            for namespaces in (["ns1"], ["ns1", "ns2"]):
                raw = pod_affinity_term(selector.get("labels"), key,
                                        expressions=selector.get("expressions", ()),
                                        namespaces=namespaces)
                out.append(affinity_term(raw, "ns1", {}))
    return out


WATCHED = watch_terms()

pod_shape = st.fixed_dictionaries({
    "app": st.sampled_from(APPS), "tier": st.booleans(), "ns": st.sampled_from(NAMESPACES),
    "anti": st.sampled_from([None, (0, HOSTNAME), (1, "zone"), (2, HOSTNAME)]),
    # (kind, selector, topology key, weight): the pod's preferred or required affinity
    "terms": st.lists(st.sampled_from([
        ("preferred", 0, HOSTNAME, 3), ("preferred", 1, "zone", 5), ("preferred", 0, "zone", 2),
        ("preferred-anti", 2, "zone", 4), ("preferred-anti", 0, HOSTNAME, 1),
        ("required", 1, "zone", 0)]), max_size=2),
    "node": st.integers(0, NODES + 1),  # NODES and NODES+1: nodes that may not exist yet
})
step = st.one_of(
    st.tuples(st.just("add"), pod_shape),
    st.tuples(st.just("assume"), pod_shape),
    st.tuples(st.just("remove"), st.integers(0, 40)),
    st.tuples(st.just("forget"), st.integers(0, 40)),
    st.tuples(st.just("deleting"), st.integers(0, 40)),
    st.tuples(st.just("relabel"), st.tuples(st.integers(0, NODES - 1), st.sampled_from(ZONES))),
    st.tuples(st.just("node-add"), st.integers(NODES, NODES + 1)),
    st.tuples(st.just("node-remove"), st.integers(0, NODES + 1)),
)


def node(i: int, zone: str | None = None) -> dict[str, Any]:
    return make_node(f"n{i}", labels={"zone": zone or ZONES[i % len(ZONES)]})


def pod(uid: str, shape: dict[str, Any], deleting: bool = False) -> dict[str, Any]:
    labels = {"app": shape["app"], **({"tier": "1"} if shape["tier"] else {})}
    anti = []
    if shape["anti"] is not None:
        selector, key = shape["anti"]
        spec = SELECTORS[selector]
        anti.append(pod_affinity_term(spec.get("labels"), key,
                                      expressions=spec.get("expressions", ())))
    terms: dict[str, list[Any]] = {"preferred": [], "preferred-anti": [], "required": []}
    for kind, selector, key, weight in shape.get("terms", ()):
        spec = SELECTORS[selector]
        raw = pod_affinity_term(spec.get("labels"), key, expressions=spec.get("expressions", ()))
        terms[kind].append(raw if kind == "required" else (weight, raw))
    return make_pod(uid, shape["ns"], labels=labels, uid=uid, node_name=f"n{shape['node']}",
                    pod_anti_affinity=anti, pod_affinity=terms["required"],
                    preferred_pod_affinity=terms["preferred"],
                    preferred_pod_anti_affinity=terms["preferred-anti"],
                    deleted_at="2026-01-01T00:00:00Z" if deleting else None)


def fresh(snapshot: Snapshot, key: str, pods: list[tuple[PodView, int]]) -> Domains:
    """A tally counted from scratch: (pod, weight) on known nodes carrying ``key``."""
    out = Domains(key, -1)
    for view, weight in pods:
        info = snapshot.nodes.get(view.node_name)
        value = None if info is None else info.labels.get(key)
        if value is not None:
            out.add(value, weight, view.deleting, snapshot.label_index[key][value])
    return out


def assert_same(tally: Domains, expected: Domains, what: str) -> None:
    assert tally.pods == expected.pods, what
    assert tally.blocked == expected.blocked, what


def assert_tallies_agree(snapshot: Snapshot) -> None:
    assigned = list(snapshot.assigned_pods())
    for term in WATCHED:
        tally = snapshot.matching_domains(term)
        selected = [(p, 1) for p in assigned
                    if p.namespace in term.namespaces and term.selector.matches(p.labels)]
        expected = fresh(snapshot, term.topology_key, selected)
        assert_same(tally, expected, f"watch {term}")
        assert tally.deleting == expected.deleting
    for kind, index in snapshot.term_index.items():
        for term, by_node in index.items():
            carriers = [(p, 1) for p in assigned for t in getattr(p, kind) if t == term]
            assert sum(by_node.values()) == len(carriers)
            tally, expected = (snapshot.carrier_domains(term, kind),
                               fresh(snapshot, term.topology_key, carriers))
            assert tally.pods == expected.pods, f"{kind} carriers {term}"
            # the nodes of the occupied domains: kept for the filter's kind only
            assert tally.blocked == (expected.blocked if kind == "anti_required" else set())


def scores_pod_by_pod(view: PodView, snapshot: Snapshot) -> dict[str, dict[str, int]]:
    """The inter-pod affinity score's weights per domain, summed over the pods one by one."""
    out: dict[str, dict[str, int]] = {}

    def add(key: str, node_name: str, weight: int) -> None:
        info = snapshot.nodes.get(node_name)
        value = None if info is None else info.labels.get(key)
        if value is not None:
            by_value = out.setdefault(key, {})
            by_value[value] = by_value.get(value, 0) + weight

    for sign, terms in ((1, view.affinity_preferred), (-1, view.anti_preferred)):
        for t in terms:
            for p in matching_pods(t, snapshot):
                if p.uid != view.uid:
                    add(t.topology_key, p.node_name, sign * t.weight)
    for p in snapshot.assigned_pods():
        for kind, sign in (("affinity_preferred", 1), ("anti_preferred", -1),
                           ("affinity_required", 1)):
            for t in getattr(p, kind):
                if term_matches(t, view, snapshot):
                    add(t.topology_key, p.node_name,
                        sign * (HARD_POD_AFFINITY_WEIGHT if kind == "affinity_required"
                                else t.weight))
    return nonzero(out)


def nonzero(by_key: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Weights that cancel out to 0 score nothing: left out before comparing."""
    kept = {key: {v: w for v, w in by_value.items() if w} for key, by_value in by_key.items()}
    return {key: by_value for key, by_value in kept.items() if by_value}


def assert_plugins_agree(snapshot: Snapshot) -> None:
    """The tally-based answers equal the pod-by-pod ones, for incoming and counted pods."""
    probes = [PodView.from_dict(pod("incoming", {
        "app": "x", "tier": True, "ns": "ns1", "anti": (0, HOSTNAME), "node": 0,
        "terms": [("preferred", 1, "zone", 5), ("preferred-anti", 0, HOSTNAME, 2)]}))]
    probes += list(snapshot.assigned_pods())[:4]
    for view in probes:
        for term in WATCHED[:8]:
            others = [p for p in matching_pods(term, snapshot) if p.uid != view.uid]
            direct = _domain_nodes(snapshot, term.topology_key,
                                   _domains_of(others, term.topology_key, snapshot))
            assert set(anti_affinity_blocked(term, view, snapshot)) == direct
        constraint = pod_topology_spread.SpreadConstraint(
            1, "zone", "DoNotSchedule", WATCHED[2].selector, None, "Ignore", "Ignore")
        nodes = snapshot.node_list()
        tallied = pod_topology_spread.domain_counts(view, [constraint], snapshot, nodes)
        counted = pod_topology_spread.domain_counts(view, [constraint], snapshot, list(nodes))
        assert tallied == counted
        assert nonzero(topology_scores(view, snapshot)) == scores_pod_by_pod(view, snapshot)


@settings(max_examples=150, deadline=None)
@given(st.lists(step, min_size=1, max_size=30))
def test_tallies_follow_every_change(steps: list[tuple[str, Any]]) -> None:
    snapshot = Snapshot.build(nodes=[node(i) for i in range(NODES)])
    assert_tallies_agree(snapshot)  # every watch exists from here on: updated pod by pod
    placed: list[dict[str, Any]] = []
    assumed: list[dict[str, Any]] = []
    counter = 0
    for action, arg in steps:
        if action in ("add", "assume"):
            counter += 1
            raw = pod(f"u{counter}", arg)
            if action == "add":
                snapshot.upsert_pod(raw)
                placed.append(raw)
            else:
                pending = {**raw, "spec": {k: v for k, v in raw["spec"].items()
                                           if k != "nodeName"}}
                snapshot.assume(pending, raw["spec"]["nodeName"])
                assumed.append(pending)
        elif action in ("remove", "deleting") and placed:
            raw = placed[arg % len(placed)]
            if action == "remove":
                placed.remove(raw)
                snapshot.remove_pod(raw["metadata"]["uid"])
            else:
                raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                snapshot.upsert_pod(raw)
        elif action == "forget" and assumed:
            snapshot.forget(assumed.pop(arg % len(assumed)))
        elif action == "relabel":
            index, zone = arg
            if snapshot.node(f"n{index}") is not None:
                snapshot.upsert_node(node(index, zone))
        elif action == "node-add":
            snapshot.upsert_node(node(arg))
        elif action == "node-remove":
            snapshot.remove_node(f"n{arg}")
        assert_tallies_agree(snapshot)
        assert_plugins_agree(snapshot)


def test_what_if_removals_are_tallied_and_put_back() -> None:
    """Preemption's dry runs take pods out and put them back: the tallies follow both ways."""
    snapshot = Snapshot.build(nodes=[node(i) for i in range(NODES)], pods=[
        pod(f"u{i}", {"app": "x", "tier": False, "ns": "ns1", "anti": (0, HOSTNAME),
                      "node": i}) for i in range(3)])
    term = WATCHED[0]  # app=x on hostname, ns1
    assert snapshot.matching_domains(term).blocked == {"n0", "n1", "n2"}
    carrier = next(iter(snapshot.term_index["anti_required"]))
    assert snapshot.carrier_domains(carrier).blocked == {"n0", "n1", "n2"}
    with snapshot.what_if() as scenario:
        scenario.remove(snapshot.get_pod("u1"))  # type: ignore[arg-type]
        assert snapshot.matching_domains(term).blocked == {"n0", "n2"}
        assert snapshot.carrier_domains(carrier).blocked == {"n0", "n2"}
    assert snapshot.matching_domains(term).blocked == {"n0", "n1", "n2"}
    assert snapshot.carrier_domains(carrier).blocked == {"n0", "n1", "n2"}
