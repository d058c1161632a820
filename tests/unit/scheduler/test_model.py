"""Model: quantities, requests, priorities, selectors, tolerations (docs/engine.md's examples)."""

from fractions import Fraction

import pytest

from berthmaster.scheduler.model import (
    SYSTEM_CLUSTER_CRITICAL,
    SYSTEM_NODE_CRITICAL,
    NodeSelector,
    PodView,
    QuantityError,
    Taint,
    label_selector,
    node_selector_term,
    noexecute_eviction_delay,
    parse_quantity,
    resolve_priority,
    toleration_from_dict,
)
from tests.support.builders import make_pod, taint, toleration


@pytest.mark.parametrize(("text", "value"), [
    ("100m", Fraction(1, 10)), ("1Gi", 2**30), ("1e3", 1000), ("2Ki", 2048),
    ("0.5", Fraction(1, 2)), ("1E", 10**18),
    ("1.5G", 1_500_000_000), (3, 3), (0.25, Fraction(1, 4)), ("12E-1", Fraction(6, 5)),
    ("500u", Fraction(1, 2000)), ("1k", 1000),
])
def test_parse_quantity(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "1.2.3", "ten", "1Gb", "--1", True])
def test_parse_quantity_rejects(bad):
    with pytest.raises(QuantityError):
        parse_quantity(bad)


def test_bad_quantity_names_pod_and_field():
    with pytest.raises(QuantityError, match=r"pod default/p: spec.containers\[0\].resources"):
        PodView.from_dict(make_pod("p", cpu="lots"))


def test_requests_max_of_init_and_sum_plus_overhead():
    pod = make_pod("p", spec={
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "200m"},
                                        "limits": {"memory": "50Mi", "example.com/gpu": "1"}}}],
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "500m"}}}],
        "overhead": {"cpu": "10m"}})
    view = PodView.from_dict(pod)
    assert view.requests == {"cpu": 510, "memory": 150 * 2**20, "example.com/gpu": 1}
    # scoring uses non-zero requests: unspecified cpu/memory count as 100m / 200Mi, so the
    # init container (no memory request) weighs 200Mi, more than the 150Mi of the app containers
    assert view.nonzero_memory == 200 * 2**20
    assert view.nonzero_cpu == 510


def test_sidecar_init_containers_add_to_the_sum():
    pod = make_pod("p", spec={
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}],
        "initContainers": [
            {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}},
            {"name": "init", "resources": {"requests": {"cpu": "120m"}}}]})
    assert PodView.from_dict(pod).requests["cpu"] == 170  # max(100+50, 50+120)


def test_nonzero_defaults_for_request_less_pods():
    view = PodView.from_dict(make_pod("p"))
    assert view.requests == {}
    assert (view.nonzero_cpu, view.nonzero_memory) == (100, 200 * 2**20)


@pytest.mark.parametrize(("spec", "classes", "want"), [
    ({"priority": 7, "priorityClassName": "high"}, {"high": {"value": 100}}, 7),
    ({"priorityClassName": "high"}, {"high": {"value": 1000000}}, 1000000),
    ({}, {"d": {"value": 50, "globalDefault": True}, "x": {"value": 9}}, 50),
    ({}, {"x": {"value": 9}}, 0),
    ({"priorityClassName": "system-node-critical"}, {}, SYSTEM_NODE_CRITICAL),
    ({"priorityClassName": "system-cluster-critical"}, {}, SYSTEM_CLUSTER_CRITICAL),
])
def test_resolve_priority(spec, classes, want):
    assert resolve_priority({"spec": spec}, classes) == want


