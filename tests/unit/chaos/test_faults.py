"""Fault outcomes: a fault that did nothing does not count as fired, and a kind that never
fired fails the run; the checks faults use to know they acted (a stopped process, a proxy that
delayed traffic)."""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
from typing import Any, cast

import pytest

from berthmaster.tooling.chaos import bigpod, faults
from berthmaster.tooling.chaos.faults import Outcome, fired, never_fired, not_fired, summary, tally
from berthmaster.tooling.chaos.slowproxy import SlowProxy

OUTCOMES = {
    "etcd-compaction": [fired("compacted at revision 10"), not_fired("revision 10 already "
                                                                     "compacted")],
    "node-not-ready": [not_fired("node w-1 was never seen NotReady"),
                       not_fired("node w-1 was never seen NotReady")],
    "operator-kill": [fired("operator killed during drain")],
}


def test_tally_counts_fired_and_not_fired_apart() -> None:
    assert tally(OUTCOMES) == ({"etcd-compaction": 1, "node-not-ready": 0, "operator-kill": 1},
                               {"etcd-compaction": 1, "node-not-ready": 2, "operator-kill": 0})


def test_never_fired_names_kinds_tried_in_vain_and_kinds_never_tried() -> None:
    scheduled = ["etcd-compaction", "node-not-ready", "operator-kill", "big-pod"]
    assert never_fired(OUTCOMES, scheduled) == {
        "node-not-ready": ["node w-1 was never seen NotReady"], "big-pod": ["never tried"]}
    assert never_fired(OUTCOMES, ["operator-kill"]) == {}


def test_summary_lines() -> None:
    assert summary(OUTCOMES) == [
        "etcd-compaction: fired 1, not fired 1 (revision 10 already compacted); "
        "e.g. compacted at revision 10",
        "node-not-ready: fired 0, not fired 2 (node w-1 was never seen NotReady)",
        "operator-kill: fired 1, not fired 0; e.g. operator killed during drain"]


class _Stage:
    """The part of a Stage ``inject`` touches."""

    def __init__(self) -> None:
        self.outcomes: dict[str, list[Outcome]] = {}
        self.fault_ended: list[float] = []


@pytest.mark.parametrize(("behaviour", "expected"), [
    ("fires", Outcome(True, "did it")),
    ("declines", Outcome(False, "nothing to do")),
    ("raises", Outcome(False, "failed: OSError: connection refused")),
])
def test_inject_records_the_outcome(monkeypatch: pytest.MonkeyPatch, behaviour: str,
                                    expected: Outcome) -> None:
    async def fault(stage: Any) -> Outcome:
        if behaviour == "raises":
            raise OSError("connection refused")
        return fired("did it") if behaviour == "fires" else not_fired("nothing to do")
    monkeypatch.setitem(faults.FAULTS, "test-fault", fault)
    stage = _Stage()
    assert asyncio.run(faults.inject(cast(faults.Stage, stage), "test-fault")) == expected
    assert stage.outcomes == {"test-fault": [expected]}
    assert len(stage.fault_ended) == 1
    counts = {k: v for k, v in tally(stage.outcomes)[0].items() if v}
    assert counts == ({"test-fault": 1} if expected.fired else {})


def test_process_state_sees_a_stopped_process_and_signal_pid_a_gone_one() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        # running, sleeping or (while exec loads it, on a busy machine) in disk sleep
        assert faults.process_state(child.pid) not in ("T", "?")
        assert faults.signal_pid(child.pid, signal.SIGSTOP)
        assert asyncio.run(faults.wait_until(
            lambda: faults.process_state(child.pid) == "T", 5))
        faults.signal_pid(child.pid, signal.SIGCONT)
    finally:
        child.kill()
        child.wait()
    assert faults.process_state(child.pid) == "?"
    assert not faults.signal_pid(child.pid, signal.SIGCONT)


def test_the_slow_proxy_passes_data_and_counts_what_it_delayed() -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
        writer.close()

    async def run() -> tuple[bytes, bytes, int, int]:
        upstream = await asyncio.start_server(echo, "127.0.0.1", 0)
        proxy = SlowProxy("127.0.0.1", upstream.sockets[0].getsockname()[1])
        port = await proxy.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"fast")
        fast = await reader.readexactly(4)
        quiet = proxy.delayed
        proxy.delay = 0.05
        writer.write(b"slow")
        slow = await reader.readexactly(4)
        writer.close()
        await proxy.close()
        upstream.close()
        return fast, slow, quiet, proxy.delayed
    fast, slow, quiet, delayed = asyncio.run(run())
    assert (fast, slow, quiet, delayed) == (b"fast", b"slow", 0, 2)  # both directions


def test_the_big_pod_is_the_api_servers_limit_to_the_byte_and_storable() -> None:
    """kube-apiserver takes a body of up to MaxRequestBodyBytes, 3 MiB (k8s.io/apiserver
    pkg/server/config.go; endpoints/handlers/rest.go limitedReadBody), and its etcd client
    sends at most 2 MiB (etcd client/v3 options.go defaultMaxCallSendMsgSize)."""
    pod = faults.big_pod("big-1", "chaos", faults.BIG_POD_BYTES)
    assert faults.BIG_POD_BYTES == 3 * 1024 * 1024
    assert bigpod.body_size(pod) == faults.BIG_POD_BYTES
    assert pod["spec"]["schedulerName"] == "chaos"
    stored = bigpod.stored_estimate(pod)
    assert 1_572_864 < stored < bigpod.ETCD_CLIENT_SEND_BYTES - 100_000  # over etcd's default


@pytest.mark.parametrize("size", [200_000, 1_000_001, 3 * 1024 * 1024 - 1])
def test_as_large_as_is_exact_for_any_size(size: int) -> None:
    pod = bigpod.as_large_as(faults.bare_pod("p", "plain", "chaos", random.Random(0)), size,
                             plain=100_000)
    assert bigpod.body_size(pod) == size


def test_as_large_as_refuses_a_size_below_its_plain_part() -> None:
    with pytest.raises(ValueError, match="pod p: 1000 bytes is less than"):
        bigpod.as_large_as(faults.bare_pod("p", "plain", "chaos", random.Random(0)), 1000)


def test_port_free_sees_a_listener_and_its_release() -> None:
    """A component restarted on its recorded port waits until no listener holds it (a restart
    on a taken port exits with ``bind: address already in use``)."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    endpoint = f"https://127.0.0.1:{listener.getsockname()[1]}"
    assert not faults.port_free(endpoint)
    listener.close()
    assert faults.port_free(endpoint)
