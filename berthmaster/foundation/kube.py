"""The one place that talks HTTP to the Kubernetes API server.

Design: ``kubernetes_asyncio`` supplies what is hard to get right — kubeconfig and in-cluster
loading, TLS contexts with client certificates, bearer tokens and their refresh hooks — and its
aiohttp connector (imported without its generated API and model modules, which nothing here
reads: ``lean_client``). Requests and watches go through an aiohttp session as raw JSON: objects are
plain ``dict``\\ s decoded by orjson (several times faster than the standard library's decoder,
which was a fifth of the scheduler's CPU), never generated models, so the watch and bind hot
paths pay for no model deserialisation. Every component (scheduler, operator, descheduler,
tests, the demo) makes its own requests through :class:`KubeClient`. The one other client is
kopf's: the operator's framework watches the custom resources, patches its own progress and
posts its events with its own aiohttp session, logged in through kubernetes_asyncio from the
same kubeconfig (or in-cluster account).

The session kubernetes_asyncio builds trusts the environment, which makes aiohttp look up
``.netrc`` and the proxy variables in a worker thread on every request — two thread hops per
bind. :class:`KubeClient` therefore sends through its own session on the same connector (same
TLS context and pool) with the proxy resolved once, when the client is made; client-go likewise
reads ``HTTPS_PROXY``/``NO_PROXY`` and never ``.netrc``.

Rate limiting is a token bucket (``qps``/``burst``), as client-go's (``util/flowcontrol``
``NewTokenBucketRateLimiter`` over ``golang.org/x/time/rate``: ``burst`` tokens at start, refilled
at ``qps`` a second, each request waits its turn), so a component can be benchmarked at
kube-scheduler's default client limits or with them lifted.

Fencing: a write that acts for a leader (a binding, a preemption's victim delete, a nomination)
passes ``fence``, a callable asked *after* the rate limiter's wait, immediately before the
request is sent; when it answers False the request is not sent and :class:`Fenced` is raised.
A check made before the wait would let a replica deposed while it waited for a token write
anyway (client-go's leader-elected components stop before acting, cmd/kube-scheduler/app/
server.go exits on ``OnStoppedLeading``; in one process we check at the last moment instead).

Watches: each Informer asks for ``timeoutSeconds`` drawn in [5 min, 10 min) as client-go's
reflector does (tools/cache/reflector.go: ``minWatchTimeout`` 5 min, ``timeoutSeconds =
minWatchTimeout * (rand + 1)``), so the watches of many clients do not all end together; and the
stream has a client-side read timeout, :data:`WATCH_IDLE_TIMEOUT`. client-go notices a half-open
connection through HTTP/2 health pings (apimachinery pkg/util/net/http.go: a ping after 30 s
without a frame, the connection dropped 15 s later: about 45 s). Over HTTP/1.1 there is no
ping, but watches ask for bookmarks and the API server's watch cache sends every such watcher
one about every minute (apiserver pkg/storage/cacher/cacher.go ``defaultBookmarkFrequency``,
cache_watcher.go ``nextBookmarkTime``): a stream silent for 70 s (kopf's
``settings.watching.inactivity_timeout``, the operator's other client) is dead, and is
re-opened from the last resourceVersion seen (no relist).

Watch streams are split into lines here (:class:`LineSplitter`), not by aiohttp's line
iterator: that one raises ``LineTooLong`` past its read buffer's high-water mark (512 KiB with
aiohttp 3.14), while one watch line carries a whole object and the API server accepts requests
of up to 3 MiB (what it stores is bounded by etcd: 1.5 MiB by default). The splitter buffers a
partial line across chunks, as kopf's ``_iter_lines`` (kopf/_cogs/clients/api.py) does, and
refuses only a line over :data:`MAX_LINE_BYTES`, client-go's bound for one decoded watch frame
(apimachinery's ``pkg/runtime/serializer/streaming/streaming.go``: ``maxBytes``,
``ErrObjectTooLarge``).

Every request says who sends it: a ``User-Agent`` in client-go's shape (``rest/config.go``:
``DefaultKubernetesUserAgent``, ``<command>/<version> (<os>/<arch>) kubernetes/<commit>``),
e.g. ``berthmaster-scheduler/0.1.0 (linux/amd64) berthmaster-scheduler-7f9c-x2x4q``: the
replica (``$POD_NAME``, else the host name) stands where client-go puts its build commit, so
the API server's audit log tells two replicas of one component apart; a component's second
client has a suffix (``.../leader-election``, as ``rest.AddUserAgent``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import random
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import orjson
import yarl
from aiohttp.helpers import get_env_proxy_for_url

from berthmaster import __version__
from berthmaster.foundation import lean_client
from berthmaster.foundation.errors import ConfigurationError, ConnectivityError

lean_client.load()  # before kubernetes_asyncio's first import: see lean_client

from kubernetes_asyncio import client as k8s_client  # noqa: E402
from kubernetes_asyncio import config as k8s_config  # noqa: E402

_log = logging.getLogger("berthmaster.foundation.kube")

# GETs of /version before an unreachable API server is reported: 0.5+1+2 s of waiting.
CONNECT_ATTEMPTS = 4

JSON = dict[str, Any]

# The longest watch line accepted: client-go's streaming decoder stops at 16 MiB per object
# (apimachinery pkg/runtime/serializer/streaming/streaming.go, maxBytes), far above the API
# server's 3 MiB request limit. Reads of the stream are at most WATCH_CHUNK_BYTES at a time
# (kopf's _iter_lines chunk size).
MAX_LINE_BYTES = 16 * 1024 * 1024
WATCH_CHUNK_BYTES = 1024 * 1024

# kube-controller-manager's client rate (pkg/controller/apis/config/v1alpha1/defaults.go):
# the operator's defaults for --kube-api-qps / --kube-api-burst.
CONTROLLER_MANAGER_QPS = 20.0
CONTROLLER_MANAGER_BURST = 30

# client-go's reflector: watch requests time out server-side after a random duration in
# [MIN_WATCH_TIMEOUT, 2 * MIN_WATCH_TIMEOUT) (tools/cache/reflector.go, defaultMinWatchTimeout).
MIN_WATCH_TIMEOUT = 5 * 60
# A watch stream with no line (object or bookmark) for this long is dead (module docstring).
WATCH_IDLE_TIMEOUT = 70.0


def watch_timeout_seconds(minimum: float = MIN_WATCH_TIMEOUT,
                          rng: Callable[[], float] = random.random) -> int:
    """A watch request's ``timeoutSeconds``, as the reflector draws it."""
    return int(minimum * (rng() + 1.0))


