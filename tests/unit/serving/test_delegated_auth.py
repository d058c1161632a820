"""The pure parts of delegated authentication and authorization
(berthmaster.foundation.delegated_auth).

Upstream: k8s.io/apiserver@v0.35.4 ``pkg/authentication/request/bearertoken/bearertoken.go``
(header reading), ``pkg/authorization/path/path.go`` (always-allowed paths),
``pkg/endpoints/handlers/responsewriters/errors.go`` and ``pkg/endpoints/filters/
authentication.go`` (the 403 and 401 bodies), ``pkg/server/options/authentication.go`` and
``authorization.go`` (the 10 s cache TTLs).
"""

from __future__ import annotations

import json

import pytest

from berthmaster.foundation.delegated_auth import (
    ANONYMOUS_USER,
    TTLCache,
    User,
    access_review_spec,
    always_allowed,
    bearer_token,
    check_always_allow_paths,
    forbidden_body,
    unauthorized_body,
)
from tests.support.clock import FakeClock


@pytest.mark.parametrize(("header", "token"), [
    (None, None),
    ("", None),
    ("   ", None),
    ("Bearer abc", "abc"),
    ("bearer abc", "abc"),
    ("BEARER abc", "abc"),
    ("  Bearer abc  ", "abc"),  # trimmed first
    ("Bearer abc extra", "abc"),  # split in at most three, the token is the second
    ("Bearer", None),
    ("Bearer  abc", None),  # the space before the token: an empty token is no token
    ("Basic dXNlcjpwYXNz", None),
    ("Token abc", None),
])
def test_bearer_token_is_read_as_bearertoken_go_reads_it(header: str | None,
                                                        token: str | None) -> None:
    assert bearer_token(header) == token


@pytest.mark.parametrize(("path", "allowed"), [
    ("/healthz", True), ("/readyz", True), ("/livez", True), ("/metrics", False),
    ("/healthz/ping", False), ("/debug/pprof/heap", True), ("/debug", False),
])
def test_always_allowed_paths_match_exactly_or_by_a_trailing_star(path: str,
                                                                 allowed: bool) -> None:
    assert always_allowed(path, ("/healthz", "/readyz", "/livez", "/debug/*")) is allowed


def test_a_star_before_the_end_is_refused() -> None:
    assert check_always_allow_paths(["/healthz", "/debug/*"]) == []
    (problem,) = check_always_allow_paths(["/a*b"])
    assert "'/a*b'" in problem and "trailing" in problem


def test_unauthorized_body_is_the_api_servers_status() -> None:
    assert unauthorized_body() == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"Unauthorized","reason":"Unauthorized","code":401}\n')


def test_forbidden_body_names_the_user_verb_and_path() -> None:
    assert forbidden_body(ANONYMOUS_USER, "get", "/metrics") == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"forbidden: User \\"system:anonymous\\" cannot get path \\"/metrics\\"",'
        b'"reason":"Forbidden","details":{},"code":403}\n')


def test_forbidden_body_carries_the_reviews_reason_and_escapes_html() -> None:
    body = json.loads(forbidden_body(User("a<b"), "get", "/metrics", "no RBAC rule"))
    assert body["message"] == ('forbidden: User "a&lt;b" cannot get path "/metrics": '
                               "no RBAC rule")


def test_access_review_asks_for_the_non_resource_path_and_verb() -> None:
    user = User.from_review({"username": "system:serviceaccount:ns:prom", "uid": "u1",
                             "groups": ["system:serviceaccounts"],
                             "extra": {"authentication.kubernetes.io/pod-name": ["p"]}})
    assert access_review_spec(user, "/metrics", "get") == {
        "user": "system:serviceaccount:ns:prom", "uid": "u1",
        # every authenticated user is also system:authenticated (group.AuthenticatedGroupAdder)
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/pod-name": ["p"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}
    assert access_review_spec(ANONYMOUS_USER, "/metrics", "get") == {
        "user": "system:anonymous", "groups": ["system:unauthenticated"],
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}


def test_cache_keeps_an_answer_for_its_ttl_and_no_longer() -> None:
    clock = FakeClock(1000.0)
    cache: TTLCache[str] = TTLCache(clock)
    cache.set("allowed", "yes", 10.0)
    cache.set("denied", "no", 2.0)
    clock.now += 1.999
    assert (cache.get("allowed"), cache.get("denied")) == ("yes", "no")
    clock.now += 0.001
    assert (cache.get("allowed"), cache.get("denied")) == ("yes", None)
    clock.now += 8.0
    assert cache.get("allowed") is None
    assert len(cache) == 0


def test_a_zero_ttl_caches_nothing_and_the_cache_is_bounded() -> None:
    clock = FakeClock(1000.0)
    cache: TTLCache[int] = TTLCache(clock, size=3)
    cache.set("never", 0, 0.0)
    assert cache.get("never") is None
    for number in range(5):
        cache.set(number, number, 10.0)
    assert len(cache) == 3
    assert [cache.get(n) for n in range(5)] == [None, None, 2, 3, 4]
