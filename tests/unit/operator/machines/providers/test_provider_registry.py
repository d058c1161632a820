"""Providers load from entry points in ``berthmaster.machine_providers``, named by kind."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any

import pytest

from berthmaster.operator.machines.providers import registry
from berthmaster.operator.machines.providers.aws import AWSProvider
from berthmaster.operator.machines.providers.kwok import KwokProvider
from berthmaster.tooling.kubelet_provider import KubeletProvider


def test_berthmaster_registers_kwok_aws_and_kubelet_by_their_kinds() -> None:
    assert registry.installed() == {"KwokMachineProviderSpec": KwokProvider,
                                    "AWSMachineProviderConfig": AWSProvider,
                                    "KubeletMachineProviderSpec": KubeletProvider}


def test_an_entry_point_named_for_another_kind_is_refused() -> None:
    point = EntryPoint("GCPMachineProviderSpec",
                       "berthmaster.operator.machines.providers.kwok:KwokProvider", registry.GROUP)
    with pytest.raises(RuntimeError, match="implements kind 'KwokMachineProviderSpec'; register "
                                           "it by its kind"):
        registry.load([point])


def test_an_entry_point_that_does_not_import_names_itself() -> None:
    point = EntryPoint("X", "no_such_module_here:Provider", registry.GROUP)
    with pytest.raises(RuntimeError, match=r"machine provider X \(no_such_module_here:Provider"):
        registry.load([point])


def test_only_kwok_runs_by_default() -> None:
    kube: Any = object()
    assert list(registry.enabled_providers(kube, None)) == ["KwokMachineProviderSpec"]


def test_template_capacity_asks_the_provider_of_the_kind() -> None:
    aws = {"kind": "AWSMachineProviderConfig", "instanceType": "m5.xlarge"}
    assert registry.template_capacity(aws) == {"cpu": "4", "memory": "16384Mi"}
    assert registry.template_capacity({"kind": "AWSMachineProviderConfig",
                                       "instanceType": "z9.none"}) is None
    assert registry.template_capacity({"kind": "Unknown"}) is None


def test_the_health_checks_follow_the_same_setting() -> None:
    assert registry.enabled_kinds(None) == {"KwokMachineProviderSpec"}
    assert registry.enabled_kinds("kwok,aws") == {"KwokMachineProviderSpec",
                                                  "AWSMachineProviderConfig"}
    assert registry.enabled_kinds("") == frozenset()


@pytest.mark.parametrize(("dist", "module", "missing", "skipped"), [
    # the image leaves berthmaster.tooling out: its entry point is skipped, not an error
    ("berthmaster", "berthmaster.tooling.kubelet_provider", "berthmaster.tooling", True),
    ("berthmaster", "berthmaster.tooling.kubelet_provider",
     "berthmaster.tooling.kubelet_provider", True),
    # the module is there but one of its own imports is missing: a broken install
    ("berthmaster", "berthmaster.tooling.kubelet_provider", "cryptography", False),
    # a component's provider missing is never expected
    ("berthmaster", "berthmaster.operator.machines.providers.aws", "berthmaster.operator", False),
    # another distribution's provider missing is that package's broken install
    ("acme-provider", "berthmaster.tooling.kubelet_provider", "berthmaster.tooling", False),
])
def test_only_the_tooling_the_image_leaves_out_is_skipped(dist: str, module: str, missing: str,
                                                         skipped: bool) -> None:
    assert registry.left_out_of_this_build(dist, module, missing) is skipped
