"""CheckVolumeBinding (kube-scheduler: VolumeBinding), the filter half and the pure binding logic.

As kube-scheduler 1.35 (``pkg/scheduler/framework/plugins/volumebinding/volume_binding.go``
and ``binder.go``; the PV matching is ``k8s.io/component-helpers/storage/volume/
pv_helpers.go``, FindMatchingVolume):

- **PreFilter** (:func:`pod_volume_claims`): every claim the pod names (``persistentVolumeClaim``
  and generic ``ephemeral`` volumes, whose claim is ``<pod>-<volume>``) must exist, not be
  ``Lost`` nor being deleted; the claims are split into bound ones, unbound ones of a
  ``WaitForFirstConsumer`` class (delayed binding: the scheduler's job) and unbound immediate
  ones, which reject the pod on every node (``pod has unbound immediate
  PersistentVolumeClaims``). Each of these is UnschedulableAndUnresolvable.
- **Filter** (:func:`find_pod_volumes`, per node): a bound claim's volume must exist
  (``node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)``) and its
  ``spec.nodeAffinity`` match the node (``node(s) didn't match PersistentVolume's node
  affinity``); a delayed claim needs a static volume of its class (smallest first; size, access
  modes, volume mode, VolumeAttributesClass, selector, phase ``Available``, not deleted, not
  claimed by another claim, node affinity), or else dynamic provisioning: the class's
  provisioner is not ``kubernetes.io/no-provisioner`` and its ``allowedTopologies`` match the
  node (otherwise ``node(s) didn't find available persistent volumes to bind``). A claim that
  already carries ``volume.kubernetes.io/selected-node`` fits that node only.
- **Storage capacity** (:func:`has_enough_capacity`, binder.go hasEnoughCapacity): a claim to
  provision whose provisioner has a CSIDriver with ``storageCapacity: true`` needs a
  CSIStorageCapacity (any namespace) of the claim's class whose ``nodeTopology`` selects the
  node and whose ``maximumVolumeSize`` (or else ``capacity``) is at least the claim's storage
  request, in whole bytes rounded up as ``Quantity.Value()``; otherwise ``node(s) did not have
  enough free storage``. A provisioner without a CSIDriver, a driver that does not opt in, and
  a claim without a storage request are not checked. A capacity without ``nodeTopology`` is
  available nowhere.
  The outcome for the chosen node, a :class:`PodVolumes` (static bindings and claims to
  provision), is what Reserve assumes and PreBind writes (``scheduler/daemon/volumes.py``).
- **Score**: none. In 1.35 the capacity score (scorer.go) is behind the alpha feature gate
  StorageCapacityScoring, off by default: the plugin's PreScore skips and ``shape`` in
  VolumeBindingArgs is refused (``scheduler/config.py``), as upstream does with the gate off.
- Not done: in-tree to CSI translation of volumes' node affinity.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from berthmaster.foundation.keys import key_of, object_key
from berthmaster.scheduler.model import (
    NodeSelector,
    PodView,
    label_selector,
    node_selector_term,
    parse_quantity,
)
from berthmaster.scheduler.plugins.base import (
    Predicate,
    PrefilterResult,
    Status,
    unresolvable,
    unresolvable_for,
)
from berthmaster.scheduler.snapshot import Snapshot

Obj = Mapping[str, Any]

NAME = "CheckVolumeBinding"
ALIASES = ("VolumeBinding",)
# binder.go, ConflictReason constants (kube-scheduler 1.35)
REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
# volume_binding.go, PreFilter and podHasPVCs
REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
REASON_CLAIM_NOT_FOUND = 'persistentvolumeclaim "%s" not found'
REASON_EPHEMERAL_NOT_FOUND = ("waiting for ephemeral volume controller to create the "
                              'persistentvolumeclaim "%s"')
REASON_CLAIM_LOST = 'persistentvolumeclaim "%s" bound to non-existent persistentvolume "%s"'
REASON_CLAIM_DELETING = 'persistentvolumeclaim "%s" is being deleted'
# k8s.io/component-helpers/storage/volume/pv_helpers.go and helpers.go
NO_PROVISIONER = "kubernetes.io/no-provisioner"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


def volume_node_selector(pv: Obj) -> NodeSelector | None:
    required = (((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required"))
    if required is None:
        return None
    return NodeSelector(tuple(node_selector_term(t) for t in
                              required.get("nodeSelectorTerms") or ()))


def volume_matches_node(pv: Obj, labels: Mapping[str, str]) -> bool:
    """CheckNodeAffinity (component-helpers storage/volume/helpers.go): the volume's required
    node affinity against the node's labels. Upstream hands it a Node with labels only, so a
    ``matchFields`` term on ``metadata.name`` never matches; the same here."""
    sel = volume_node_selector(pv)
    return sel is None or sel.matches("", labels)


def _storage(obj: Obj | None, *path: str) -> Fraction:
    cur: Any = obj
    for p in path:
        cur = (cur or {}).get(p)
    return parse_quantity(cur) if cur is not None else Fraction(0)


def claim_class(pvc: Obj) -> str:
    """GetPersistentVolumeClaimClass: the beta annotation wins over spec.storageClassName."""
    ann = ((pvc.get("metadata") or {}).get("annotations") or {})
    beta = ann.get("volume.beta.kubernetes.io/storage-class")
    if beta is not None:
        return str(beta)
    return str((pvc.get("spec") or {}).get("storageClassName") or "")


def volume_class(pv: Obj) -> str:
    """GetPersistentVolumeClass: the beta annotation wins over spec.storageClassName."""
    ann = ((pv.get("metadata") or {}).get("annotations") or {})
    beta = ann.get("volume.beta.kubernetes.io/storage-class")
    if beta is not None:
        return str(beta)
    return str((pv.get("spec") or {}).get("storageClassName") or "")


def claim_key(pvc: Obj) -> str:
    return key_of(pvc, default_namespace="default")


def is_bound_to_claim(pv: Obj, pvc: Obj) -> bool:
    """IsVolumeBoundToClaim: the volume's claimRef names the claim (and its uid, when set)."""
    ref = (pv.get("spec") or {}).get("claimRef")
    if not ref:
        return False
    meta = pvc.get("metadata") or {}
    if ref.get("name") != meta.get("name") or ref.get("namespace") != meta.get("namespace"):
        return False
    return not ref.get("uid") or ref.get("uid") == meta.get("uid")


