"""The collector around a pass (cycle.py): paused while the state is built and the plan is
made, back as it was afterwards, and what prepare_for_pass built frozen before it resumes."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from berthmaster.scheduler.descheduler.cycle import (
    ClusterObjects,
    gc_paused,
    plan_pass,
    prepare_for_pass,
)
from berthmaster.scheduler.descheduler.policy import parse_policy
from tests.support.builders import make_node, make_pod

POLICY = parse_policy({
    "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
    "profiles": [{"name": "p", "pluginConfig": [{"name": "RemoveDuplicates", "args": {}}],
                  "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}}}]})


@pytest.fixture
def collector() -> Iterator[None]:
    was_enabled = gc.isenabled()
    try:
        yield
    finally:
        gc.unfreeze()
        (gc.enable if was_enabled else gc.disable)()


@pytest.mark.parametrize("enabled", [True, False])
def test_gc_paused_pauses_and_restores(collector: None, enabled: bool) -> None:
    (gc.enable if enabled else gc.disable)()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled() is enabled
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("a failing build")
    assert gc.isenabled() is enabled


def test_prepare_for_pass_freezes_the_state_and_resumes_the_collector(collector: None) -> None:
    gc.enable()
    gc.unfreeze()
    objects = ClusterObjects([make_node("a"), make_node("b")],
                             [make_pod("p", node_name="a", owner=("ReplicaSet", "rs", "u"))])
    state = prepare_for_pass(objects, POLICY)
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
    seen = {id(o) for o in gc.get_objects()}  # the permanent generation is not listed
    assert id(state) not in seen
    plan_pass(state, POLICY)
    assert gc.isenabled()
