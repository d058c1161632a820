"""What one request may cost the webhook, on the real API server and by direct POSTs.

- A pod with 5,000 tolerations is refused at once with a sentence naming the limit
  (``--max-tolerations``), while other pods keep being admitted and mutated; one at the limit
  is merged (the linear MergeTolerations of pkg/util/tolerations/tolerations.go's semantics).
  Before, the quadratic merge ran on the event loop for minutes and every other admission
  timed out behind it.
- An 8 MiB POST (over the 7 MiB default) is answered without the webhook reading it: an
  AdmissionReview is denied in-band with 413 for its uid, anything else gets HTTP 413; a chunked
  body is cut at the limit. Before, the whole body was read before anything was decided.
- A pod as large as the API server accepts (a 3 MiB body) is admitted, and an update of it
  (a review of two such objects) too: under failurePolicy Fail a lower limit refused it.
  A pod whose review the API server makes larger than the limit is refused with the reason.
- With every slot taken (``--max-in-flight 2``, two requests whose bodies never finish), one
  more request is answered 429 at once, and the API server applies the failurePolicy (Fail:
  the pod is refused naming the webhook) instead of waiting for its timeout; once the slots
  free, pods are admitted again. Before, requests queued without bound.
- With 5 MiB of an 8 MiB budget of bodies held (``--max-in-flight-bytes 8Mi``, one review whose
  body never finishes), a second large review is answered 429 at once, before its body is
  read (by its Content-Length; a chunked one when its chunks pass the budget), and a pod as
  large as the API server takes is refused under failurePolicy Fail naming the flag, while a
  small pod is admitted; once the bytes free, the large pod is admitted. Before, 32 reviews of
  7 MiB could be read at once, more than the chart's 256Mi memory limit.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from typing import Any

import aiohttp
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.tooling.chaos.bigpod import as_large_as, body_size
from berthmaster.tooling.devcluster.cluster import APISERVER_MAX_REQUEST_BODY_BYTES
from tests.integration.admission.conftest import (
    AdmissionProcess,
    create_pod,
    free_port,
    pod_body,
)
from tests.support.waiting import wait_for

METRICS_PORT = free_port()
ADMISSION_ARGS = ("--max-in-flight", "2", "--max-in-flight-bytes", "8Mi",
                  "--metrics-bind-address", f"127.0.0.1:{METRICS_PORT}")
ANNOTATION = {"scheduler.alpha.kubernetes.io/node-selector": "env=test"}
MiB = 1024 * 1024


def tolerations(count: int) -> list[dict[str, Any]]:
    return [{"key": f"example.com/t{i}", "operator": "Equal", "value": "v",
             "effect": "NoSchedule"} for i in range(count)]


async def test_many_tolerations_are_refused_while_others_are_admitted(
        admission: AdmissionProcess, kube: KubeClient, project: Any) -> None:
    namespace = await project(ANNOTATION)

    async def heavy() -> KubeError:
        with pytest.raises(KubeError) as caught:
            await create_pod(kube, namespace, pod_body("heavy", tolerations=tolerations(5000)))
        return caught.value

    async def ordinary() -> list[dict[str, Any]]:
        return [(await create_pod(kube, namespace, pod_body(f"p{i}")))["spec"]
                for i in range(10)]

    refused, admitted = await asyncio.gather(heavy(), ordinary())
    assert refused.status == 422, refused.message
    # 5,002: the API server's DefaultTolerationSeconds added not-ready and unreachable first.
    assert ('admission webhook "pod-placement.berthmaster.io" denied the request: pods "heavy" '
            "is forbidden: spec.tolerations has 5002 entries, more than the 1000 berthmaster "
            "placement admission accepts (berthmaster admission --max-tolerations") in (
        refused.message)
    assert [spec.get("nodeSelector") for spec in admitted] == [{"env": "test"}] * 10

    # 998 + DefaultTolerationSeconds' two = the limit; not BestEffort, so the merge adds
    # memory-pressure (PodTolerationRestriction's Admit).
    burstable = [{"name": "app", "image": "registry.example/app:1",
                  "resources": {"requests": {"cpu": "10m"}}}]
    at_limit = await create_pod(kube, namespace, pod_body("at-limit", containers=burstable,
                                                          tolerations=tolerations(998)))
    merged = at_limit["spec"]["tolerations"]
    assert merged[:998] == tolerations(998)
    assert {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists",
            "effect": "NoSchedule"} in merged[998:]


async def ca_of(kube: KubeClient, admission: AdmissionProcess) -> str:
    secret = await kube.get(resource_path(CORE, "secrets", admission.namespace,
                                          f"{admission.name}-tls"))
    return base64.b64decode(secret["data"]["ca.crt"]).decode()


class Connection:
    """One raw HTTPS connection to the webhook: a request written piece by piece."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int, ca: str) -> Connection:
        context = ssl.create_default_context(cadata=ca)
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                       server_hostname="127.0.0.1")
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def answer(self) -> tuple[int, bytes]:
        """The status and body of the response (Content-Length framed)."""
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 60)
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        length = next(int(line.split(":", 1)[1]) for line in lines
                      if line.lower().startswith("content-length:"))
        return status, await self.reader.readexactly(length)

    async def close(self) -> None:
        """Close; the server may have closed first (after refusing a body it did not read)."""
        with contextlib.suppress(OSError, ssl.SSLError):
            self.writer.close()
            await self.writer.wait_closed()


