"""One AdmissionReview in, one out: gather the facts a request needs, then decide (pure).

The namespace is read from the API server on every request that needs it (one GET on the
loopback or in-cluster connection): an annotation an administrator just changed applies to
the very next pod, as upstream's plugins do once their informer has the change. A node is read
only for NodeEnv's nodeName check and a SubjectAccessReview asked only when PodNodeConstraints'
answer depends on it (access.py caches those). A failure to read refuses the request with the
reason (``failurePolicy`` only covers an unreachable webhook, not a webhook's own errors).
"""

from __future__ import annotations

import logging
from typing import Any

from berthmaster.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.operator.admission import decisions, review
from berthmaster.operator.admission.access import BindingAccess
from berthmaster.operator.admission.config import AdmissionConfig

_log = logging.getLogger("berthmaster.operator.admission")


class PlacementWebhook:
    def __init__(self, client: KubeClient, config: AdmissionConfig, access: BindingAccess):
        self.client = client
        self.config = config
        self.access = access

    async def answer(self, path: str, body: Any) -> dict[str, Any]:
        """The AdmissionReview response for ``/mutate`` or ``/validate``."""
        try:
            request = review.read_request(body)
        except review.ReviewError as error:
            return review.deny("", str(error), code=400)
        config = self.config  # one configuration for the whole request, even if reloaded
        try:
            facts = await self._facts(request, config, validating=path == "/validate")
        except KubeError as error:
            _log.warning("admission %s %s/%s: %s", request.operation, request.namespace,
                         request.name, error)
            return review.deny(request.uid, f"berthmaster placement admission could not "
                                            f"decide: {error}", code=500)
        decide = decisions.validate if path == "/validate" else decisions.mutate
        verdict = decide(request, config, facts)
        if verdict.refusal:
            return review.deny(request.uid, verdict.refusal, verdict.code)
        return review.allow(request.uid, verdict.patch)

    async def _facts(self, request: review.Request, config: AdmissionConfig,
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
