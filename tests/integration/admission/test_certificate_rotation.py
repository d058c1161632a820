"""The serving certificate and its CA rotate while the API server keeps calling the webhook,
and not one request fails.

The operator runs with lifetimes of seconds (serving 9 s, CA 24 s, a reconcile every second),
so the serving certificate is reissued every few seconds and the CA replaced within half a
minute: first published beside the old one, then used (certs.py). Meanwhile pods are created
one after another (dry runs) in an annotated namespace; each must come back merged. The test
ends when the Secret has held two CAs and three serving certificates.
"""

from __future__ import annotations

import base64
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from tests.integration.admission.conftest import AdmissionProcess, create_pod, pod_body
from tests.support.waiting import wait_for

ADMISSION_ENV = {"BERTHMASTER_ADMISSION_CHECK_SECONDS": "1",
                 "BERTHMASTER_ADMISSION_CERT_SECONDS": "9",
                 "BERTHMASTER_ADMISSION_CA_SECONDS": "24"}


async def test_rotation_without_a_failed_request(admission: AdmissionProcess,
                                                 kube: KubeClient, project: Any) -> None:
    namespace = await project({"scheduler.alpha.kubernetes.io/node-selector": "env=test"})
    secret_path = resource_path(CORE, "secrets", admission.namespace, f"{admission.name}-tls")
    cas: set[str] = set()
    serving: set[str] = set()
    failures: list[str] = []
    requests = 0

    async def rotated_enough() -> bool:
        nonlocal requests
        requests += 1
        try:
            pod = await create_pod(kube, namespace, pod_body(f"p{requests}"))
            if (pod["spec"].get("nodeSelector") or {}) != {"env": "test"}:
                failures.append(f"request {requests}: not mutated: {pod['spec']}")
        except KubeError as error:
            failures.append(f"request {requests}: {error.status} {error.message}")
        data = (await kube.get(secret_path)).get("data") or {}
        cas.add(base64.b64decode(data["ca-current.crt"]).decode())
        serving.add(base64.b64decode(data["tls.crt"]).decode())
        return len(cas) >= 2 and len(serving) >= 3

    await wait_for(rotated_enough, timeout=180, interval=0.1,
                   what="two CAs and three serving certificates in the Secret")
    assert "serving certificate rotated" in admission.log()
    assert failures == [], failures
    assert requests > 10
