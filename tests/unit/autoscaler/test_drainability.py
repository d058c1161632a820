"""One pod's drainability verdict, as upstream cluster-autoscaler's default rules give it."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.operator.autoscaler.config import AutoscalerConfig
from berthmaster.operator.autoscaler.drainability import PdbBudget, Verdict, classify
from tests.unit.autoscaler.builders import make_pod

JSON = dict[str, Any]
NOT_SAFE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
SAFE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}


def verdict(pod: JSON, pdbs: list[JSON] | None = None) -> Verdict:
    return classify(pod, AutoscalerConfig(), PdbBudget(pdbs or []), 0)


@pytest.mark.parametrize("kind", ["ReplicaSet", "ReplicationController", "Job", "StatefulSet"])
def test_pods_of_replicating_controllers_move(kind: str) -> None:
    """cluster-autoscaler simulator/drainability/rules/replicated/rule.go ``replicatedKind``."""
    assert verdict(make_pod("p", owner=kind)).action == "move"


@pytest.mark.parametrize("kind", ["Workflow", "CronJob", "Deployment", "VirtualMachineInstance"])
def test_a_pod_of_another_controller_kind_is_not_replicated(kind: str) -> None:
    """cluster-autoscaler simulator/drainability/rules/replicated/rule.go: with the default
    ``--skip-nodes-with-custom-controller-pods=true`` (config/flags/flags.go) a controller of any
    kind but ReplicationController, Job, ReplicaSet and StatefulSet does not count as
    replication: the pod blocks with ``NotReplicated``, "<namespace>/<name> is not
    replicated"."""
    assert verdict(make_pod("p", owner=kind)) == Verdict(
        "block", "NotReplicated", "ns/p is not replicated")
    assert verdict(make_pod("p", owner=kind, annotations=SAFE)).action == "move"


def test_blocking_rules_apply_in_upstream_order_with_upstream_messages() -> None:
    """cluster-autoscaler simulator/drainability/rules/rules.go ``Default``: replicated, then
    system, then notsafetoevict, then localstorage; the system, notsafetoevict and localstorage
    rules name the pod by its name alone (rules/system, rules/notsafetoevict,
    rules/localstorage)."""
    bare_not_safe = make_pod("p", owner=None, annotations=NOT_SAFE)
    assert verdict(bare_not_safe).reason == "NotReplicated"
    system_not_safe = make_pod("dns", namespace="kube-system", annotations=NOT_SAFE)
    assert verdict(system_not_safe) == Verdict(
        "block", "UnmovableKubeSystemPod",
        "non-daemonset, non-mirrored, non-pdb-assigned kube-system pod present: dns")
    assert verdict(make_pod("p", annotations=NOT_SAFE)) == Verdict(
        "block", "NotSafeToEvictAnnotation", "pod annotated as not safe to evict present: p")
    local = make_pod("p", volumes=[{"name": "scratch", "emptyDir": {}}])
    assert verdict(local) == Verdict("block", "LocalStorageRequested",
                                     "pod with local storage present: p")


def test_kube_system_pod_without_a_pdb_blocks_for_its_first_hour() -> None:
    """cluster-autoscaler config/flags/flags.go: ``--skip-nodes-with-system-pods`` (true) makes
    the autoscaler "wait for --blocking-system-pod-distruption-timeout" (one hour) before
    deleting a node with a kube-system pod no PDB covers (rules/system/rule.go, from 1.33: the
    hour runs from the pod's creation); a PDB covering it lets it move at once."""
    created = 1_700_000_000.0
    dns = make_pod("dns", namespace="kube-system")
    dns["metadata"]["creationTimestamp"] = "2023-11-14T22:13:20Z"  # == created
    young = classify(dns, AutoscalerConfig(), PdbBudget([]), 0, created + 59 * 60)
    assert young.reason == "UnmovableKubeSystemPod"
    old = classify(dns, AutoscalerConfig(), PdbBudget([]), 0, created + 60 * 60)
    assert old.action == "move"
    budget = {"metadata": {"name": "dns", "namespace": "kube-system"},
              "spec": {"selector": {"matchLabels": {"app": "dns"}}},
              "status": {"disruptionsAllowed": 1}}
    assert classify(dns, AutoscalerConfig(), PdbBudget([budget]), 0, created).action == "move"


def test_daemonset_pod_is_ignored_even_when_annotated_safe_to_evict() -> None:
    """cluster-autoscaler simulator/drainability/rules/rules.go ``Default``: the daemonset rule
    comes before safetoevict, so a DaemonSet pod goes with its node and is never moved."""
    assert verdict(make_pod("agent", owner="DaemonSet", annotations=SAFE)).action == "ignore"
