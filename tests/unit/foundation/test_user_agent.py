"""The User-Agent every KubeClient sends: client-go's shape (rest/config.go,
``DefaultKubernetesUserAgent`` and ``AddUserAgent``), one per component."""

from __future__ import annotations

import re

import pytest

from berthmaster import __version__
from berthmaster.foundation.kube import user_agent


def test_component_version_platform() -> None:
    agent = user_agent("berthmaster-scheduler")
    assert re.fullmatch(r"berthmaster-scheduler/\S+ \([a-z0-9]+/[a-z0-9_]+\) \S+", agent), agent
    assert agent.startswith(f"berthmaster-scheduler/{__version__} (")


def test_the_replica_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two replicas of one component tell apart in the audit log: the Pod's name stands where
    client-go's DefaultKubernetesUserAgent puts ``kubernetes/<commit>``."""
    monkeypatch.setenv("POD_NAME", "berthmaster-scheduler-7f9c-x2x4q")
    agent = user_agent("berthmaster-scheduler")
    assert agent.endswith(") berthmaster-scheduler-7f9c-x2x4q"), agent
    assert user_agent("berthmaster-scheduler", replica="a b").endswith(") a_b")
    assert user_agent("berthmaster-scheduler", "leader-election").endswith(
        "berthmaster-scheduler-7f9c-x2x4q/leader-election")


def test_suffix_as_add_user_agent() -> None:
    agent = user_agent("berthmaster-scheduler", "leader-election")
    assert agent == user_agent("berthmaster-scheduler") + "/leader-election"


def test_field_manager_is_the_component() -> None:
    # The API server names a request's default field manager by the User-Agent up to its first
    # "/" (apiserver pkg/endpoints/handlers/create.go, prefixFromUserAgent).
    assert user_agent("berthmaster-operator").split("/")[0] == "berthmaster-operator"
    assert user_agent().split("/")[0] == "berthmaster"
