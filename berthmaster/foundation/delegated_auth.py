"""Delegated authentication and authorization for the components' secure endpoint.

Design: kube-scheduler and kube-controller-manager let the API server decide who may read
their ``/metrics``; this module does the same for the scheduler's and the operator's HTTPS
endpoint (berthmaster.foundation.serving), request by request, in this order:

1. **Authentication** (k8s.io/apiserver ``pkg/authentication/request/bearertoken/
   bearertoken.go`` and ``authenticatorfactory/delegating.go``): a request with an
   ``Authorization: Bearer <token>`` header is authenticated by a TokenReview; a token the API
   server does not accept, or a TokenReview that fails, answers 401. A request without a bearer
   token is ``system:anonymous`` in group ``system:unauthenticated`` (the delegating
   authenticator always enables anonymous). Answers are cached for the token cache TTL (10 s,
   ``--authentication-token-webhook-cache-ttl``), for accepted and rejected tokens alike, as
   ``token/cache/cached_token_authenticator.go`` is built there; failed calls are not cached,
   and concurrent requests with one token wait for one TokenReview, as its singleflight does.
2. **Authorization** (``pkg/authorization/path/path.go``, ``authorizerfactory/delegating.go``,
   ``plugin/pkg/authorizer/webhook/webhook.go``): a path in ``--authorization-always-allow-paths``
   (default ``/healthz,/readyz,/livez``; a trailing ``*`` is a prefix) is allowed for everyone,
   the group ``system:masters`` is allowed everything, and any other request is asked of the API
   server with a SubjectAccessReview of its non-resource path and verb (the HTTP method in lower
   case: ``get``). Allowed answers are cached for ``--authorization-webhook-cache-authorized-ttl``,
   the others for ``--authorization-webhook-cache-unauthorized-ttl`` (10 s each); failed calls are
   not cached and answer 500, as upstream's authorization filter does.

The 401 and 403 bodies are the API server's ``Status`` objects (``endpoints/filters/
authentication.go`` ``Unauthorized``, ``endpoints/handlers/responsewriters/errors.go``
``ForbiddenStatusError``). Everything but :class:`Delegated`'s two API calls is pure and takes
its clock as an argument, so the TTLs are tested on a fake clock. Tokens are never kept: the
cache key is a SHA-256 of the token.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from berthmaster.foundation.kube import KubeClient, KubeError, group_path, resource_path

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
MASTERS = "system:masters"
DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
DEFAULT_CACHE_TTL = 10.0  # apiserver pkg/server/options: CacheTTL, AllowCacheTTL, DenyCacheTTL
CACHE_SIZE = 4096
# TokenRequestTimeout and ClientTimeout in apiserver pkg/server/options (10 s each)
REVIEW_TIMEOUT = 10.0

TOKEN_REVIEWS = resource_path(group_path("authentication.k8s.io", "v1"), "tokenreviews")
ACCESS_REVIEWS = resource_path(group_path("authorization.k8s.io", "v1"), "subjectaccessreviews")

Clock = Callable[[], float]
V = TypeVar("V")


@dataclass(frozen=True)
class User:
    """An authenticated (or anonymous) caller, as a TokenReview's ``status.user``."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def from_review(cls, user: Mapping[str, Any]) -> User:
        groups = tuple(user.get("groups") or ())
        # group.NewAuthenticatedGroupAdder: every authenticated user is system:authenticated
        if AUTHENTICATED not in groups:
            groups = (*groups, AUTHENTICATED)
        extra = tuple(sorted((key, tuple(values))
                             for key, values in (user.get("extra") or {}).items()))
        return cls(str(user.get("username", "")), str(user.get("uid", "")), groups, extra)


ANONYMOUS_USER = User(ANONYMOUS, groups=(UNAUTHENTICATED,))


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization`` header, or None when it carries none (then the caller
    is anonymous): bearertoken.go's reading — trimmed, split in at most three on spaces, the
    scheme ``bearer`` in any case, an empty token being no token."""
    header = (authorization or "").strip()
    if not header:
        return None
    parts = header.split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]


def always_allowed(path: str, patterns: Sequence[str]) -> bool:
    """path.go: a pattern matches exactly, or as a prefix when it ends with ``*``."""
    for pattern in patterns:
        if pattern.endswith("*"):
            if path.startswith(pattern[:-1]):
                return True
        elif path == pattern:
            return True
    return False


def check_always_allow_paths(patterns: Sequence[str]) -> list[str]:
    """path.go's NewAuthorizer refuses a ``*`` anywhere but at the end of a pattern."""
    return [f"--authorization-always-allow-paths: {pattern!r} has a '*' before its end; only "
            "a trailing '*' (a prefix) is allowed" for pattern in patterns
            if "*" in pattern[:-1]]


def access_review_spec(user: User, path: str, verb: str) -> dict[str, Any]:
    """The SubjectAccessReview spec for a non-resource request (webhook.go's Authorize)."""
    spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups),
                            "nonResourceAttributes": {"path": path, "verb": verb}}
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {key: list(values) for key, values in user.extra}
    return spec


