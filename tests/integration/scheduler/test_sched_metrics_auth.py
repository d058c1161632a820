"""The scheduler's secure endpoint: HTTPS, with every request authenticated by a TokenReview and
authorized by a SubjectAccessReview of the real API server, as kube-scheduler's secure port.

Upstream: k8s.io/kubernetes@v1.35.4 ``cmd/kube-scheduler/app/options/options.go`` (the secure
serving and delegated authentication/authorization options) and k8s.io/apiserver@v0.35.4
``pkg/server/options/authentication.go`` (anonymous requests allowed through authentication,
token answers cached ``CacheTTL``), ``authorization.go`` (``--authorization-always-allow-paths``
default ``/healthz,/readyz,/livez``; ``AllowCacheTTL``/``DenyCacheTTL``),
``pkg/endpoints/filters/authentication.go`` (401 ``Unauthorized``) and
``pkg/endpoints/handlers/responsewriters/errors.go`` (403 ``forbidden: User "..." cannot get
path "/metrics"``). A request without a token is ``system:anonymous``, which RBAC refuses
``/metrics``: 403, as kube-scheduler answers it; a token the API server rejects is 401.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from berthmaster.foundation.kube import CORE, KubeClient, group_path, resource_path
from berthmaster.foundation.serving import self_signed_certificate
from tests.integration.conftest import unique
from tests.integration.scheduler.conftest import SchedulerRunner
from tests.support.accounts import account_kubeconfig, granted
from tests.support.waiting import wait_for

METRICS_READER = [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
AUTHORIZATION = group_path("authorization.k8s.io", "v1")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def fetch(url: str, token: str | None = None,
                verify: ssl.SSLContext | bool = False) -> tuple[int, str, str]:
    """GET over HTTPS (the certificate unchecked unless ``verify`` says how): status, body and
    Content-Type; (0, "", "") while nothing answers."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    try:
        async with aiohttp.ClientSession() as session, session.get(
                url, headers=headers, ssl=verify) as answer:
            return answer.status, await answer.text(), answer.content_type
    except aiohttp.ClientConnectionError:
        return 0, "", ""


