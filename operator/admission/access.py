"""May this user create ``pods/binding`` here? A SubjectAccessReview, cached briefly.

OpenShift's PodNodeConstraints asks its authorizer in process; a webhook asks the API server
(``authorization.k8s.io/v1`` SubjectAccessReview with the request's user, uid, groups and
extra, verb ``create`` on ``pods/binding`` in the namespace, and the pod's name for a pod, as
``checkPodsBindAccess``). Answers are kept for ``ttl`` seconds per (user, namespace, name) so a
Deployment's burst of requests costs one review; a role granted or revoked takes effect within
that time. Errors are not cached: the caller refuses the request with the error (a review that
cannot be asked must not grant anything).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from berthmaster.foundation.kube import KubeClient, group_path, resource_path
from berthmaster.operator.admission.review import UserInfo

AUTHORIZATION = group_path("authorization.k8s.io", "v1")
CACHE_SIZE = 4096


class BindingAccess:
    def __init__(self, client: KubeClient, ttl: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self._client = client
        self._ttl = ttl
        self._clock = clock
        self._answers: OrderedDict[tuple[object, ...], tuple[float, bool]] = OrderedDict()

    async def may_bind(self, user: UserInfo, namespace: str, name: str) -> bool:
        key = (user, namespace, name)
        now = self._clock()
        cached = self._answers.get(key)
        if cached is not None and now - cached[0] < self._ttl:
            return cached[1]
        review = await self._client.create(resource_path(AUTHORIZATION,
                                                         "subjectaccessreviews"),
                                           subject_access_review(user, namespace, name))
        allowed = bool((review.get("status") or {}).get("allowed"))
        self._answers[key] = (now, allowed)
        self._answers.move_to_end(key)
        while len(self._answers) > CACHE_SIZE:
            self._answers.popitem(last=False)
        return allowed


def subject_access_review(user: UserInfo, namespace: str, name: str) -> dict[str, object]:
    attributes = {"namespace": namespace, "verb": "create", "group": "", "resource": "pods",
                  "subresource": "binding"}
    if name:
        attributes["name"] = name
    spec: dict[str, object] = {"user": user.username, "groups": list(user.groups),
                               "resourceAttributes": attributes}
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {key: list(values) for key, values in user.extra}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": spec}
