"""A Machine's status.nodeRef is trusted only for the Node with the Machine's providerID
(nodes.not_owned), and the operator runs only the providers it is told to (handlers).

Upstream's node link matches a Node to its Machine by ``spec.providerID``
(openshift/machine-api-operator pkg/controller/nodelink/nodelink_controller.go,
``findMachineFromNodeByProviderID``); its machine controller's ``drainNode`` and ``deleteNode``
(pkg/controller/machine/controller.go) then act on the nodeRef name alone. berthmaster checks
the providerID again before acting, since anyone who may write a Machine's status can name any
Node there.
"""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.operator.machines.nodes import not_owned
from berthmaster.operator.machines.providers.aws import KIND as AWS_KIND
from berthmaster.operator.machines.providers.kwok import KIND as KWOK_KIND
from berthmaster.operator.machines.providers.registry import enabled_providers


def node(provider_id: str | None) -> dict[str, Any]:
    spec = {} if provider_id is None else {"providerID": provider_id}
    return {"metadata": {"name": "worker-1"}, "spec": spec}


def machine(provider_id: str | None) -> dict[str, Any]:
    spec = {} if provider_id is None else {"providerID": provider_id}
    return {"metadata": {"name": "m", "namespace": "ns"}, "spec": spec,
            "status": {"nodeRef": {"kind": "Node", "name": "worker-1"}}}


@pytest.mark.parametrize(("node_id", "machine_id", "owned"), [
    ("kwok://ns/m", "kwok://ns/m", True),
    ("kwok://ns/other", "kwok://ns/m", False),
    (None, "kwok://ns/m", False),       # a Node no provider made (a control-plane node, say)
    ("kwok://ns/m", None, False),       # a Machine that never recorded its instance
    (None, None, False),                # nothing to compare: never trusted
    ("", "", False),
])
def test_only_the_node_with_the_machines_provider_id_is_owned(
        node_id: str | None, machine_id: str | None, owned: bool) -> None:
    assert (not_owned(node(node_id), machine(machine_id)) is None) is owned


def test_the_refusal_names_both_fields_and_the_fix() -> None:
    message = not_owned(node("kind://docker/control-plane"), machine("kwok://ns/m"))
    assert message == (
        "Node 'worker-1' named by Machine ns/m status.nodeRef has spec.providerID "
        "'kind://docker/control-plane', not the Machine's spec.providerID 'kwok://ns/m': it is "
        "not this Machine's Node, so it is neither drained nor deleted; correct status.nodeRef "
        "if it names the wrong Node")


def test_providers_follow_the_chart_value() -> None:
    kube: Any = object()
    assert list(enabled_providers(kube, None)) == [KWOK_KIND]
    assert list(enabled_providers(kube, "kwok")) == [KWOK_KIND]
    assert enabled_providers(kube, "") == {}
    # a cloud provider runs only when named (by name or by kind), never by default
    assert list(enabled_providers(kube, "kwok,aws")) == [KWOK_KIND, AWS_KIND]
    assert list(enabled_providers(kube, AWS_KIND)) == [AWS_KIND]
    with pytest.raises(ValueError, match=r"unknown machine provider\(s\) gcp; use a "
                                         r"comma-separated list of: aws, kubelet, kwok"):
        enabled_providers(kube, "kwok,gcp")