# API group/version paths for the kinds the project touches, so callers say what, not where.
CORE = "/api/v1"


def group_path(group: str, version: str) -> str:
    return CORE if group in ("", "core") and version == "v1" else f"/apis/{group}/{version}"


def resource_path(
    api: str, plural: str, namespace: str | None = None, name: str | None = None, sub: str = ""
) -> str:
    """``/api/v1/namespaces/ns/pods/name/binding`` from its parts (``api`` from group_path)."""
    path = api
    if namespace is not None:
        path += f"/namespaces/{quote(namespace, safe='')}"
    path += f"/{plural}"
    if name is not None:
        path += f"/{quote(name, safe='')}"
    if sub:
        path += f"/{sub}"
    return path


class KubeError(Exception):
    """A request the API server answered with an error status (or could not answer)."""

    def __init__(self, status: int, reason: str, message: str, body: JSON | None = None):
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410

    @property
    def too_many_requests(self) -> bool:
        return self.status == 429

    @property
    def fenced(self) -> bool:
        return False

    @property
    def transient(self) -> bool:
        """Whether trying again may succeed with nothing changed: no answer (status 0), a
        timeout, a conflict (re-read and retry), too many requests, or a server error —
        client-go's ``retry.OnError``/``IsRetryableError`` cases. 400, 401, 403, 404, 422 and
        the like need something to change first."""
        return self.status in (0, 408, 409, 429) or self.status >= 500


class Fenced(KubeError):
    """A write not sent: its ``fence`` said this replica no longer leads (module docstring).

    Not transient: the replica must stop acting, not retry."""

    def __init__(self, method: str, path: str):
        super().__init__(0, "NotLeading", f"{method} {path} not sent: this replica no longer "
                         "leads")

    @property
    def fenced(self) -> bool:
        return True

    @property
    def transient(self) -> bool:
        return False