def post_head(path: str, length: int | None) -> bytes:
    framing = (f"Content-Length: {length}" if length is not None
               else "Transfer-Encoding: chunked")
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"{framing}\r\n\r\n").encode()


REVIEW_START = (b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1",'
                b'"request":{"uid":"0d6a3c2e-big","kind":{"group":"","version":"v1",'
                b'"kind":"Pod"},"object":{"metadata":{"annotations":{"pad":"')


async def test_an_8_mib_post_is_refused_unread(admission: AdmissionProcess,
                                                kube: KubeClient) -> None:
    ca = await ca_of(kube, admission)
    review = await Connection.open(admission.port, ca)
    try:
        # 64 KiB of an 8 MiB AdmissionReview: the answer comes without the rest.
        await review.send(post_head("/mutate", 8 * MiB) + REVIEW_START + b"x" * 64 * 1024)
        status, body = await review.answer()
    finally:
        await review.close()
    assert status == 200
    response = orjson.loads(body)["response"]
    assert (response["uid"], response["allowed"], response["status"]["code"]) == (
        "0d6a3c2e-big", False, 413)
    assert ("the admission review is 8388608 bytes, over the 7340032-byte limit of "
            "berthmaster placement admission (berthmaster admission --max-request-bytes") in (
        response["status"]["message"])

    other = await Connection.open(admission.port, ca)
    try:
        await other.send(post_head("/validate", 8 * MiB) + b"y" * 64 * 1024)
        status, body = await other.answer()
    finally:
        await other.close()
    assert status == 413
    assert orjson.loads(body)["reason"] == "RequestEntityTooLarge"

    chunked = await Connection.open(admission.port, ca)
    try:
        await chunked.send(post_head("/mutate", None))
        # 7 MiB and 64 KiB, no final chunk: the reading stops past 7 MiB.
        for chunk in [b"z" * MiB] * 7 + [b"z" * 64 * 1024]:
            await chunked.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        status, body = await chunked.answer()
    finally:
        await chunked.close()
    assert status == 413 and b"over the 7340032-byte limit" in body


async def requests_total(outcome: str) -> float:
    """berthmaster_admission_requests_total for ``outcome``, over every path."""
    families = text_string_to_metric_families(await metrics_text())
    return sum(sample.value for family in families for sample in family.samples
               if sample.name == "berthmaster_admission_requests_total"
               and sample.labels["outcome"] == outcome)


async def test_a_pod_as_large_as_the_api_server_takes_is_admitted_and_updated(
        admission: AdmissionProcess, kube: KubeClient, project: Any) -> None:
    """A pod whose request body is exactly kube-apiserver's limit (MaxRequestBodyBytes, 3 MiB:
    k8s.io/apiserver pkg/server/config.go; berthmaster/tooling/chaos/bigpod.py makes it storable) is
    created in a namespace the webhook covers with failurePolicy Fail, then updated. Its
    create review is the object again and the request's fields, more than 3 MiB; its update
    review carries the object and the old object, more than 6 MiB. Both are within the default
    7 MiB, two such objects and 1 MiB as sigs.k8s.io/controller-runtime
    pkg/webhook/admission/http.go (maxRequestSize) allows; a 3 MiB default refused both."""
    namespace = await project(ANNOTATION)
    pod = as_large_as(pod_body("big"))
    assert body_size(pod) == APISERVER_MAX_REQUEST_BODY_BYTES
    allowed, too_large = await requests_total("allowed"), await requests_total("too_large")

    created = await create_pod(kube, namespace, pod, dry_run=False)
    assert created["spec"]["nodeSelector"] == {"env": "test"}  # merged by the webhook

    path = resource_path(CORE, "pods", namespace, "big")
    updated = await kube.patch(path, {"metadata": {"labels": {"tier": "large"}}})
    assert updated["metadata"]["labels"] == {"tier": "large"}
    assert updated["spec"]["containers"][0]["env"] == pod["spec"]["containers"][0]["env"]
    # Each of the two requests went through both webhooks, and none was too large.
    assert await requests_total("allowed") - allowed == 4
    assert await requests_total("too_large") == too_large