def is_claim_fully_bound(pvc: Obj) -> bool:
    """isPVCFullyBound: a volume name and the PV controller's bind-completed annotation."""
    ann = ((pvc.get("metadata") or {}).get("annotations") or {})
    return bool((pvc.get("spec") or {}).get("volumeName")) and ANN_BIND_COMPLETED in ann


def _access_modes_ok(pvc: Obj, pv: Obj) -> bool:
    have = set((pv.get("spec") or {}).get("accessModes") or ())
    return all(m in have for m in (pvc.get("spec") or {}).get("accessModes") or ())


def find_matching_volume(pvc: Obj, volumes: Sequence[Obj], labels: Mapping[str, str],
                         excluded: AbstractSet[str]) -> Obj | None:
    """FindMatchingVolume (pv_helpers.go) on the scheduler's path (a node given, delayed
    binding): the volume pre-bound to this claim if its node affinity fits (else nothing),
    otherwise the smallest available one that matches."""
    spec = pvc.get("spec") or {}
    want = _storage(spec, "resources", "requests", "storage")
    want_class = claim_class(pvc)
    want_mode = spec.get("volumeMode") or "Filesystem"
    want_vac = spec.get("volumeAttributesClassName") or ""
    raw_selector = spec.get("selector")
    selector = label_selector(raw_selector) if raw_selector else None
    smallest: Obj | None = None
    smallest_size = Fraction(0)
    for pv in volumes:
        meta = pv.get("metadata") or {}
        if meta.get("name") in excluded:
            continue
        pspec = pv.get("spec") or {}
        bound_here = is_bound_to_claim(pv, pvc)
        if pspec.get("claimRef") and not bound_here:
            continue
        size = _storage(pspec, "capacity", "storage")
        if size < want:
            continue
        if (pspec.get("volumeMode") or "Filesystem") != want_mode:
            continue
        if (pspec.get("volumeAttributesClassName") or "") != want_vac:
            continue
        if meta.get("deletionTimestamp"):
            continue
        affinity_ok = volume_matches_node(pv, labels)
        if bound_here:
            return pv if affinity_ok else None
        if ((pv.get("status") or {}).get("phase")) != "Available":
            continue
        if selector is not None and not selector.matches(meta.get("labels") or {}):
            continue
        if volume_class(pv) != want_class or not affinity_ok:
            continue
        if not _access_modes_ok(pvc, pv):
            continue
        if smallest is None or size < smallest_size:
            smallest, smallest_size = pv, size
    return smallest


