"""The storage part of a differential scenario: classes, volumes, claims and CSI objects.

A share of the small scenarios (:data:`VOLUME_SHARE` of those with up to eight nodes; drawn from
its own random stream, so the rest of every scenario is what it was without volumes) carries:

- four StorageClasses (storage.k8s.io/v1): :data:`LOCAL` (``kubernetes.io/no-provisioner``,
  WaitForFirstConsumer), :data:`IMMEDIATE` (no-provisioner, Immediate, and never any volume of
  it: its claims stay unbound), :data:`CSI` (WaitForFirstConsumer, provisioner
  :data:`CSI_DRIVER`, whose CSIDriver sometimes publishes storage capacity) and :data:`PLAIN`
  (WaitForFirstConsumer, provisioner :data:`CSI_PLAIN`, no CSIDriver); the two CSI classes
  sometimes with ``allowedTopologies`` on zones;
- local PersistentVolumes of :data:`LOCAL`, each with node affinity on one node's hostname,
  Available;
- CSINodes with an allocatable volume count per driver for some nodes, CSIStorageCapacities of
  :data:`CSI` on some nodes' hostname or zone;
- for each incoming pod, sometimes, one or two claims in its namespace, each of one kind:
  ``bound`` (to a volume of its own on some node, whose claimRef names it: the PV controller
  completes the binding as it does a scheduler's; its volume sometimes labelled with a zone,
  mostly the node's, for VolumeZone),
  ``static`` (:data:`LOCAL`: a local volume has to match), ``dynamic`` (:data:`CSI` or
  :data:`PLAIN`: provisioned where topology, capacity and the CSI volume limit allow),
  ``immediate``, ``no-class`` (naming a StorageClass that does not exist) or ``missing`` (no
  claim at all).

Every object carries the label :data:`VOLUME_LABEL` (cluster-scoped names start with
``diff-``), so the harness finds and removes them all. ``build`` is pure.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]

VOLUME_SHARE = 0.12
VOLUME_LABEL = {"berthmaster.test/differential": "volumes"}
LOCAL, IMMEDIATE, CSI, PLAIN = "diff-local", "diff-immediate", "diff-csi", "diff-csi-plain"
ABSENT_CLASS = "diff-absent"
CSI_DRIVER = "diff.csi.berthmaster.test"
CSI_PLAIN = "diff-plain.csi.berthmaster.test"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
CAPACITY_NAMESPACE = "diff-a"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
SIZES = ("1Gi", "2Gi", "5Gi", "10Gi")
CLAIM_KINDS = ("bound", "bound", "static", "static", "dynamic", "dynamic", "dynamic",
               "immediate", "no-class", "missing")


@dataclass
class Volumes:
    """A scenario's storage objects, in creation order, and what each incoming pod mounts."""

    classes: list[JSON] = field(default_factory=list)
    drivers: list[JSON] = field(default_factory=list)
    csi_nodes: list[JSON] = field(default_factory=list)
    capacities: list[JSON] = field(default_factory=list)
    claims: list[JSON] = field(default_factory=list)
    volumes: list[JSON] = field(default_factory=list)

    def objects(self) -> list[JSON]:
        return [*self.classes, *self.drivers, *self.csi_nodes, *self.capacities, *self.claims,
                *self.volumes]

    def describe(self) -> list[str]:
        lines = []
        for cls in self.classes:
            lines.append(f"  class {cls['metadata']['name']} {cls['provisioner']} "
                         f"{cls['volumeBindingMode']} "
                         f"topologies={cls.get('allowedTopologies')}")
        for driver in self.drivers:
            lines.append(f"  csidriver {driver['metadata']['name']} {driver['spec']}")
        for node in self.csi_nodes:
            lines.append(f"  csinode {node['metadata']['name']} {node['spec']['drivers']}")
        for cap in self.capacities:
            lines.append(f"  capacity {cap['metadata']['name']} {cap['storageClassName']} "
                         f"topology={cap.get('nodeTopology')} capacity={cap.get('capacity')} "
                         f"max={cap.get('maximumVolumeSize')}")
        for claim in self.claims:
            lines.append(f"  claim {claim['metadata']['namespace']}/"
                         f"{claim['metadata']['name']} {claim['spec']}")
        for pv in self.volumes:
            lines.append(f"  pv {pv['metadata']['name']} labels={pv['metadata']['labels']} "
                         f"{pv['spec']}")
        return lines


def _meta(name: str, namespace: str | None = None, **labels: str) -> JSON:
    meta: JSON = {"name": name, "labels": {**VOLUME_LABEL, **labels}}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _class(name: str, provisioner: str, mode: str, topologies: list[str] | None = None
           ) -> JSON:
    out: JSON = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                 "metadata": _meta(name), "provisioner": provisioner,
                 "volumeBindingMode": mode, "reclaimPolicy": "Retain"}
    if topologies:
        out["allowedTopologies"] = [{"matchLabelExpressions": [
            {"key": ZONE, "values": topologies}]}]
    return out


