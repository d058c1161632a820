"""The CRDs' names as kubectl sees them: short names are upstream's and never shared."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

CRDS = Path(__file__).resolve().parents[4] / "deploy" / "crds"


def names_of(kind: str) -> dict[str, Any]:
    for path in sorted(CRDS.glob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        if document["spec"]["names"]["kind"] == kind:
            return dict(document["spec"]["names"])
    raise AssertionError(f"no CRD for {kind} in {CRDS}")


def test_no_two_crds_share_a_short_name() -> None:
    """A short name declared twice makes ``kubectl get <it>`` ambiguous (kubectl picks one)."""
    counts = Counter(short for path in sorted(CRDS.glob("*.yaml"))
                     for short in yaml.safe_load(path.read_text())["spec"]["names"]
                     .get("shortNames") or [])
    assert [name for name, count in counts.items() if count > 1] == []


@pytest.mark.parametrize("kind", ["Machine", "MachineSet"])
def test_machine_api_kinds_have_no_short_names(kind: str) -> None:
    """openshift/api machine/v1beta1 zz_generated.crd-manifests
    (0000_10_machine-api_01_machines-Default.crd.yaml, ..._machinesets-Default.crd.yaml):
    ``spec.names`` declares no shortNames for Machine or MachineSet; ``ma`` belongs to
    MachineAutoscaler (openshift/cluster-autoscaler-operator
    install/02_machineautoscaler.crd.yaml)."""
    assert "shortNames" not in names_of(kind)


def test_machine_autoscaler_keeps_ma() -> None:
    assert names_of("MachineAutoscaler")["shortNames"] == ["ma"]


def test_machine_health_check_short_names_and_columns_are_upstreams() -> None:
    """openshift/api machine/v1beta1 types_machinehealthcheck.go: shortName=mhc;mhcs and the
    MaxUnhealthy / ExpectedMachines / CurrentHealthy printer columns."""
    assert names_of("MachineHealthCheck")["shortNames"] == ["mhc", "mhcs"]
    document = yaml.safe_load((CRDS / "machine.openshift.io_machinehealthchecks.yaml").read_text())
    columns = [(c["name"], c["type"], c["jsonPath"])
               for c in document["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert columns == [("MaxUnhealthy", "string", ".spec.maxUnhealthy"),
                       ("ExpectedMachines", "integer", ".status.expectedMachines"),
                       ("CurrentHealthy", "integer", ".status.currentHealthy")]