async def account_token(kube: KubeClient, namespace: str, name: str) -> str:
    """A new ServiceAccount and a token of it (TokenRequest API)."""
    await kube.create(resource_path(CORE, "serviceaccounts", namespace),
                      {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    issued = await kube.create(resource_path(CORE, "serviceaccounts", namespace, name, "token"),
                               {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                "spec": {"expirationSeconds": 3600}})
    return str(issued["status"]["token"])


async def secure_scheduler(run_scheduler: SchedulerRunner, **overrides: Any) -> str:
    """Start a scheduler serving only HTTPS; its base URL once it answers."""
    port = free_port()
    await run_scheduler.start(secure_port=port, bind_address="127.0.0.1", **overrides)
    base = f"https://127.0.0.1:{port}"

    async def answering() -> bool:
        return (await fetch(f"{base}/healthz"))[0] != 0

    await wait_for(answering, timeout=30, what="the secure endpoint")
    return base


async def rbac_allows(kube: KubeClient, user: str) -> bool:
    """The API server's own answer (no cache of ours): may ``user`` get /metrics?"""
    review = await kube.create(resource_path(AUTHORIZATION, "subjectaccessreviews"), {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:serviceaccounts", "system:authenticated"],
                 "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}})
    return bool(review["status"].get("allowed"))


async def test_metrics_need_a_token_the_api_server_accepts_and_rbac_for_the_path(
    kube: KubeClient, run_scheduler: SchedulerRunner, namespace: str
) -> None:
    base = await secure_scheduler(run_scheduler)
    reader = await account_token(kube, namespace, "reader")
    bare = await account_token(kube, namespace, "bare")

    status, body, kind = await fetch(f"{base}/metrics")
    assert (status, kind) == (403, "application/json")
    assert json.loads(body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'forbidden: User "system:anonymous" cannot get path "/metrics"',
        "reason": "Forbidden", "details": {}, "code": 403}

    status, body, _ = await fetch(f"{base}/metrics", token="not-a-token")
    assert status == 401
    assert json.loads(body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Unauthorized", "reason": "Unauthorized", "code": 401}

    status, body, _ = await fetch(f"{base}/metrics", token=bare)
    assert status == 403
    assert json.loads(body)["message"] == (
        f'forbidden: User "system:serviceaccount:{namespace}:bare" cannot get path "/metrics"')

    async with granted(kube, namespace, "reader", METRICS_READER):
        async def scraped() -> str | None:
            status, body, _ = await fetch(f"{base}/metrics", token=reader)
            return body if status == 200 else None

        body = await wait_for(scraped, timeout=30, what="/metrics with the reader's token")
        assert "scheduler_pending_pods" in body and "process_cpu_seconds_total" in body


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
async def test_probes_answer_without_a_token_but_not_with_a_bad_one(
    kube: KubeClient, run_scheduler: SchedulerRunner, path: str
) -> None:
    base = await secure_scheduler(run_scheduler)

    async def probe_ok() -> bool:
        status, body, _ = await fetch(f"{base}{path}")
        return status == 200 and body == "ok"

    await wait_for(probe_ok, timeout=30, what=f"{path} 200 without a token")
    # authentication comes before authorization, on every path (kube's filter order)
    assert (await fetch(f"{base}{path}", token="not-a-token"))[0] == 401


async def test_a_refusal_is_cached_for_the_unauthorized_ttl(
    kube: KubeClient, run_scheduler: SchedulerRunner, namespace: str
) -> None:
    """A long unauthorized TTL keeps a 403 after RBAC allows the account; a zero one does not
    (authorizer/delegating.go's DenyCacheTTL)."""
    keeping = await secure_scheduler(run_scheduler,
                                     authorization_webhook_cache_unauthorized_ttl=3600.0)
    fresh = await secure_scheduler(run_scheduler,
                                   authorization_webhook_cache_unauthorized_ttl=0.0)
    name = unique("late")
    token = await account_token(kube, namespace, name)
    for base in (keeping, fresh):
        assert (await fetch(f"{base}/metrics", token=token))[0] == 403
    async with granted(kube, namespace, name, METRICS_READER):
        user = f"system:serviceaccount:{namespace}:{name}"
        await wait_for(lambda: rbac_allows(kube, user), timeout=30, what="RBAC allows the grant")

        async def fresh_allows() -> bool:
            return (await fetch(f"{fresh}/metrics", token=token))[0] == 200

        await wait_for(fresh_allows, timeout=30, what="the uncached scheduler allows it")
        assert (await fetch(f"{keeping}/metrics", token=token))[0] == 403


async def test_the_flags_certificate_is_served(
    run_scheduler: SchedulerRunner, tmp_path: Path
) -> None:
    chain, key = self_signed_certificate("metrics.example")
    (tmp_path / "tls.crt").write_bytes(chain)
    (tmp_path / "tls.key").write_bytes(key)
    base = await secure_scheduler(run_scheduler, tls_cert_file=str(tmp_path / "tls.crt"),
                                  tls_private_key_file=str(tmp_path / "tls.key"))
    trusting = ssl.create_default_context(cadata=chain.decode())
    # verified against the given certificate's CA, by IP (127.0.0.1 is in its names)
    assert (await fetch(f"{base}/healthz", verify=trusting))[0] == 200
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        async with aiohttp.ClientSession() as session:
            await session.get(f"{base}/healthz", ssl=ssl.create_default_context())


async def test_a_token_answer_is_cached_for_the_token_ttl(
    kube: KubeClient, run_scheduler: SchedulerRunner, namespace: str
) -> None:
    """A long token TTL keeps accepting a token whose ServiceAccount is gone; a zero one asks
    the API server again and answers 401 (authenticatorfactory/delegating.go's CacheTTL)."""
    keeping = await secure_scheduler(run_scheduler,
                                     authentication_token_webhook_cache_ttl=3600.0)
    fresh = await secure_scheduler(run_scheduler, authentication_token_webhook_cache_ttl=0.0)
    name = unique("gone")
    token = await account_token(kube, namespace, name)
    async with granted(kube, namespace, name, METRICS_READER):
        for base in (keeping, fresh):
            async def scraped(base: str = base) -> bool:
                return (await fetch(f"{base}/metrics", token=token))[0] == 200

            await wait_for(scraped, timeout=30, what=f"{base}/metrics with the token")
        await kube.delete(resource_path(CORE, "serviceaccounts", namespace, name))

        async def rejected() -> bool:
            return (await fetch(f"{fresh}/metrics", token=token))[0] == 401

        await wait_for(rejected, timeout=30, what="the deleted account's token rejected")
        assert (await fetch(f"{keeping}/metrics", token=token))[0] == 200


async def test_reviews_go_to_the_kubeconfig_flags_and_failures_are_not_answers(
    kube: KubeClient, cluster: Any, run_scheduler: SchedulerRunner, namespace: str,
    tmp_path: Path
) -> None:
    """--authentication-kubeconfig/--authorization-kubeconfig name the reviews' credentials;
    an account that may not create reviews makes every review fail: a token is then 401, an
    authorization 500 (endpoints/filters/authorization.go answers InternalError on an
    authorizer error), and the always-allowed paths still answer."""
    bare = await account_kubeconfig(kube, cluster, namespace, tmp_path, "no-reviews")
    base = await secure_scheduler(run_scheduler, authentication_kubeconfig=str(bare),
                                  authorization_kubeconfig=str(bare))
    assert (await fetch(f"{base}/healthz"))[:2] == (200, "ok")
    status, body, _ = await fetch(f"{base}/metrics")
    assert status == 500
    assert body.startswith('Internal Server Error: "/metrics": SubjectAccessReview failed: ')
    assert "subjectaccessreviews" in body
    token = await account_token(kube, namespace, "valid")
    assert (await fetch(f"{base}/metrics", token=token))[0] == 401


async def token_reviews(kube: KubeClient) -> float:
    """TokenReviews the API server has answered (its apiserver_request_total)."""
    text = await kube.request("GET", "/metrics", content_type="text/plain")
    body = text.get("message", "") if isinstance(text, dict) else ""
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
               if line.startswith("apiserver_request_total{")
               and 'resource="tokenreviews"' in line)


async def test_concurrent_requests_with_one_token_share_one_review(
    kube: KubeClient, run_scheduler: SchedulerRunner, namespace: str
) -> None:
    """The cached token authenticator's singleflight: requests that arrive while a token is
    being reviewed wait for that review; later ones find its answer cached."""
    base = await secure_scheduler(run_scheduler)
    token = await account_token(kube, namespace, unique("burst"))
    before = await token_reviews(kube)
    answers = await asyncio.gather(*(fetch(f"{base}/healthz", token=token) for _ in range(16)))
    assert {status for status, _, _ in answers} == {200}
    assert await token_reviews(kube) - before == 1
