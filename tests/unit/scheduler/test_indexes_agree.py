"""The index-based fast paths agree with matching node by node (property-based)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.model import PodView, affinity_term, label_selector
from berthmaster.scheduler.plugins import node_affinity
from berthmaster.scheduler.plugins.inter_pod_affinity import (
    existing_anti_affinity_blocked,
    term_matches,
    topology_scores,
)
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import make_node, make_pod, pod_affinity_term

KEYS = ("zone", "disk", "cores")
VALUES = ("a", "b", "1", "4")
labels = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
expression = st.builds(
    lambda k, op, vs: {"key": k, "operator": op,
                       **({"values": vs[:1] if op in ("Gt", "Lt") else vs}
                          if op not in ("Exists", "DoesNotExist") else {})},
    st.sampled_from(KEYS), st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
    st.lists(st.sampled_from(VALUES), min_size=1, max_size=2))
terms = st.lists(st.lists(expression, min_size=0, max_size=3), min_size=1, max_size=3)


@settings(max_examples=150, deadline=None)
@given(st.lists(labels, min_size=1, max_size=8), terms, labels)
def test_node_affinity_index_matches_direct(node_labels, required, selector):
    nodes = [make_node(f"n{i}", labels=lab) for i, lab in enumerate(node_labels)]
    snap = Snapshot.build(nodes=nodes)
    pod = PodView.from_dict(make_pod("p", node_selector=selector, required_node_terms=required))
    direct = {n.name for n in snap.node_list() if node_affinity.fits(pod, n.name, n.labels)}
    indexed = node_affinity.matching_nodes(pod, snap)
    if indexed is not None:
        assert indexed == direct
    engine = Engine(percentage_of_nodes_to_score=100)
    raw = make_pod("p", node_selector=selector, required_node_terms=required)
    assert set(engine.feasible_nodes(raw, snap)) == direct
    decision = engine.schedule(raw, snap, explain=True)
    assert decision.feasible == len(direct) and decision.evaluated == len(nodes)
    assert set(decision.reasons) == {n["metadata"]["name"] for n in nodes} - direct
    assert (decision.node in direct) if direct else decision.node is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y"]),
                          st.booleans()), min_size=1, max_size=10),
       st.sampled_from(["x", "y"]))
def test_anti_affinity_matches_a_naive_scan(placed, app):
    """Zone anti-affinity both ways, against a direct reading of the rules."""
    zones = {"n1": "a", "n2": "a", "n3": "b", "n4": "c"}
    nodes = [make_node(n, labels={"zone": z}) for n, z in zones.items()]
    pods = []
    for i, (zone, label, has_anti) in enumerate(placed):
        node = next(n for n, z in zones.items() if z == zone)
        pods.append(make_pod(f"e{i}", labels={"app": label}, node_name=node,
                             pod_anti_affinity=[pod_affinity_term({"app": "new"}, "zone")]
                             if has_anti else []))
    snap = Snapshot.build(nodes=nodes, pods=pods)
    pod = make_pod("p", labels={"app": "new"},
                   pod_anti_affinity=[pod_affinity_term({"app": app}, "zone")])
    barred = {z for z, label, has_anti in placed if label == app or has_anti}
    expected = {n for n, z in zones.items() if z not in barred}
    got = set(Engine(percentage_of_nodes_to_score=100).feasible_nodes(pod, snap))
    assert got == expected


# ---- existing pods' affinity terms: the snapshot's anchor index against a brute-force scan ----

POD_KEYS = ("app", "tier")
POD_VALUES = ("x", "y", "z")
NAMESPACES = {"ns1": {"team": "a"}, "ns2": {"team": "b"}, "ns3": {}}
TOPOLOGY = {"n1": {"zone": "a", "rack": "r1"}, "n2": {"zone": "a"}, "n3": {"zone": "b",
                                                                          "rack": "r1"},
            "n4": {"zone": "c", "rack": "r2"}}
pod_labels = st.dictionaries(st.sampled_from(POD_KEYS), st.sampled_from(POD_VALUES), max_size=2)
selector_expression = st.builds(
    lambda k, op, vs: {"key": k, "operator": op,
                       **({} if op in ("Exists", "DoesNotExist") else {"values": vs})},
    st.sampled_from(POD_KEYS), st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    st.lists(st.sampled_from(POD_VALUES), min_size=0, max_size=2))
label_selectors = st.one_of(
    st.none(),  # no labelSelector: selects nothing
    st.builds(lambda ml, me: {**({"matchLabels": ml} if ml else {}),
                              **({"matchExpressions": me} if me else {})},
              pod_labels, st.lists(selector_expression, max_size=2)))
raw_terms = st.builds(
    lambda sel, key, nss, nssel: {
        **({} if sel is None else {"labelSelector": sel}), "topologyKey": key,
        **({} if nss is None else {"namespaces": nss}),
        **({} if nssel is None else {"namespaceSelector": nssel})},
    label_selectors, st.sampled_from(["zone", "rack"]),
    st.one_of(st.none(), st.lists(st.sampled_from(sorted(NAMESPACES)), max_size=2)),
    st.one_of(st.none(), st.just({}), st.just({"matchLabels": {"team": "a"}})))
existing_pods = st.lists(st.tuples(
    st.sampled_from(sorted(TOPOLOGY)), st.sampled_from(sorted(NAMESPACES)), pod_labels,
    st.lists(raw_terms, max_size=2),  # required anti-affinity
    st.lists(raw_terms, max_size=1),  # required affinity
    st.lists(st.tuples(st.integers(1, 100), raw_terms), max_size=1),  # preferred affinity
    st.lists(st.tuples(st.integers(1, 100), raw_terms), max_size=1),  # preferred anti
    st.booleans()), min_size=0, max_size=8)  # removed again before the check


def _selects(raw_term, owner_ns, owner_labels, ns, labels):
    """Whether an existing pod's raw term selects a pod in ``ns`` with ``labels`` (upstream's
    rules, read directly: namespaces + namespaceSelector, default the owner's namespace)."""
    term = affinity_term(raw_term, owner_ns, owner_labels)
    if not term.selector.matches(labels):
        return False
    listed = raw_term.get("namespaces") or []
    ns_selector = raw_term.get("namespaceSelector")
    if not listed and ns_selector is None:
        return ns == owner_ns
    if ns in listed:
        return True
    return ns_selector is not None and label_selector(ns_selector).matches(NAMESPACES[ns])