async def test_a_review_over_the_limit_is_refused_with_the_reason(
        admission: AdmissionProcess, kube: KubeClient, project: Any) -> None:
    """The review holds the object as kube-apiserver writes it: k8s.io/apimachinery
    pkg/runtime/extension.go marshals it with encoding/json, which escapes <, > and & as
    \\u003c (six bytes; Go's encoding/json encode.go). So a pod of 1.25 MiB of "<" (a request
    well under the API server's 3 MiB limit) makes a review over 7.5 MiB: the user reads why."""
    namespace = await project(ANNOTATION)
    pod = pod_body("angled")
    pod["spec"]["containers"][0]["env"] = [{"name": "MARKUP", "value": "<" * (5 * MiB // 4)}]
    assert body_size(pod) < 2 * MiB
    with pytest.raises(KubeError) as caught:
        await create_pod(kube, namespace, pod)
    assert caught.value.status == 413, caught.value.message
    assert ('admission webhook "pod-placement.berthmaster.io" denied the request: the admission '
            "review is ") in caught.value.message
    assert "over the 7340032-byte limit of berthmaster placement admission" in (
        caught.value.message)
    # The webhook answered and keeps answering.
    assert (await create_pod(kube, namespace, pod_body("small")))["spec"]["nodeSelector"] == {
        "env": "test"}


async def metrics_text() -> str:
    async with aiohttp.ClientSession() as session, session.get(
            f"http://127.0.0.1:{METRICS_PORT}/metrics") as response:
        return await response.text()


async def in_flight() -> float:
    return next(float(line.split()[1]) for line in (await metrics_text()).splitlines()
                if line.startswith("berthmaster_admission_in_flight "))


async def test_requests_beyond_the_slots_are_answered_at_once(
        admission: AdmissionProcess, kube: KubeClient, project: Any) -> None:
    namespace = await project(ANNOTATION)
    ca = await ca_of(kube, admission)
    held = [await Connection.open(admission.port, ca) for _ in range(2)]
    try:
        for connection in held:  # a body that never finishes keeps its slot
            await connection.send(post_head("/mutate", 1000) + b'{"kind"')
        await wait_for(lambda: _equals(in_flight(), 2.0), timeout=30,
                       what="both slots taken")
        extra = await Connection.open(admission.port, ca)
        try:
            body = orjson.dumps({"apiVersion": "admission.k8s.io/v1",
                                 "kind": "AdmissionReview", "request": {"uid": "u"}})
            await extra.send(post_head("/validate", len(body)) + body)
            status, answer = await extra.answer()
        finally:
            await extra.close()
        assert status == 429, answer
        assert b"is working on 2 reviews (--max-in-flight)" in answer

        with pytest.raises(KubeError) as caught:
            await create_pod(kube, namespace, pod_body("crowded"))
        assert 'failed calling webhook "pod-placement.berthmaster.io"' in caught.value.message
        assert "--max-in-flight" in caught.value.message
    finally:
        for connection in held:
            await connection.close()
    await wait_for(lambda: _equals(in_flight(), 0.0), timeout=30, what="the slots freed")
    pod = await create_pod(kube, namespace, pod_body("after"))
    assert pod["spec"]["nodeSelector"] == {"env": "test"}


async def test_large_reviews_over_the_bytes_budget_are_answered_at_once(
        admission: AdmissionProcess, kube: KubeClient, project: Any) -> None:
    namespace = await project(ANNOTATION)
    ca = await ca_of(kube, admission)
    over_budget = b"(--max-in-flight-bytes; chart value admission.maxInFlightBytes)"
    held = await Connection.open(admission.port, ca)
    try:  # 5 MiB reserved by its Content-Length; the body never finishes
        await held.send(post_head("/mutate", 5 * MiB) + REVIEW_START + b"x" * 64 * 1024)
        await wait_for(lambda: _equals(in_flight(), 1.0), timeout=30, what="the review held")
        large = await Connection.open(admission.port, ca)
        try:
            await large.send(post_head("/mutate", 5 * MiB) + REVIEW_START)
            status, answer = await large.answer()
        finally:
            await large.close()
        assert status == 429, answer
        assert b"is holding 5242880 of its 8388608 bytes of reviews " + over_budget in answer

        chunked = await Connection.open(admission.port, ca)
        try:  # 4 MiB in chunks: the reading stops once they pass the 3 MiB left
            await chunked.send(post_head("/mutate", None))
            for chunk in [REVIEW_START] + [b"z" * MiB] * 4:
                await chunked.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            status, answer = await chunked.answer()
        finally:
            await chunked.close()
        assert status == 429 and over_budget in answer

        small = await create_pod(kube, namespace, pod_body("small-in-budget"))
        assert small["spec"]["nodeSelector"] == {"env": "test"}
        with pytest.raises(KubeError) as caught:  # a create review of more than 3 MiB
            await create_pod(kube, namespace, as_large_as(pod_body("large-over-budget")))
        assert 'failed calling webhook "pod-placement.berthmaster.io"' in caught.value.message
        assert "--max-in-flight-bytes" in caught.value.message
    finally:
        await held.close()
    await wait_for(lambda: _equals(in_flight(), 0.0), timeout=30, what="the bytes freed")
    admitted = await create_pod(kube, namespace, as_large_as(pod_body("large-in-budget")))
    assert admitted["spec"]["nodeSelector"] == {"env": "test"}


async def _equals(value: Any, expected: float) -> bool:
    return bool(await value == expected)
