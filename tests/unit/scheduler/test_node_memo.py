"""The engine's per-node memo of node-local scores never serves a stale value.

``Engine._score`` takes the node-local priorities' sum (LeastRequested, BalancedAllocation,
MostRequested: ``Priority.local_key``) from ``NodeInfo.memo`` when it holds one; every change
to a node or to the pods counted on it must empty that node's memo. Here a random sequence of
assumes, forgets, pod deletions and node updates runs against one snapshot, and after each step
the memoised totals must equal ``_score_each``'s fresh ones (the explain path, which never reads
the memo), for pods of several request sizes.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.policy import load_policy
from berthmaster.scheduler.snapshot import Snapshot
from tests.support.builders import make_node, make_pod

POLICY = load_policy("""{"kind": "Policy", "apiVersion": "v1", "priorities": [
    {"name": "LeastRequestedPriority", "weight": 1},
    {"name": "BalancedResourceAllocation", "weight": 2},
    {"name": "MostRequestedPriority", "weight": 3},
    {"name": "TaintTolerationPriority", "weight": 1}]}""")
NODES = 4
SIZES = (("100m", "128Mi"), ("500m", "1Gi"), ("2", "256Mi"))

step = st.one_of(
    st.tuples(st.just("assume"), st.integers(0, len(SIZES) - 1), st.integers(0, NODES - 1)),
    st.tuples(st.just("forget"), st.integers(0, 30), st.just(0)),
    st.tuples(st.just("delete"), st.integers(0, 30), st.just(0)),
    st.tuples(st.just("resize"), st.sampled_from(("4", "8", "16")), st.integers(0, NODES - 1)),
)


def probe(size: int) -> PodView:
    cpu, memory = SIZES[size]
    pod = make_pod(f"probe-{size}", cpu=cpu, memory=memory)
    pod["metadata"]["uid"] = f"probe-{size}"
    return PodView.from_dict(pod)


def assert_memo_agrees(engine: Engine, snapshot: Snapshot) -> None:
    nodes = snapshot.node_list()
    for size in range(len(SIZES)):
        view = probe(size)
        memoised, _ = engine._score(view, snapshot, nodes, explain=False)
        fresh, _ = engine._score_each(view, snapshot, nodes)
        # the fast path leaves out priorities that score every node alike: compare the
        # differences between nodes, which alone decide
        assert [m - memoised[0] for m in memoised] == [f - fresh[0] for f in fresh]


@settings(max_examples=60, deadline=None)
@given(st.lists(step, min_size=1, max_size=25))
def test_memoised_scores_follow_every_change(steps: list[tuple[str, object, int]]) -> None:
    snapshot = Snapshot.build(nodes=[make_node(f"n{i}", cpu="8", memory="16Gi")
                                     for i in range(NODES)])
    engine = Engine(POLICY, seed=1)
    assumed: list[dict[str, object]] = []
    counter = 0
    for action, arg, node in steps:
        assert_memo_agrees(engine, snapshot)  # fills the memo before the change
        if action == "assume":
            assert isinstance(arg, int)
            cpu, memory = SIZES[arg]
            counter += 1
            pod = make_pod(f"p{counter}", cpu=cpu, memory=memory)
            pod["metadata"]["uid"] = f"u{counter}"
            snapshot.assume(pod, f"n{node}")
            assumed.append(pod)
        elif action in ("forget", "delete") and assumed:
            assert isinstance(arg, int)
            pod = assumed.pop(arg % len(assumed))
            if action == "forget":
                snapshot.forget(pod)
            else:
                snapshot.remove_pod(str(pod["metadata"]["uid"]))  # type: ignore[index]
        elif action == "resize":
            snapshot.upsert_node(make_node(f"n{node}", cpu=str(arg), memory="16Gi"))
        assert_memo_agrees(engine, snapshot)


def test_two_engines_on_one_snapshot_keep_their_own_entries() -> None:
    """Another engine (another policy's weights) reading the same snapshot never takes this
    engine's memoised sums."""
    snapshot = Snapshot.build(nodes=[make_node("a", cpu="16"), make_node("b", cpu="2")])
    least = Engine(load_policy('{"kind": "Policy", "apiVersion": "v1", "priorities": '
                               '[{"name": "LeastRequestedPriority", "weight": 1}]}'))
    most = Engine(load_policy('{"kind": "Policy", "apiVersion": "v1", "priorities": '
                              '[{"name": "MostRequestedPriority", "weight": 1}]}'))
    pod = make_pod("p", cpu="1", memory="1Gi")
    assert least.schedule(pod, snapshot).node == "a"
    assert most.schedule(pod, snapshot).node == "b"
    assert least.schedule(pod, snapshot).node == "a"
