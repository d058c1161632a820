"""The pods/binding check: upstream's attributes (OpenShift podnodeconstraints
checkPodsBindAccess), one SubjectAccessReview per user, namespace and name while the answer is
fresh, on a fake clock."""

from __future__ import annotations

from typing import Any

from berthmaster.operator.admission.access import BindingAccess, subject_access_review
from berthmaster.operator.admission.review import UserInfo

ALICE = UserInfo(username="alice", uid="1", groups=("dev", "system:authenticated"),
                 extra=(("scopes", ("a",)),))


class ReviewingApiServer:
    """Answers SubjectAccessReviews from a table and counts them (no HTTP)."""

    def __init__(self, allowed: set[str]):
        self.allowed = allowed
        self.reviews: list[dict[str, Any]] = []

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        assert path == "/apis/authorization.k8s.io/v1/subjectaccessreviews"
        self.reviews.append(body)
        return {"status": {"allowed": body["spec"]["user"] in self.allowed}}


def test_the_review_asks_what_openshift_asks() -> None:
    review = subject_access_review(ALICE, "ns1", "p")
    assert review["spec"] == {
        "user": "alice", "uid": "1", "groups": ["dev", "system:authenticated"],
        "extra": {"scopes": ["a"]},
        "resourceAttributes": {"namespace": "ns1", "verb": "create", "group": "",
                               "resource": "pods", "subresource": "binding", "name": "p"}}
    assert "name" not in subject_access_review(ALICE, "ns1", "")["spec"]["resourceAttributes"]


async def test_answers_are_cached_briefly() -> None:
    now = [0.0]
    server = ReviewingApiServer(allowed={"bob"})
    access = BindingAccess(server, ttl=10, clock=lambda: now[0])  # type: ignore[arg-type]
    assert not await access.may_bind(ALICE, "ns1", "p")
    assert not await access.may_bind(ALICE, "ns1", "p")
    assert len(server.reviews) == 1
    assert await access.may_bind(UserInfo(username="bob"), "ns1", "p")
    await access.may_bind(ALICE, "ns2", "p")
    assert len(server.reviews) == 3
    now[0] = 10.0
    server.allowed.add("alice")  # a role granted: seen once the answer is stale
    assert await access.may_bind(ALICE, "ns1", "p")
    assert len(server.reviews) == 4