T = Taint
@pytest.mark.parametrize(("tol", "t", "ok"), [
    # Equal: key, value and effect must match (v1.Toleration.ToleratesTaint)
    (toleration("key1", "value1", "NoExecute", "Equal"), T("key1", "value1", "NoExecute"), True),
    (toleration("key1", "value2", "NoExecute", "Equal"), T("key1", "value1", "NoExecute"), False),
    (toleration("key1", "value1", "NoSchedule", "Equal"), T("key1", "value1", "NoExecute"), False),
    # operator defaults to Equal
    (toleration("key1", "value1", "NoExecute"), T("key1", "value1", "NoExecute"), True),
    # Exists: key and effect must match, any value
    (toleration("key1", effect="NoExecute", operator="Exists"), T("key1", "v", "NoExecute"), True),
    (toleration("key2", effect="NoExecute", operator="Exists"), T("key1", "v", "NoExecute"), False),
    # empty effect matches every effect
    (toleration("key1", operator="Exists"), T("key1", "v", "PreferNoSchedule"), True),
    # empty key with Exists tolerates everything (v1.Toleration.ToleratesTaint)
    (toleration(operator="Exists"), T("anything", "x", "NoSchedule"), True),
    (toleration(operator="Bogus", key="key1"), T("key1", "", "NoSchedule"), False),
])
def test_toleration_matching(tol, t, ok):
    assert toleration_from_dict(tol).tolerates(t) is ok


@pytest.mark.parametrize(("tols", "taints", "want"), [
    ([], [taint("k", "v", "NoSchedule")], None),  # no NoExecute taint: never evicted
    ([], [taint("k", "v", "NoExecute")], 0),  # untolerated: evicted now
    ([toleration("k", "v", "NoExecute")], [taint("k", "v", "NoExecute")], None),  # forever
    ([toleration("key1", "value1", "NoExecute", seconds=3600)],
     [taint("key1", "value1", "NoExecute")], 3600),
    ([toleration("a", operator="Exists", seconds=300), toleration("b", operator="Exists",
                                                                 seconds=60)],
     [taint("a", "", "NoExecute"), taint("b", "", "NoExecute")], 60),
    ([toleration("a", operator="Exists", seconds=300)],
     [taint("a", "", "NoExecute"), taint("b", "", "NoExecute")], 0),
    ([toleration("a", operator="Exists", seconds=-5)], [taint("a", "", "NoExecute")], 0),
])
def test_noexecute_eviction_delay(tols, taints, want):
    assert noexecute_eviction_delay(make_pod("p", tolerations=tols), taints) == want


def test_noexecute_three_taint_example_keeps_running():
    # the documented three-taint example: only the NoSchedule key2 taint is untolerated
    pod = make_pod("p", tolerations=[toleration("key1", "value1", "NoSchedule", "Equal"),
                                     toleration("key1", "value1", "NoExecute", "Equal")])
    taints = [taint("key1", "value1", "NoSchedule"), taint("key1", "value1", "NoExecute"),
              taint("key2", "value2", "NoSchedule")]
    assert noexecute_eviction_delay(pod, taints) is None


@pytest.mark.parametrize(("term", "labels", "ok"), [
    ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["us"]}]},
     {"zone": "us"}, True),
    ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["us"]}]},
     {"zone": "emea"}, False),
    ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["us"]}]}, {}, True),
    ({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, {"zone": "x"}, False),
    ({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]},
     {"cores": "8"}, True),
    ({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]},
     {"cores": "4"}, False),
    ({"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["4"]}]},
     {"cores": "x"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "Exists"},
                           {"key": "b", "operator": "Exists"}]}, {"a": ""}, False),  # ANDed
    ({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}, {}, True),
    ({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}, {},
     False),
    ({}, {"a": "b"}, False),  # an empty term matches nothing
])
def test_node_selector_term(term, labels, ok):
    assert node_selector_term(term).matches("n1", labels) is ok


def test_node_selector_terms_are_ored():
    sel = NodeSelector((node_selector_term({"matchExpressions": [
        {"key": "a", "operator": "Exists"}]}), node_selector_term({"matchExpressions": [
            {"key": "b", "operator": "Exists"}]})))
    assert sel.matches("n", {"b": "1"}) and not sel.matches("n", {"c": "1"})


@pytest.mark.parametrize(("raw", "labels", "ok"), [
    (None, {"a": "1"}, False),  # a null selector selects nothing
    ({}, {"a": "1"}, True),  # an empty one everything
    ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"},
     False),
    ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, {"a": "2"}, False),
])
def test_label_selector(raw, labels, ok):
    assert label_selector(raw).matches(labels) is ok
