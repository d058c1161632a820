"""The drain's per-pod decisions, as kubectl drain makes them (k8s.io/kubectl pkg/drain/drain.go
``evictPods``: 404 gone, 429 and a terminating namespace's 403 retried, anything else the pod's
error; ``waitForDelete``: gone when not found or replaced by a pod of another uid, and
``SkipWaitForDeleteTimeoutSeconds`` on an unreachable node)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from berthmaster.operator.machines.drain import (
    GONE,
    REFUSED,
    RETRY,
    evicted_pod_gone,
    eviction_answer,
    pause,
)

NOW = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
TERMINATING = {"details": {"causes": [{"type": "NamespaceTerminating"}]}}


@pytest.mark.parametrize(("status", "body", "answer"), [
    (404, {}, GONE), (429, {}, RETRY), (403, TERMINATING, RETRY), (403, {}, REFUSED),
    (500, {}, REFUSED), (422, TERMINATING, REFUSED),
])
def test_eviction_answer(status: int, body: dict, answer: str) -> None:
    assert eviction_answer(status, body) == answer


def pod(uid: str, deleted_at: str | None = None) -> dict:
    meta = {"name": "p", "namespace": "ns", "uid": uid}
    if deleted_at:
        meta["deletionTimestamp"] = deleted_at
    return {"metadata": meta}


@pytest.mark.parametrize(("current", "unreachable", "gone"), [
    (None, False, True),
    (pod("u2"), False, True),  # a new pod of the same name
    (pod("u1"), False, False),
    (pod("u1", "2026-01-01T00:00:00Z"), False, False),  # still terminating, node reachable
    (pod("u1", "2026-01-01T00:00:00Z"), True, True),  # terminating 10 s on an unreachable node
    (pod("u1", "2026-01-01T00:00:10Z"), True, False),  # not yet over a second
])
def test_evicted_pod_gone(current: dict | None, unreachable: bool, gone: bool) -> None:
    assert evicted_pod_gone(pod("u1"), current, unreachable=unreachable, now=NOW) is gone


@pytest.mark.parametrize(("interval", "deadline", "now", "wait"), [
    (5.0, 100.0, 90.0, 5.0), (5.0, 100.0, 98.0, 2.0), (5.0, 100.0, 101.0, 0.0),
])
def test_pause_is_cut_short_at_the_deadline(interval: float, deadline: float, now: float,
                                            wait: float) -> None:
    assert pause(interval, deadline, now) == wait
