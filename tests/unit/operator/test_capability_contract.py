"""The operator capability contract (operator/capability.py): the runtime found in kopf's memo,
and its health as a named /readyz condition."""

from __future__ import annotations

import kopf
import pytest

from berthmaster.operator import health
from berthmaster.operator.capability import Runtime, running
from berthmaster.operator.deschedulers.periodic import WatchedLoop
from berthmaster.operator.machines.handlers import MachinesRuntime
from berthmaster.operator.machines.healthcheck_handlers import HealthCheckRuntime


class Fake:
    def __init__(self, ok: bool = True) -> None:
        self.ok = ok

    def start(self) -> None: ...

    async def stop(self) -> None: ...

    def ready(self) -> tuple[bool, str]:
        return (True, "ok") if self.ok else (False, "the fake's worker died")


def test_running_finds_the_installed_runtime_or_asks_kopf_to_retry() -> None:
    fake = Fake()
    assert running({"fake": fake}, "fake", Fake) is fake
    with pytest.raises(kopf.TemporaryError, match="the fake capability is still starting"):
        running({}, "fake", Fake)
    with pytest.raises(kopf.TemporaryError):
        running({"fake": object()}, "fake", Fake)


def test_a_named_check_is_part_of_readyz_and_replaced_by_name() -> None:
    readiness = health.Readiness()
    readiness.started.set()
    readiness.api_problem = None
    health.set_check("fake-contract-test", Fake(ok=False).ready)
    try:
        assert readiness() == (False, "the fake's worker died")
        health.set_check("fake-contract-test", Fake().ready)
        assert readiness() == (True, "ok")
    finally:
        health._named.pop("fake-contract-test", None)


@pytest.mark.parametrize("kind", [MachinesRuntime, HealthCheckRuntime, WatchedLoop, Fake])
def test_every_capability_runtime_has_the_contracts_methods(kind: type) -> None:
    for method in ("start", "stop", "ready"):
        assert callable(getattr(kind, method, None)), (kind, method)
    runtime: type[Runtime] = kind
    assert runtime is kind