def has_enough_capacity(snapshot: Snapshot, provisioner: str, pvc: Obj, class_name: str,
                        labels: Mapping[str, str]) -> bool:
    """hasEnoughCapacity (binder.go): see the module docstring."""
    requests = ((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}
    if requests.get("storage") is None:
        return True
    driver = snapshot.csi_drivers.get(provisioner)
    if driver is None or (driver.get("spec") or {}).get("storageCapacity") is not True:
        return True
    wanted = math.ceil(parse_quantity(requests["storage"]))
    for capacity in snapshot.csi_storage_capacities.values():
        if capacity.get("storageClassName") != class_name:
            continue
        limit = capacity.get("maximumVolumeSize")
        if limit is None:
            limit = capacity.get("capacity")
        if limit is None or math.ceil(parse_quantity(limit)) < wanted:
            continue
        topology = capacity.get("nodeTopology")
        if topology is not None and label_selector(topology).matches(labels):
            return True
    return False


def topology_matches(cls: Obj, labels: Mapping[str, str]) -> bool:
    """MatchTopologySelectorTerms (apis/core/v1/helper): no terms match every node; else some
    term whose every expression has the node's label value among its values."""
    terms = cls.get("allowedTopologies") or ()
    if not terms:
        return True
    for term in terms:
        exprs = term.get("matchLabelExpressions") or ()
        if all(labels.get(e.get("key", "")) in (e.get("values") or ()) for e in exprs):
            return True
    return False


@dataclass(frozen=True)
class StaticBinding:
    """A delayed claim matched to a pre-provisioned volume (BindingInfo)."""

    pv: Obj
    pvc: Obj


@dataclass(frozen=True)
class PodVolumes:
    """What Reserve assumes and PreBind writes for one node (binder.go, PodVolumes)."""

    static: tuple[StaticBinding, ...] = ()
    provisions: tuple[Obj, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.static or self.provisions)


@dataclass(frozen=True)
class PodVolumeClaims:
    """GetPodVolumeClaims: bound claims, delayed (WaitForFirstConsumer) unbound claims, and the
    candidate volumes of each delayed claim's class."""

    bound: tuple[Obj, ...] = ()
    delayed: tuple[Obj, ...] = ()
    volumes_by_class: Mapping[str, tuple[Obj, ...]] = field(default_factory=dict)


def _claim_names(pod: PodView) -> list[tuple[str, bool]]:
    out = []
    for v in pod.volumes:
        if v.kind == "pvc":
            out.append((v.ident, False))
        elif v.kind == "ephemeral":
            out.append((f"{pod.name}-{v.name}", True))  # ephemeral.VolumeClaimName
    return out


def pod_volume_claims(pod: PodView, snapshot: Snapshot) -> PodVolumeClaims | Status | None:
    """VolumeBinding's PreFilter: None when the pod names no claim (the plugin is skipped), a
    Status rejecting every node, or the pod's claims sorted for the per-node filter."""
    names = _claim_names(pod)
    if not names:
        return None
    claims: list[Obj] = []
    for name, ephemeral in names:
        pvc = snapshot.persistent_volume_claims.get(object_key(pod.namespace, name))
        if pvc is None:
            return unresolvable((REASON_EPHEMERAL_NOT_FOUND if ephemeral
                                 else REASON_CLAIM_NOT_FOUND) % name)
        if ((pvc.get("status") or {}).get("phase")) == "Lost":
            return unresolvable(REASON_CLAIM_LOST % (
                name, (pvc.get("spec") or {}).get("volumeName") or ""))
        if (pvc.get("metadata") or {}).get("deletionTimestamp"):
            return unresolvable(REASON_CLAIM_DELETING % name)
        claims.append(pvc)
    bound: list[Obj] = []
    delayed: list[Obj] = []
    for pvc in claims:
        if is_claim_fully_bound(pvc):
            bound.append(pvc)
            continue
        cls = snapshot.storage_classes.get(claim_class(pvc)) if claim_class(pvc) else None
        delay = cls is not None and cls.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER
        if delay and not (pvc.get("spec") or {}).get("volumeName"):
            delayed.append(pvc)
        else:  # immediate binding, or pre-bound to a volume: the PV controller's job
            return unresolvable(REASON_UNBOUND_IMMEDIATE)
    by_class: dict[str, tuple[Obj, ...]] = {}
    for pvc in delayed:
        cls_name = claim_class(pvc)
        if cls_name not in by_class:
            by_class[cls_name] = tuple(pv for pv in snapshot.persistent_volumes.values()
                                       if volume_class(pv) == cls_name)
    return PodVolumeClaims(tuple(bound), tuple(delayed), by_class)


def find_pod_volumes(claims: PodVolumeClaims, snapshot: Snapshot, node_name: str,
                     labels: Mapping[str, str]) -> tuple[PodVolumes, tuple[str, ...]]:
    """FindPodVolumes (binder.go) for one node: the bindings and provisions it would take, and
    the reasons it cannot (empty when the node fits)."""
    bound_ok = True
    bound_found = True
    unbound_ok = True
    enough_storage = True
    for pvc in claims.bound:
        pv = snapshot.persistent_volumes.get((pvc.get("spec") or {}).get("volumeName") or "")
        if pv is None:
            bound_ok, bound_found = True, False
            break
        if not volume_matches_node(pv, labels):
            bound_ok = False
            break
    static: list[StaticBinding] = []
    provisions: list[Obj] = []
    if claims.delayed:
        to_match: list[Obj] = []
        to_provision: list[Obj] = []
        for pvc in claims.delayed:
            ann = ((pvc.get("metadata") or {}).get("annotations") or {})
            if ANN_SELECTED_NODE in ann:
                if ann[ANN_SELECTED_NODE] != node_name:
                    return PodVolumes(), _reasons(bound_ok, False, bound_found, True)
                to_provision.append(pvc)
            else:
                to_match.append(pvc)
        if to_match:
            chosen: set[str] = set()
            # byPVCSize: the smallest requests choose first
            for pvc in sorted(to_match, key=lambda c: _storage(c.get("spec"), "resources",
                                                               "requests", "storage")):
                pv = find_matching_volume(pvc, claims.volumes_by_class.get(claim_class(pvc), ()),
                                          labels, chosen)
                if pv is None:
                    unbound_ok = False
                    to_provision.append(pvc)
                    continue
                chosen.add(str((pv.get("metadata") or {}).get("name")))
                static.append(StaticBinding(pv, pvc))
        if to_provision:
            unbound_ok = True  # checkVolumeProvisions decides, as upstream
            for pvc in to_provision:
                cls = snapshot.storage_classes.get(claim_class(pvc)) or {}
                provisioner = cls.get("provisioner") or ""
                if not provisioner or provisioner == NO_PROVISIONER \
                        or not topology_matches(cls, labels):
                    unbound_ok = False
                    provisions = []
                    break
                if not has_enough_capacity(snapshot, provisioner, pvc, claim_class(pvc), labels):
                    enough_storage = False
                    provisions = []
                    break
                provisions.append(pvc)
    reasons = _reasons(bound_ok, unbound_ok, bound_found, enough_storage)
    if reasons:
        return PodVolumes(), reasons
    return PodVolumes(tuple(static), tuple(provisions)), ()


def _reasons(bound_ok: bool, unbound_ok: bool, bound_found: bool,
             enough_storage: bool) -> tuple[str, ...]:
    """FindPodVolumes' reasons, in its order."""
    out = []
    if not bound_ok:
        out.append(REASON_NODE_CONFLICT)
    if not unbound_ok:
        out.append(REASON_BIND_CONFLICT)
    if not enough_storage:
        out.append(REASON_NOT_ENOUGH_SPACE)
    if not bound_found:
        out.append(REASON_PV_NOT_EXIST)
    return tuple(out)


def bind_volume_to_claim(pv: Obj, pvc: Obj) -> tuple[dict[str, Any], bool]:
    """GetBindVolumeToClaim (pv_helpers.go): a copy of ``pv`` with ``spec.claimRef`` naming
    ``pvc`` and, when it was not bound to it already, ``pv.kubernetes.io/bound-by-controller:
    "yes"``; and whether anything changed."""
    out: dict[str, Any] = copy.deepcopy(dict(pv))
    dirty = False
    already = is_bound_to_claim(pv, pvc)
    meta = pvc.get("metadata") or {}
    ref = (out.get("spec") or {}).get("claimRef") or {}
    if (ref.get("name"), ref.get("namespace"), ref.get("uid")) != (
            meta.get("name"), meta.get("namespace"), meta.get("uid")):
        out.setdefault("spec", {})["claimRef"] = {
            "kind": "PersistentVolumeClaim", "apiVersion": "v1",
            "namespace": meta.get("namespace"), "name": meta.get("name"),
            "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
        dirty = True
    annotations = out.setdefault("metadata", {}).setdefault("annotations", {})
    if not already and ANN_BOUND_BY_CONTROLLER not in annotations:
        annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
        dirty = True
    return out, dirty


def claim_with_selected_node(pvc: Obj, node_name: str) -> dict[str, Any]:
    """AssumePodVolumes for a claim to provision: a copy annotated with the chosen node."""
    out: dict[str, Any] = copy.deepcopy(dict(pvc))
    out.setdefault("metadata", {}).setdefault("annotations", {})[ANN_SELECTED_NODE] = node_name
    return out


@dataclass
class VolumeBinding(Predicate):
    NAME = NAME
    ALIASES = ALIASES
    EVENTS = ("PersistentVolume/Add", "PersistentVolumeClaim/Add", "StorageClass/Add",
              "Node/Add", "CSIDriver/Update", "CSIStorageCapacity/Add",
              "CSIStorageCapacity/Update")

    def prefilter(self, pod: PodView, snapshot: Snapshot) -> PrefilterResult:
        claims = pod_volume_claims(pod, snapshot)
        if claims is None or isinstance(claims, Status):
            return claims
        if not claims.delayed and not claims.bound:
            return None
        return unresolvable_for(
            lambda node: find_pod_volumes(claims, snapshot, node.name, node.labels)[1])
