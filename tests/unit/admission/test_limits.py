"""The pure parts of the webhook's limits: the toleration cap's refusal, the uid read from the
start of a body too large to read, the too-large sentence, and the warnings of an admission
that failed open (AdmissionResponse ``warnings``, k8s.io/api/admission/v1 types.go)."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.operator.admission import decisions, review
from berthmaster.operator.admission.server import review_uid, too_large_message
from tests.support.builders import make_pod, toleration


def pod_request(pod: dict[str, Any], resource: str = "pods") -> review.Request:
    return review.read_request({"request": {
        "uid": "u1", "resource": {"group": "", "version": "v1", "resource": resource},
        "operation": "CREATE", "namespace": "ns1", "object": pod}})


def test_the_cap_counts_the_pods_tolerations() -> None:
    pod = make_pod("web", tolerations=[toleration(f"k{i}", operator="Exists")
                                       for i in range(3)])
    assert decisions.too_many_tolerations(pod_request(pod), 3) is None
    refused = decisions.too_many_tolerations(pod_request(pod), 2)
    assert refused is not None and refused.code == 422
    assert refused.refusal == (
        'pods "web" is forbidden: spec.tolerations has 3 entries, more than the 2 berthmaster '
        "placement admission accepts (berthmaster admission --max-tolerations; chart value "
        "admission.maxTolerations); remove tolerations or raise the limit")


def test_the_cap_is_for_pods_only() -> None:
    template = {"metadata": {"name": "d"}, "spec": {"template": {"spec": {"tolerations": [
        toleration("a", operator="Exists")] * 5}}}}
    assert decisions.too_many_tolerations(pod_request(template, "deployments"), 1) is None


@pytest.mark.parametrize("prefix,uid", [
    (b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":'
     b'"7f0a-11","kind":{"kind":"Pod"}', "7f0a-11"),
    (b'{"request": { "uid" : "abc"', "abc"),
    (b'{"kind":"AdmissionReview","request":{"kind":{"kind":"Pod"},"uid":"late"', None),
    (b"x" * 100, None),
])
def test_the_uid_at_the_start_of_a_review(prefix: bytes, uid: str | None) -> None:
    assert review_uid(prefix) == uid


def test_the_too_large_sentence_names_the_limit_and_the_flag() -> None:
    assert too_large_message(3145728, 4194304) == (
        "the admission review is 4194304 bytes, over the 3145728-byte limit of berthmaster "
        "placement admission (berthmaster admission --max-request-bytes; chart value "
        "admission.maxRequestBytes); make the object smaller or raise the limit")
    assert too_large_message(10, None).startswith(
        "the admission review is over the 10-byte limit")


def test_an_admission_with_warnings() -> None:
    answer = review.allow("u1", warnings=["could not check"])
    assert answer["response"] == {"uid": "u1", "allowed": True, "warnings": ["could not check"]}
    assert "warnings" not in review.allow("u1")["response"]
    assert review.deny("u1", "too big", 413)["response"]["status"]["reason"] == (
        "RequestEntityTooLarge")