@settings(max_examples=300, deadline=None)
@given(existing_pods, st.sampled_from(sorted(NAMESPACES)), pod_labels)
def test_existing_terms_index_agrees_with_a_brute_force_scan(placed, namespace, labels):
    nodes = [make_node(n, labels=lab) for n, lab in TOPOLOGY.items()]
    namespaces = [{"metadata": {"name": n, "labels": lab}} for n, lab in NAMESPACES.items()]
    pods = [make_pod(f"e{i}", ns, labels=lab, node_name=node, pod_anti_affinity=anti,
                     pod_affinity=aff, preferred_pod_affinity=pref,
                     preferred_pod_anti_affinity=pref_anti)
            for i, (node, ns, lab, anti, aff, pref, pref_anti, _) in enumerate(placed)]
    snap = Snapshot.build(nodes=nodes, pods=pods, namespaces=namespaces)
    for raw, (*_, removed) in zip(pods, placed, strict=True):
        if removed:  # exercises the index's removal path
            snap.remove_pod(raw["metadata"]["uid"])
    kept = [p for p in placed if not p[-1]]
    incoming = make_pod("incoming", namespace, labels=labels)
    view = PodView.from_dict(incoming)

    # every kind: the anchored candidates that match are exactly the terms that match
    for kind in ("anti_required", "affinity_required", "affinity_preferred", "anti_preferred"):
        candidates = list(snap.term_anchors[kind].candidates(view.labels))
        assert len(candidates) == len(set(candidates)), "a term was offered twice"
        assert set(candidates) <= set(snap.term_index[kind]), "a removed term is still filed"
        via_index = {t for t in candidates if term_matches(t, view, snap)}
        scanned = {t for t in snap.term_index[kind] if term_matches(t, view, snap)}
        assert via_index == scanned

    # existing pods' required anti-affinity, read straight from the pods
    blocked: set[str] = set()
    for node, ns, lab, anti, *_ in kept:
        for raw_term in anti:
            value = TOPOLOGY[node].get(raw_term["topologyKey"])
            if value is not None and _selects(raw_term, ns, lab, namespace, labels):
                blocked |= {n for n, nl in TOPOLOGY.items()
                            if nl.get(raw_term["topologyKey"]) == value}
    assert existing_anti_affinity_blocked(view, snap) == blocked
    feasible = Engine(percentage_of_nodes_to_score=100).feasible_nodes(incoming, snap)
    assert set(feasible) == set(TOPOLOGY) - blocked

    # existing pods' terms towards the incoming pod in the priority, read straight from the pods
    expected: dict[str, dict[str, int]] = {}
    for node, ns, lab, _, aff, pref, pref_anti, _ in kept:
        weighted = [(1, t) for t in aff] + list(pref) + [(-w, t) for w, t in pref_anti]
        for weight, raw_term in weighted:
            key = raw_term["topologyKey"]
            value = TOPOLOGY[node].get(key)
            if value is not None and _selects(raw_term, ns, lab, namespace, labels):
                by_value = expected.setdefault(key, {})
                by_value[value] = by_value.get(value, 0) + weight
    assert topology_scores(view, snap) == expected