class TokenBucket:
    """client-go's flowcontrol token bucket: ``qps`` tokens a second, at most ``burst`` saved,
    the bucket full at start; a caller without a token waits until one has accrued, callers
    served in turn. ``clock`` and ``sleep`` are injectable (a fake clock in tests)."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self.qps = qps
        self.burst = max(1, burst)
        self.clock = clock
        self.sleep = sleep
        self._tokens = float(self.burst)
        self._stamp = clock()
        self._lock = asyncio.Lock()

    def delay(self) -> float:
        """Seconds until a token is free (0: one is), without taking it."""
        if self.qps <= 0:
            return 0.0
        tokens = min(self.burst, self._tokens + (self.clock() - self._stamp) * self.qps)
        return 0.0 if tokens >= 1 else (1 - tokens) / self.qps

    async def acquire(self) -> None:
        if self.qps <= 0:
            return
        async with self._lock:
            now = self.clock()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
            self._stamp = now
            if self._tokens < 1:
                await self.sleep((1 - self._tokens) / self.qps)
                self._stamp = self.clock()
                self._tokens = 0.0
            else:
                self._tokens -= 1


class WatchLineTooLong(ValueError):
    """A watch line longer than :data:`MAX_LINE_BYTES` (client-go's ``ErrObjectTooLarge``).

    A ``ValueError``, as a line that is not JSON: the stream cannot be trusted past it, and an
    informer starts over from a fresh list."""


class LineSplitter:
    """Splits a byte stream, fed in chunks of any size, into its ``\\n``-terminated lines.

    A line split across chunks is kept in a buffer until its end arrives; each chunk is searched
    once, so a line of many chunks costs linear time. Blank lines are dropped (the API server
    sends none; a watch line is never blank). :meth:`end` gives what is left after the last
    ``\\n`` once the stream has ended."""

    def __init__(self, max_line: int = MAX_LINE_BYTES):
        self.max_line = max_line
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        lines: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if self._partial:
                self._partial += memoryview(chunk)[start:end]
                line = bytes(self._partial)
                self._partial.clear()
            else:
                line = chunk[start:end]
            self._check(len(line))
            if line.strip():
                lines.append(line)
            start = end + 1
        if start < len(chunk):
            self._partial += memoryview(chunk)[start:]
            self._check(len(self._partial))
        return lines

    def end(self) -> bytes | None:
        """The last line when the stream did not end with ``\\n`` (``None`` if it did)."""
        line = bytes(self._partial)
        self._partial.clear()
        return line if line.strip() else None

    def _check(self, length: int) -> None:
        if length > self.max_line:
            self._partial.clear()
            raise WatchLineTooLong(f"a watch line is longer than {self.max_line} bytes")


def split_lines(chunks: Iterable[bytes], max_line: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """The lines of a stream given as ``chunks`` (see :class:`LineSplitter`)."""
    splitter = LineSplitter(max_line)
    for chunk in chunks:
        yield from splitter.feed(chunk)
    last = splitter.end()
    if last is not None:
        yield last


def replica_name() -> str:
    """This replica: the Pod's name (``$POD_NAME``, the chart's Downward API variable), else
    the host name (a Pod's host name is its name too)."""
    return os.environ.get("POD_NAME") or socket.gethostname() or "unknown"


def user_agent(component: str = "berthmaster", suffix: str = "", replica: str | None = None
               ) -> str:
    """``component/version (os/arch) replica`` plus ``/suffix``: client-go's User-Agent shape
    (rest/config.go: ``buildUserAgent``, ``AddUserAgent``) with the replica (``replica``, else
    :func:`replica_name`) where client-go puts ``kubernetes/<commit>`` (a Python distribution
    has no build commit; two replicas of one component have the same one anyway)."""
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(machine, machine)
    who = "".join(c if c.isprintable() and not c.isspace() else "_"
                  for c in (replica or replica_name()))
    agent = f"{component}/{__version__} ({sys.platform}/{arch}) {who}"
    return f"{agent}/{suffix}" if suffix else agent


class KubeClient:
    """Raw-JSON access to one API server. Create with :meth:`from_kubeconfig` or
    :meth:`in_cluster`, close with :meth:`close` (or ``async with``). ``agent`` is the
    User-Agent it sends (:func:`user_agent`)."""

    def __init__(self, api_client: Any, qps: float = 0.0, burst: int = 0,
                 agent: str | None = None):
        self._api = api_client
        self.user_agent = agent or user_agent()
        self.host: str = api_client.configuration.host.rstrip("/")
        shared: aiohttp.ClientSession = api_client.rest_client.pool_manager
        self._session = aiohttp.ClientSession(connector=shared.connector, connector_owner=False,
                                              trust_env=False)
        self._proxy, self._proxy_auth = _proxy_for(self.host, api_client.configuration.proxy)
        self._limiter = TokenBucket(qps, burst) if qps > 0 else None

    @classmethod
    async def from_kubeconfig(
        cls, path: str | None = None, context: str | None = None, qps: float = 0.0, burst: int = 0,
        pool_size: int = 64, agent: str | None = None,
    ) -> KubeClient:
        """A client from a kubeconfig (``path``, else $KUBECONFIG, else ~/.kube/config).

        Raises :class:`ConfigurationError` (one line naming the file and the fix) when it does
        not exist, cannot be read, or is not a usable kubeconfig."""
        source = path or os.environ.get("KUBECONFIG") or "~/.kube/config"
        files = [os.path.expanduser(p) for p in source.split(os.pathsep) if p]
        existing = [f for f in files if os.path.exists(f)]
        if not existing:
            raise ConfigurationError(
                f"the kubeconfig {source} does not exist; pass --kubeconfig with an existing "
                "file (or run in a Pod, without --kubeconfig, for the in-cluster config)")
        for file in existing:
            if not os.access(file, os.R_OK) or os.path.isdir(file):
                raise ConfigurationError(
                    f"cannot read the kubeconfig {file} (permission denied or not a file); "
                    "make it readable by this user")
        configuration = k8s_client.Configuration()
        try:
            await k8s_config.load_kube_config(
                config_file=path, context=context, client_configuration=configuration,
                persist_config=False,
            )
        except Exception as error:  # YAML, ConfigException, and shape errors deep in the loader
            if context and f"Expected object with name {context} " in str(error):
                raise ConfigurationError(
                    f"the kubeconfig {source} has no context {context}; pass --context with one "
                    "of its contexts (kubectl config get-contexts)") from error
            raise ConfigurationError(
                f"the kubeconfig {source} is not valid ({_one_line(error)}); fix it or pass "
                "--kubeconfig with a working one (kubectl --kubeconfig FILE version checks one)"
            ) from error
        configuration.connection_pool_maxsize = pool_size
        return cls(k8s_client.ApiClient(configuration), qps, burst, agent)

    @classmethod
    def in_cluster(cls, qps: float = 0.0, burst: int = 0, pool_size: int = 64,
                   agent: str | None = None) -> KubeClient:
        """A client from the Pod's service account; ConfigurationError outside a Pod."""
        if not os.environ.get("KUBERNETES_SERVICE_HOST"):
            raise ConfigurationError(
                "no kubeconfig and not running in a Pod (KUBERNETES_SERVICE_HOST is not set); "
                "pass --kubeconfig FILE or set KUBECONFIG")
        configuration = k8s_client.Configuration()
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except Exception as error:
            raise ConfigurationError(
                f"the in-cluster config is not usable ({_one_line(error)}); check the Pod's "
                "service account token mount (automountServiceAccountToken)") from error
        configuration.connection_pool_maxsize = pool_size
        return cls(k8s_client.ApiClient(configuration), qps, burst, agent)

    @classmethod
    async def connect(
        cls, kubeconfig: str | None = None, qps: float = 0.0, burst: int = 0, pool_size: int = 64,
        attempts: int = CONNECT_ATTEMPTS, context: str | None = None, agent: str | None = None,
    ) -> KubeClient:
        """A kubeconfig when given (or $KUBECONFIG / ~/.kube/config exists, or a ``context``
        of one is named), else in-cluster; then check that the API server answers (see
        :meth:`check_reachable`).

        Raises :class:`ConfigurationError` or :class:`ConnectivityError`, each one line."""
        if kubeconfig or context or os.environ.get("KUBECONFIG") or os.path.exists(
            os.path.expanduser("~/.kube/config")
        ):
            client = await cls.from_kubeconfig(kubeconfig, context=context, qps=qps, burst=burst,
                                               pool_size=pool_size, agent=agent)
        else:
            client = cls.in_cluster(qps=qps, burst=burst, pool_size=pool_size, agent=agent)
        try:
            await client.check_reachable(attempts)
        except BaseException:
            await client.close()
            raise
        return client

    async def check_reachable(self, attempts: int = CONNECT_ATTEMPTS) -> None:
        """GET /version until the API server answers, at most ``attempts`` times.

        Only what may be transient is retried (no connection, a timeout, 429 or 5xx), each retry
        logged; a TLS failure or refused credentials are configuration and end at once."""
        delay = 0.5
        for attempt in range(1, attempts + 1):
            try:
                await self.request("GET", "/version", timeout=10.0)
                return
            except KubeError as error:
                cause = error.__cause__
                if isinstance(cause, aiohttp.ClientSSLError):
                    raise ConfigurationError(
                        f"TLS with the API server at {self.host} failed ({_one_line(cause)}); "
                        "check the kubeconfig's certificate-authority and server address"
                    ) from error
                if error.status == 401:
                    raise ConfigurationError(
                        f"the API server at {self.host} refused the credentials (401 "
                        f"{error.reason}); renew the kubeconfig's token or certificate"
                    ) from error
                transient = error.transient and not error.conflict
                reason = _one_line(cause) if cause is not None else f"{error.status} " \
                    f"{error.reason}"
                if not transient:
                    return  # it answered: reachable (a 404 /version is no reason to stop)
                if attempt == attempts:
                    raise ConnectivityError(
                        f"cannot reach the API server at {self.host} after {attempts} attempts "
                        f"({reason}); check that it is running and that the kubeconfig's server "
                        "address is right") from error
                _log.warning("the API server at %s is not answering (%s); attempt %d of %d, "
                             "retrying in %.1f s", self.host, reason, attempt, attempts, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 4.0)

    async def close(self) -> None:
        await self._session.close()
        await self._api.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        headers: dict[str, str] = {"Accept": "application/json", "User-Agent": self.user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        await self._api.update_params_for_auth(headers, None, ["BearerToken"])
        return headers

    def _url(self, path: str, params: Mapping[str, Any] | None) -> str:
        url = self.host + path
        if params:
            clean = {k: _param(v) for k, v in params.items() if v is not None}
            if clean:
                url += "?" + urlencode(clean)
        return url

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = 60.0,
        headers: Mapping[str, str] | None = None,
        fence: Callable[[], bool] | None = None,
    ) -> JSON:
        """One request; returns the decoded JSON answer or raises :class:`KubeError`.
        ``headers`` are added to the request's (``Impersonate-User`` and the like). ``fence``
        is asked after the rate limiter's wait, just before sending: False raises
        :class:`Fenced` and nothing is sent (see the module docstring)."""
        if self._limiter is not None:
            await self._limiter.acquire()
        if fence is not None and not fence():
            raise Fenced(method, path)
        data = None if body is None else orjson.dumps(body)
        headers = {**await self._headers(content_type if data is not None else None),
                   **(headers or {})}
        try:
            async with self._session.request(
                method, self._url(path, params), data=data, headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout), proxy=self._proxy,
                proxy_auth=self._proxy_auth,
            ) as response:
                raw = await response.read()
                status = response.status
                reason = response.reason or ""
        except (TimeoutError, aiohttp.ClientError, OSError) as error:
            raise KubeError(0, "ConnectionError", f"{method} {path}: {error!r}") from error
        decoded: JSON = {}
        if raw:
            try:
                loaded = orjson.loads(raw)
                decoded = loaded if isinstance(loaded, dict) else {"items": loaded}
            except ValueError:
                decoded = {"message": raw.decode(errors="replace")}
        if status >= 400:
            raise KubeError(status, decoded.get("reason") or reason,
                            decoded.get("message") or reason, decoded)
        return decoded

    # Convenience verbs over request(); all take API paths built by resource_path().
    async def get(self, path: str, **params: Any) -> JSON:
        return await self.request("GET", path, params=params)

    async def get_if_exists(self, path: str, **params: Any) -> JSON | None:
        """The object, or ``None`` when the API server answers 404 (any other error raises)."""
        try:
            return await self.get(path, **params)
        except KubeError as error:
            if error.not_found:
                return None
            raise

    async def create(self, path: str, body: JSON, fence: Callable[[], bool] | None = None,
                     **params: Any) -> JSON:
        return await self.request("POST", path, body=body, params=params, fence=fence)

    async def replace(self, path: str, body: JSON, fence: Callable[[], bool] | None = None
                      ) -> JSON:
        return await self.request("PUT", path, body=body, fence=fence)

    async def patch(self, path: str, body: Any, kind: str = "merge",
                    fence: Callable[[], bool] | None = None, **params: Any) -> JSON:
        content = {
            "merge": "application/merge-patch+json",
            "strategic": "application/strategic-merge-patch+json",
            "json": "application/json-patch+json",
            "apply": "application/apply-patch+yaml",
        }[kind]
        return await self.request("PATCH", path, body=body, content_type=content, params=params,
                                  fence=fence)

    async def delete(self, path: str, body: JSON | None = None,
                     fence: Callable[[], bool] | None = None, **params: Any) -> JSON:
        return await self.request("DELETE", path, body=body, params=params, fence=fence)

    async def list_all(
        self, path: str, page_size: int = 5000, **params: Any
    ) -> tuple[list[JSON], str]:
        """Every item of a collection (paged), and the list's resourceVersion."""
        items: list[JSON] = []
        token: str | None = None
        while True:
            page = await self.request("GET", path, params={**params, "limit": page_size,
                                                           "continue": token})
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return items, (page.get("metadata") or {}).get("resourceVersion", "")

    async def watch(
        self, path: str, resource_version: str, timeout_seconds: int = MIN_WATCH_TIMEOUT,
        idle_timeout: float = WATCH_IDLE_TIMEOUT, **params: Any
    ) -> AsyncIterator[JSON]:
        """Watch events (``{"type": ..., "object": {...}}``) from ``resource_version``.

        Ends when the server closes the stream; raises :class:`KubeError` with status 410 when
        the version is too old (the caller relists), status 0 when nothing (not even a
        bookmark) arrived for ``idle_timeout`` seconds (a half-open connection: the caller
        watches again from the last version). Bookmarks are asked for and passed on.
        """
        query = {**params, "watch": "true", "resourceVersion": resource_version,
                 "allowWatchBookmarks": "true", "timeoutSeconds": timeout_seconds}
        headers = await self._headers(None)
        try:
            async with self._session.get(
                self._url(path, query), headers=headers, proxy=self._proxy,
                proxy_auth=self._proxy_auth,
                timeout=aiohttp.ClientTimeout(total=None,
                                              sock_read=min(idle_timeout, timeout_seconds + 30)),
            ) as response:
                if response.status >= 400:
                    raw = await response.read()
                    body = orjson.loads(raw) if raw else {}
                    raise KubeError(response.status, body.get("reason", ""),
                                    body.get("message", ""), body)
                splitter = LineSplitter()
                async for chunk in response.content.iter_chunked(WATCH_CHUNK_BYTES):
                    for line in splitter.feed(chunk):
                        yield _watch_event(line)
                last = splitter.end()
                if last is not None:
                    yield _watch_event(last)
        except (TimeoutError, aiohttp.ClientError) as error:
            raise KubeError(0, "ConnectionError", f"watch {path}: {error!r}") from error


def _watch_event(line: bytes) -> JSON:
    """One watch line decoded; an ``ERROR`` event raised as the :class:`KubeError` it carries."""
    event: JSON = orjson.loads(line)
    if event.get("type") == "ERROR":
        status = event.get("object") or {}
        raise KubeError(int(status.get("code") or 500), status.get("reason", ""),
                        status.get("message", ""), status)
    return event


def _proxy_for(host: str, configured: str | None) -> tuple[str | None, aiohttp.BasicAuth | None]:
    """The proxy for ``host``: the kubeconfig's ``proxy-url``, else the environment's
    ``HTTPS_PROXY``/``HTTP_PROXY`` unless ``NO_PROXY`` excludes the host; else none."""
    if configured:
        return configured, None
    try:
        proxy, auth = get_env_proxy_for_url(yarl.URL(host))
    except LookupError:
        return None, None
    return str(proxy), auth


def _one_line(error: BaseException) -> str:
    """An exception as a short single line (aiohttp's and the loaders' messages can wrap)."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
