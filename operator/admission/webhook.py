"""One AdmissionReview in, one out: gather the facts a request needs, then decide (pure).

The namespace is read from the API server on every request that needs it (one GET on the
loopback or in-cluster connection): an annotation an administrator just changed applies to
the very next pod, as upstream's plugins do once their informer has the change. A node is read
only for NodeEnv's nodeName check and a SubjectAccessReview asked only when PodNodeConstraints'
answer depends on it (access.py caches those). A pod arriving at ``/mutate`` with more
tolerations than ``--max-tolerations`` is refused before anything is read (at ``/validate``, 64
more are allowed: what the mutating pass itself may have added).

``/scheduler-name`` (schedulername.py) reads only the namespace, for its labels.

When a read fails (an error status, an unreachable API server, missing RBAC, or no answer within
the webhook's ``timeoutSeconds`` less a second) the request is answered as the configured
``failurePolicy`` says the API server answers a webhook it cannot call: ``Ignore`` admits it
unchanged with a ``warnings`` entry naming the failure (kubectl prints it), ``Fail`` denies it
with the failure. Either way a log line and ``berthmaster_admission_requests_total``
(``fail_open`` / ``error``) record it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.operator.admission import decisions, review, schedulername
from berthmaster.operator.admission.access import BindingAccess
from berthmaster.operator.admission.config import AdmissionConfig
from berthmaster.operator.admission.metrics import AdmissionMetrics
from berthmaster.operator.admission.options import DEFAULT_MAX_TOLERATIONS

_log = logging.getLogger("berthmaster.operator.admission")
MERGE_ALLOWANCE = 64


class FactsUnavailable(Exception):
    """A read the decision needs failed; the message says which and why."""


class PlacementWebhook:
    def __init__(self, client: KubeClient, config: AdmissionConfig, access: BindingAccess,
                 failure_policy: str = "Fail", timeout_seconds: int = 5,
                 max_tolerations: int = DEFAULT_MAX_TOLERATIONS,
                 metrics: AdmissionMetrics | None = None, scheduler_name: str = ""):
        self.client = client
        self.config = config
        self.access = access
        self.failure_policy = failure_policy
        # The reads must end before the API server gives up on us (timeoutSeconds).
        self.read_budget = max(0.5, timeout_seconds - 1.0)
        self.max_tolerations = max_tolerations
        self.metrics = metrics or AdmissionMetrics()
        # Set on new pods of namespaces labelled for it (schedulername.py); "" routes nothing.
        self.scheduler_name = scheduler_name

    async def answer(self, path: str, body: Any) -> dict[str, Any]:
        """The AdmissionReview response for ``/mutate``, ``/validate`` or
        ``/scheduler-name``."""
        try:
            request = review.read_request(body)
        except review.ReviewError as error:
            self.metrics.count(path, "bad_request")
            return review.deny("", str(error), code=400)
        if path == schedulername.PATH:
            return await self._route(path, request)
        validating = path == "/validate"
        # The validating pass sees the pod with the mutating pass's additions (the namespace's
        # default tolerations, memory-pressure): room for them above the limit.
        oversized = decisions.too_many_tolerations(
            request, self.max_tolerations + (MERGE_ALLOWANCE if validating else 0))
        if oversized is not None:
            self.metrics.count(path, "denied")
            return review.deny(request.uid, oversized.refusal or "", oversized.code)
        config = self.config  # one configuration for the whole request, even if reloaded
        try:
            facts = await self._facts(request, config, validating)
        except FactsUnavailable as error:
            return self._undecided(path, request, str(error))
        decide = decisions.validate if validating else decisions.mutate
        verdict = decide(request, config, facts)
        if verdict.refusal:
            self.metrics.count(path, "denied")
            return review.deny(request.uid, verdict.refusal, verdict.code)
        self.metrics.count(path, "allowed")
        return review.allow(request.uid, verdict.patch)

    async def _route(self, path: str, request: review.Request) -> dict[str, Any]:
        if not (self.scheduler_name and request.is_pod and request.operation == "CREATE"):
            self.metrics.count(path, "allowed")
            return review.allow(request.uid)
        try:
            async with asyncio.timeout(self.read_budget):
                labels = await self._namespace_labels(request.namespace)
        except KubeError as error:
            return self._undecided(path, request, str(error))
        except TimeoutError:
            return self._undecided(path, request, f"the API server did not answer within "
                                                  f"{self.read_budget:g} s")
        verdict = decisions.route_scheduler_name(
            request, decisions.Facts(namespace_labels=labels), self.scheduler_name)
        self.metrics.count(path, "allowed")
        return review.allow(request.uid, verdict.patch)

    async def _namespace_labels(self, namespace: str) -> dict[str, str]:
        body = await self.client.get(resource_path(CORE, "namespaces", name=namespace))
        return dict((body.get("metadata") or {}).get("labels") or {})

    def _undecided(self, path: str, request: review.Request, reason: str) -> dict[str, Any]:
        what = f"{request.operation} {request.resource} {request.namespace}/{request.name}"
        if self.failure_policy == "Ignore":
            _log.warning("admission %s admitted unchecked (failurePolicy Ignore): %s", what,
                         reason)
            self.metrics.count(path, "fail_open")
            return review.allow(request.uid, warnings=[
                f"berthmaster placement admission could not check this request ({reason}); "
                "admitted unchanged because its failurePolicy is Ignore"])
        _log.warning("admission %s refused (failurePolicy Fail): %s", what, reason)
        self.metrics.count(path, "error")
        return review.deny(request.uid, f"berthmaster placement admission could not decide: "
                                        f"{reason}", code=500)

    async def _facts(self, request: review.Request, config: AdmissionConfig,
                     validating: bool) -> decisions.Facts:
        try:
            async with asyncio.timeout(self.read_budget):
                return await self._read_facts(request, config, validating)
        except KubeError as error:
            raise FactsUnavailable(str(error)) from error
        except TimeoutError as error:
            raise FactsUnavailable(f"the API server did not answer within "
                                   f"{self.read_budget:g} s") from error

    async def _read_facts(self, request: review.Request, config: AdmissionConfig,
                          validating: bool) -> decisions.Facts:
        annotations: dict[str, str] = {}
        if request.is_pod:
            namespace = await self.client.get(resource_path(CORE, "namespaces",
                                                            name=request.namespace))
            annotations = (namespace.get("metadata") or {}).get("annotations") or {}
        node_labels, node_error = None, None
        node_name = decisions.node_to_read(request)
        if node_name:
            try:
                node = await self.client.get(resource_path(CORE, "nodes", name=node_name))
                node_labels = (node.get("metadata") or {}).get("labels") or {}
            except KubeError as error:
                if not error.not_found:
                    raise
                node_error = f'node "{node_name}" not found'
        may_bind = None
        if validating and decisions.needs_binding_check(request, config):
            name = request.name if request.is_pod else ""
            may_bind = await self.access.may_bind(request.user, request.namespace, name)
        return decisions.Facts(namespace_annotations=annotations, node_labels=node_labels,
                               node_error=node_error, may_bind=may_bind)
