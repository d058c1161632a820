"""A watch whose connection goes silent is given up in about a minute, not after 330 s.

client-go notices a half-open connection through HTTP/2 health pings (apimachinery
pkg/util/net/http.go: a ping after 30 s without a frame, dropped 15 s later); berthmaster's
HTTP/1.1 watches ask for bookmarks, which the API server's watch cache sends every watcher
about every minute (apiserver pkg/storage/cacher/cacher.go, defaultBookmarkFrequency), so a
stream silent past ``WATCH_IDLE_TIMEOUT`` is dead (berthmaster/foundation/kube.py). Here a local
HTTP
server plays a watch that sends one bookmark and then nothing, as a peer gone without a FIN.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from kubernetes_asyncio import client as k8s_client

from berthmaster.foundation.kube import WATCH_IDLE_TIMEOUT, KubeClient, KubeError


@pytest.fixture
async def silent_watch() -> AsyncIterator[tuple[str, dict[str, str]]]:
    seen: dict[str, str] = {}
    gone = asyncio.Event()

    async def watch(request: web.Request) -> web.StreamResponse:
        seen.update(request.query)
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"type":"BOOKMARK","object":{"metadata":'
                             b'{"resourceVersion":"7"}}}\n')
        await gone.wait()  # the peer is gone; nothing more arrives (until the test ends)
        return response

    app = web.Application()
    app.router.add_get("/api/v1/pods", watch)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        gone.set()
        await runner.cleanup()


def test_the_idle_timeout_is_about_a_minute() -> None:
    assert 60 < WATCH_IDLE_TIMEOUT <= 75


async def test_a_silent_stream_ends_in_a_connection_error(
        silent_watch: tuple[str, dict[str, str]]) -> None:
    host, seen = silent_watch
    configuration = k8s_client.Configuration()
    configuration.host = host
    kube = KubeClient(k8s_client.ApiClient(configuration))
    events = []
    try:
        with pytest.raises(KubeError) as raised:
            async with asyncio.timeout(30):  # a guard: the read timeout ends it long before
                async for event in kube.watch("/api/v1/pods", "1", timeout_seconds=450,
                                              idle_timeout=0.5):
                    events.append(event)
    finally:
        await kube.close()
    assert raised.value.status == 0 and raised.value.transient
    assert [e["type"] for e in events] == ["BOOKMARK"]
    assert seen["timeoutSeconds"] == "450" and seen["allowWatchBookmarks"] == "true"
