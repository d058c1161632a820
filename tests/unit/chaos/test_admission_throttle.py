"""The pure parts of the admission-kill and apf-throttle faults: the round-robin proxy's order,
the webhook's configurations and mark, and the throttling judgement from the API server's
APF metrics (names and labels of k8s.io/apiserver/pkg/util/flowcontrol/metrics/metrics.go,
v0.35.4)."""

from __future__ import annotations

import asyncio

from berthmaster.foundation.kube import KubeError
from berthmaster.tooling.chaos import admissionchaos, throttle
from berthmaster.tooling.chaos.rrproxy import RoundRobinProxy, rotation
from berthmaster.tooling.chaos.workload import WORK


def test_rotation_starts_at_the_next_backend_in_turn_and_fails_over_to_the_others() -> None:
    assert [rotation(2, turn)[0] for turn in range(5)] == [0, 1, 0, 1, 0]
    assert rotation(3, 4) == [1, 2, 0]
    assert rotation(0, 3) == []


def test_configurations_are_ignore_and_scoped_to_the_workload_namespace() -> None:
    mutating, validating = admissionchaos.configurations("https://127.0.0.1:1", "CA", "ns")
    for configuration in (mutating, validating):
        (webhook,) = configuration["webhooks"]
        assert webhook["failurePolicy"] == "Ignore"
        assert webhook["namespaceSelector"] == {
            "matchLabels": {"kubernetes.io/metadata.name": WORK}}
    assert mutating["webhooks"][0]["clientConfig"]["url"] == "https://127.0.0.1:1/mutate"


def test_marked_needs_the_whole_default_toleration() -> None:
    assert admissionchaos.marked({"spec": {"tolerations": [dict(admissionchaos.MARK)]}})
    partial = {**admissionchaos.MARK, "effect": "NoExecute"}
    assert not admissionchaos.marked({"spec": {"tolerations": [partial]}})
    assert not admissionchaos.marked({"spec": {}})


def test_created_after_reads_the_creation_timestamp() -> None:
    pod = {"metadata": {"creationTimestamp": "2026-01-01T00:00:10Z"}}
    assert admissionchaos.created_after(pod, 1767225609.0)
    assert not admissionchaos.created_after(pod, 1767225610.0)
    assert not admissionchaos.created_after({"metadata": {}}, 0.0)


def test_webhook_refusal_is_told_by_the_message() -> None:
    denied = KubeError(403, "Forbidden", 'admission webhook "pod-placement.berthmaster.io" '
                                         "denied the request: no")
    assert admissionchaos.webhook_refusal(denied)
    assert not admissionchaos.webhook_refusal(KubeError(409, "AlreadyExists", "exists"))


REJECTED = "apiserver_flowcontrol_rejected_requests_total"
DISPATCHED = "apiserver_flowcontrol_dispatched_requests_total"
OURS = 'flow_schema="chaos-throttle",priority_level="chaos-throttle"'
EXPOSITION = "\n".join([
    f"# TYPE {REJECTED} counter",
    REJECTED + "{" + OURS + ',reason="concurrency-limit"} {rejected}',
    REJECTED + '{flow_schema="global-default",priority_level="global-default",'
    'reason="concurrency-limit"} 7',
    DISPATCHED + "{" + OURS + "} {dispatched}", ""])


def exposition(rejected: int, dispatched: int) -> str:
    return EXPOSITION.replace("{rejected}", str(rejected)).replace(
        "{dispatched}", str(dispatched))


def test_metric_sum_takes_only_the_priority_level_asked() -> None:
    text = exposition(3, 5)
    assert throttle.metric_sum(text, throttle.REJECTED, "chaos-throttle") == 3
    assert throttle.metric_sum(text, throttle.REJECTED, "global-default") == 7
    assert throttle.metric_sum(text, throttle.REJECTED, "workload-low") == 0


def test_fired_only_when_the_rejected_counter_rose() -> None:
    rose = throttle.judge(exposition(0, 10), exposition(4, 30), "chaos-throttle", 4)
    assert rose.fired and "4 requests rejected" in rose.what
    # a level that appears only after the fault (a fresh counter) counts from zero
    assert throttle.judge("", exposition(2, 3), "chaos-throttle", 0).fired


def test_not_fired_says_whether_the_level_was_reached() -> None:
    unmatched = throttle.judge(exposition(1, 10), exposition(1, 10), "chaos-throttle", 0)
    assert not unmatched.fired and "FlowSchema not matched" in unmatched.what
    idle = throttle.judge(exposition(1, 10), exposition(1, 25), "chaos-throttle", 0)
    assert not idle.fired and "dispatched 15 requests and rejected none" in idle.what


def test_the_flow_schema_matches_the_user_below_exempt_and_probes() -> None:
    schema = throttle.flow_schema("chaos-a-1")
    assert schema["spec"]["matchingPrecedence"] > 2
    assert schema["spec"]["rules"][0]["subjects"] == [
        {"kind": "User", "user": {"name": "chaos-a-1"}}]
    level = throttle.priority_level()["spec"]["limited"]
    assert level["limitResponse"] == {"type": "Reject"} and level["borrowingLimitPercent"] == 0


async def test_the_proxy_takes_turns_and_skips_a_backend_that_refuses() -> None:
    """Two echo servers that answer with their name; the second is closed: every connection
    through the proxy reaches the first, and the refusals are counted on the second."""
    async def serve(name: bytes) -> asyncio.Server:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(10)
            writer.write(name)
            await writer.drain()
            writer.close()
        return await asyncio.start_server(answer, "127.0.0.1", 0)

    first, second = await serve(b"one"), await serve(b"two")
    ports = [int(s.sockets[0].getsockname()[1]) for s in (first, second)]
    proxy = RoundRobinProxy([("127.0.0.1", port) for port in ports])
    port = await proxy.start()

    async def ask() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"hello")
        await writer.drain()
        answer = await reader.read(10)
        writer.close()
        return answer

    try:
        assert [await ask() for _ in range(2)] == [b"one", b"two"]
        second.close()
        await second.wait_closed()
        assert [await ask() for _ in range(2)] == [b"one", b"one"]
        assert proxy.served == {0: 3, 1: 1} and proxy.refused == {1: 1}
    finally:
        await proxy.close()
        first.close()


def test_with_apf_turns_priority_and_fairness_on_once() -> None:
    command = ["kube-apiserver", "--enable-priority-and-fairness=false", "--profiling=false"]
    assert throttle.with_apf(command) == ["kube-apiserver", "--profiling=false",
                                          "--enable-priority-and-fairness=true"]
    assert throttle.with_apf(throttle.with_apf(command)) == throttle.with_apf(command)
