"""The deadline on out-of-tree plugin calls (scheduler/daemon/plugin_deadline.py): a Filter
that never returns is interrupted in the calling thread and comes out as the plugin's error,
worded as runtime/framework.go words a plugin's error (``running "X" filter plugin: <err>``);
calls outside the guarded wrappers are never interrupted. kube-scheduler has no such deadline
(pkg/scheduler/schedule_one.go runs plugins with no timeout)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from berthmaster.scheduler.config import load_config
from berthmaster.scheduler.daemon.plugin_deadline import PluginDeadline, guarded_call
from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.framework import PluginError
from berthmaster.scheduler.snapshot import Snapshot
from tests.support import plugins
from tests.support.builders import make_node, make_pod


@pytest.fixture(autouse=True)
def installed(tmp_path: Path) -> Iterator[None]:
    with plugins.installed(tmp_path):
        yield


def _engine() -> Engine:
    text = ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: HangingFilter}]\n")
    return Engine(load_config(text, "config.yaml").profiles[0])


def test_a_filter_that_never_returns_is_the_plugins_error() -> None:
    engine = _engine()
    snapshot = Snapshot.build(nodes=[make_node("a")], pods=[])
    deadline = PluginDeadline(0.2)
    assert deadline.start()
    try:
        with pytest.raises(PluginError) as caught:
            engine.schedule(make_pod("stuck", labels={plugins.HANG_TRIGGER: "yes"}), snapshot)
        # the pods the plugin answers for are scheduled as before
        assert engine.schedule(make_pod("calm"), snapshot).node == "a"
    finally:
        deadline.stop()
    assert str(caught.value) == ('running "HangingFilter" filter plugin: did not return '
                                 "within 0.2s and was interrupted (the scheduler's "
                                 "--plugin-timeout)")


def test_no_deadline_when_it_is_zero_and_no_guarded_call_outside_plugins() -> None:
    assert not PluginDeadline(0).start()
    assert guarded_call(sys._getframe()) is None