def _status(code: int, reason: str, message: str, details: bool) -> bytes:
    status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                              "status": "Failure", "message": message, "reason": reason}
    if details:
        status["details"] = {}
    status["code"] = code
    # Go's encoding/json: compact, HTML characters escaped, a trailing newline
    text = json.dumps(status, separators=(",", ":"))
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return (text + "\n").encode()


def unauthorized_body() -> bytes:
    """apierrors.NewUnauthorized("Unauthorized") as the API server writes it."""
    return _status(401, "Unauthorized", "Unauthorized", details=False)


def forbidden_body(user: User, verb: str, path: str, reason: str = "") -> bytes:
    """responsewriters.ForbiddenStatusError for a non-resource request."""
    message = f"User {json.dumps(user.name)} cannot {verb} path {json.dumps(path)}"
    for char, escaped in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;")):
        message = message.replace(char, escaped)
    if reason:
        message = f"{message}: {reason}"
    return _status(403, "Forbidden", f"forbidden: {message}", details=True)


class TTLCache(Generic[V]):
    """Answers kept for a TTL chosen per entry, read on an injected clock; at most ``size``
    entries (the oldest goes first)."""

    def __init__(self, clock: Clock = time.monotonic, size: int = CACHE_SIZE):
        self.clock = clock
        self.size = size
        self._entries: dict[Hashable, tuple[float, V]] = {}

    def get(self, key: Hashable) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if self.clock() >= expires:
            del self._entries[key]
            return None
        return value

    def set(self, key: Hashable, value: V, ttl: float) -> None:
        if ttl <= 0:
            return
        self._entries.pop(key, None)
        while len(self._entries) >= self.size:
            del self._entries[next(iter(self._entries))]
        self._entries[key] = (self.clock() + ttl, value)

    def __len__(self) -> int:
        return len(self._entries)


class ReviewFailed(Exception):
    """A TokenReview or SubjectAccessReview could not be made."""


@dataclass(frozen=True)
class TokenAnswer:
    """A TokenReview's answer: the user, or None when the token was not accepted."""

    user: User | None


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


@dataclass
class Delegated:
    """Authenticates tokens and authorizes requests by asking the API server, with caches.

    ``authentication`` and ``authorization`` are the clients that create TokenReviews and
    SubjectAccessReviews (often one and the same: the component's own)."""

    authentication: KubeClient
    authorization: KubeClient
    always_allow_paths: tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_PATHS
    token_ttl: float = DEFAULT_CACHE_TTL
    allowed_ttl: float = DEFAULT_CACHE_TTL
    denied_ttl: float = DEFAULT_CACHE_TTL
    clock: Clock = time.monotonic
    timeout: float = REVIEW_TIMEOUT
    tokens: TTLCache[TokenAnswer] = field(init=False)
    decisions: TTLCache[Decision] = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = TTLCache(self.clock)
        self.decisions = TTLCache(self.clock)
        self._reviewing: dict[str, asyncio.Future[TokenAnswer]] = {}

    async def authenticate(self, token: str) -> User | None:
        """The token's user, or None when the API server does not accept it. Concurrent
        requests with one token share one TokenReview (the cached token authenticator's
        singleflight)."""
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self.tokens.get(key)
        if cached is not None:
            return cached.user
        pending = self._reviewing.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._review_token(key, token))
            self._reviewing[key] = pending
            pending.add_done_callback(lambda _: self._reviewing.pop(key, None))
        return (await asyncio.shield(pending)).user

    async def _review_token(self, key: str, token: str) -> TokenAnswer:
        try:
            review = await self.authentication.request("POST", TOKEN_REVIEWS, body={
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": token}}, timeout=self.timeout)
        except KubeError as error:
            raise ReviewFailed(f"TokenReview failed: {error}") from error
        status = review.get("status") or {}
        user = User.from_review(status.get("user") or {}) if status.get("authenticated") else None
        answer = TokenAnswer(user)
        self.tokens.set(key, answer, self.token_ttl)
        return answer

    async def authorize(self, user: User, verb: str, path: str) -> Decision:
        if always_allowed(path, self.always_allow_paths) or MASTERS in user.groups:
            return Decision(True)
        spec = access_review_spec(user, path, verb)
        key = json.dumps(spec, sort_keys=True)
        cached = self.decisions.get(key)
        if cached is not None:
            return cached
        try:
            review = await self.authorization.request("POST", ACCESS_REVIEWS, body={
                "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": spec}, timeout=self.timeout)
        except KubeError as error:
            raise ReviewFailed(f"SubjectAccessReview failed: {error}") from error
        status = review.get("status") or {}
        decision = Decision(bool(status.get("allowed")), str(status.get("reason") or ""))
        self.decisions.set(key, decision,
                           self.allowed_ttl if decision.allowed else self.denied_ttl)
        return decision
