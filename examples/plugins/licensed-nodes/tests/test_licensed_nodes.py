"""LicensedNodes through berthmaster's plugin test kit: the profile loads it by its entry point
name (install the package first: ``pip install examples/plugins/licensed-nodes``)."""

from __future__ import annotations

import pytest

from berthmaster.foundation.errors import PolicyError
from berthmaster.scheduler.testing import profile_from_yaml, run_pod, snapshot_from_yaml

CLUSTER = """
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: plain
  status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
- apiVersion: v1
  kind: Node
  metadata:
    name: two-seats
    labels: {licenses.example.com/matlab: "2"}
  status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
- apiVersion: v1
  kind: Node
  metadata:
    name: eight-seats
    labels: {licenses.example.com/matlab: "8"}
  status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
"""

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    multiPoint:
      enabled: [{name: LicensedNodes, weight: 5}]
  pluginConfig:
  - name: LicensedNodes
    args: {minSeats: %d}
"""

MATLAB = """
apiVersion: v1
kind: Pod
metadata:
  name: solver
  labels: {licenses.example.com/product: matlab}
spec:
  containers: [{name: c, image: solver, resources: {requests: {cpu: 100m}}}]
"""


def test_a_licensed_pod_goes_to_the_node_with_the_most_seats() -> None:
    outcome = run_pod(MATLAB, snapshot_from_yaml(CLUSTER), profile_from_yaml(CONFIG % 1))
    assert outcome.node == "eight-seats"
    assert outcome.rejected_by("LicensedNodes") == {"plain"}
    assert outcome.filters["plain"]["LicensedNodes"] == "node(s) had no license for matlab"
    assert outcome.scores["eight-seats"]["LicensedNodes"] == 100
    assert outcome.scores["two-seats"]["LicensedNodes"] == 25


def test_min_seats_rejects_the_small_node_and_nothing_fits_without_a_license() -> None:
    outcome = run_pod(MATLAB, snapshot_from_yaml(CLUSTER), profile_from_yaml(CONFIG % 4))
    assert outcome.rejected_by("LicensedNodes") == {"plain", "two-seats"}
    other = MATLAB.replace("matlab", "fluent")
    nothing = run_pod(other, snapshot_from_yaml(CLUSTER), profile_from_yaml(CONFIG % 1))
    assert nothing.node is None
    assert nothing.message == "0/3 nodes are available: 3 node(s) had no license for fluent."


def test_a_pod_without_a_product_is_left_alone() -> None:
    plain = MATLAB.replace("labels: {licenses.example.com/product: matlab}", "labels: {}")
    outcome = run_pod(plain, snapshot_from_yaml(CLUSTER), profile_from_yaml(CONFIG % 1))
    assert outcome.rejected_by("LicensedNodes") == set()
    assert {row["LicensedNodes"] for row in outcome.scores.values()} == {0}


def test_bad_arguments_name_their_fields() -> None:
    bad = CONFIG.replace("{minSeats: %d}", "{minSeats: 0, licenseDomain: Not_A_Domain, x: 1}")
    with pytest.raises(PolicyError) as caught:
        profile_from_yaml(bad)
    text = str(caught.value)
    assert "profiles[0].pluginConfig[0].args.minSeats: Invalid value: 0: must be an integer " \
           "of at least 1" in text
    assert 'profiles[0].pluginConfig[0].args.licenseDomain: Invalid value: "Not_A_Domain": ' \
           "must be a DNS subdomain" in text
    assert 'profiles[0].pluginConfig[0].args.x: strict decoding error: unknown field "x"' in text