def local_volume(name: str, cls: str, node: str, size: str, zone: str | None = None,
                 claim: JSON | None = None) -> JSON:
    """A local PersistentVolume on ``node`` (the harness's provisioner makes these too)."""
    labels = {ZONE: zone} if zone else {}
    spec: JSON = {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                  "persistentVolumeReclaimPolicy": "Retain", "storageClassName": cls,
                  "local": {"path": f"/mnt/{name}"},
                  "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": HOSTNAME, "operator": "In", "values": [node]}]}]}}}
    if claim is not None:
        spec["claimRef"] = claim
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": _meta(name, **labels),
            "spec": spec}


def _claim(name: str, namespace: str, cls: str, size: str) -> JSON:
    spec: JSON = {"accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                  "resources": {"requests": {"storage": size}}}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": _meta(name, namespace), "spec": spec}


def build(seed: int, index: int, nodes: list[tuple[str, dict[str, str]]],
          incoming: list[JSON], zones: tuple[str, ...]) -> Volumes | None:
    """The storage of scenario ``index`` (None for most); gives claims to ``incoming`` pods
    (their ``spec.volumes``). ``nodes``: (name, labels) of the scenario's nodes."""
    rng = random.Random(f"{seed}:{index}:volumes")
    if len(nodes) > 8 or rng.random() >= VOLUME_SHARE:
        return None
    out = Volumes()

    def topologies() -> list[str] | None:
        return rng.sample(zones, rng.choice((1, 2))) if rng.random() < 0.35 else None

    out.classes = [_class(LOCAL, NO_PROVISIONER, "WaitForFirstConsumer"),
                   _class(IMMEDIATE, NO_PROVISIONER, "Immediate"),
                   _class(CSI, CSI_DRIVER, "WaitForFirstConsumer", topologies()),
                   _class(PLAIN, CSI_PLAIN, "WaitForFirstConsumer", topologies())]
    out.drivers = [{"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
                    "metadata": _meta(CSI_DRIVER),
                    "spec": {"attachRequired": False,
                             "storageCapacity": rng.random() < 0.7}}]
    for name, _ in nodes:
        drivers = []
        for driver in (CSI_DRIVER, CSI_PLAIN):
            if rng.random() < 0.6:
                entry: JSON = {"name": driver, "nodeID": name}
                if rng.random() < 0.8:
                    entry["allocatable"] = {"count": rng.choice((0, 1, 2, 3))}
                drivers.append(entry)
        if drivers:
            out.csi_nodes.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                                  "metadata": _meta(name), "spec": {"drivers": drivers}})
    for i, (name, labels) in enumerate(nodes):
        if rng.random() >= 0.6:
            continue
        if ZONE in labels and rng.random() < 0.3:
            topology: JSON = {"matchLabels": {ZONE: labels[ZONE]}}
        else:
            topology = {"matchLabels": {HOSTNAME: name}}
        cap: JSON = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                     "metadata": _meta(f"diff-cap-{i}", CAPACITY_NAMESPACE),
                     "storageClassName": CSI, "nodeTopology": topology,
                     "capacity": rng.choice(SIZES)}
        if rng.random() < 0.3:
            cap["maximumVolumeSize"] = rng.choice(SIZES)
        out.capacities.append(cap)
    for i in range(rng.randint(0, 2 * len(nodes))):
        name, _ = rng.choice(nodes)
        out.volumes.append(local_volume(f"diff-pv-{i}", LOCAL, name, rng.choice(SIZES)))
    for pod in incoming:
        if rng.random() >= 0.8:
            continue
        meta = pod["metadata"]
        mounts = []
        for j in range(rng.choice((1, 1, 2))):
            claim = f"{meta['name']}-data{j}"
            mounts.append({"name": f"data{j}", "persistentVolumeClaim": {"claimName": claim}})
            _add_claim(rng, out, rng.choice(CLAIM_KINDS), claim, meta["namespace"], nodes,
                       zones)
        pod["spec"]["volumes"] = mounts
    return out


def _add_claim(rng: random.Random, out: Volumes, kind: str, name: str, namespace: str,
               nodes: list[tuple[str, dict[str, str]]], zones: tuple[str, ...]) -> None:
    size = rng.choice(SIZES[:3])
    if kind == "missing":
        return
    if kind == "bound":
        node, labels = rng.choice(nodes)
        volume = f"diff-pv-{namespace}-{name}"
        # VolumeZone: mostly the node's own zone, sometimes another
        roll = rng.random()
        zone = labels.get(ZONE) if roll < 0.4 else rng.choice(zones) if roll < 0.55 else None
        out.claims.append(_claim(name, namespace, LOCAL, size))
        out.volumes.append(local_volume(volume, LOCAL, node, size, zone, claim={
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace,
            "name": name}))
        return
    cls = {"static": LOCAL, "immediate": IMMEDIATE, "no-class": ABSENT_CLASS,
           "dynamic": rng.choice((CSI, CSI, PLAIN))}[kind]
    out.claims.append(_claim(name, namespace, cls, size))
