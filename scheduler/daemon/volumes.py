"""VolumeBinding's Reserve, Unreserve and PreBind: the claims of a pod get their volumes before
the pod is bound.

As kube-scheduler 1.35 (``pkg/scheduler/framework/plugins/volumebinding/volume_binding.go``,
Reserve / PreBind / Unreserve, and ``binder.go``, AssumePodVolumes / BindPodVolumes /
bindAPIUpdate / checkBindings):

- **Reserve** (:meth:`VolumeBinder.reserve`, in the scheduling loop, right after the decision
  and before the next one): the pod's :class:`~berthmaster.scheduler.plugins.volume_binding.
  PodVolumes` for the chosen node are assumed in the snapshot: each matched static volume with
  ``spec.claimRef`` naming its claim (and ``pv.kubernetes.io/bound-by-controller: "yes"``),
  each claim to provision with ``volume.kubernetes.io/selected-node: <node>``. The next
  decision already sees the volume taken, so two pods never choose one static volume.
- **PreBind** (:meth:`VolumeBinder.pre_bind`, in the binder's task for the pod, before the
  Binding POST): the assumed objects are written with PUT carrying the resourceVersion they were
  read at (a volume another writer changed meanwhile is a 409 conflict, never a double bind);
  then, every second up to ``bind_timeout`` (upstream's ``bindTimeoutSeconds``, 600 s), the
  watched state is checked until kube-controller-manager's PV controller has bound every claim
  (``spec.volumeName`` and ``pv.kubernetes.io/bind-completed``) and, for provisioned claims, the
  provisioner created the volume. The wait holds no binding slot and blocks nothing else: it
  polls the snapshot, which the watches keep current. Only a leading replica writes
  (``may_act`` before every write).
- **Failure** (a write refused, the claim deleted, the PV's claimRef dropped, the provisioner
  removing ``selected-node``, the pod deleted, the timeout): :class:`PreBindError` carries
  upstream's message (``running PreBind plugin "VolumeBinding": binding volumes: ...``); the
  binder forgets the pod, **Unreserve** (:meth:`VolumeBinder.unreserve`) restores the assumed
  objects not yet replaced by newer ones, and the pod is requeued with that FailedScheduling
  Event. As upstream, nothing written to the API server is rolled back: the PV controller
  releases a volume whose claim is gone.

The decision itself never waits: a pod whose volumes are being bound is counted on its node as
any assumed pod is.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.foundation.logs import ObjectRef
from berthmaster.scheduler.framework import CycleState, Lifecycle
from berthmaster.scheduler.model import PodView
from berthmaster.scheduler.plugins import volume_binding as vb
from berthmaster.scheduler.snapshot import Snapshot, pod_key

JSON = dict[str, Any]
log = logging.getLogger("berthmaster.scheduler.volumes")

PV = "PersistentVolume"
PVC = "PersistentVolumeClaim"
DEFAULT_BIND_TIMEOUT_SECONDS = 600.0  # VolumeBindingArgs.bindTimeoutSeconds' default
POLL_SECONDS = 1.0  # BindPodVolumes polls every second
PLUGIN = "VolumeBinding"


class PreBindError(Exception):
    """PreBind failed; ``str()`` is kube-scheduler's FailedScheduling text.
    ``pod_gone``: the pod was deleted (nothing to requeue)."""

    def __init__(self, message: str, pod_gone: bool = False, plugin: str = PLUGIN):
        super().__init__(f'running PreBind plugin "{plugin}": {message}')
        self.pod_gone = pod_gone


class NotLeader(Exception):
    """This replica stopped leading before a PreBind write."""


@dataclass
class Reservation:
    """One pod's assumed volumes (upstream's PodVolumes after AssumePodVolumes)."""

    pod: JSON
    node: str
    static: list[tuple[JSON, vb.Obj]] = field(default_factory=list)  # (assumed PV, its claim)
    provisions: list[JSON] = field(default_factory=list)  # assumed claims
    # what PUT returned, by kind and key (checkBindings waits for the watch to catch up)
    written: dict[tuple[str, str], int] = field(default_factory=dict)


def _name(obj: vb.Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _version(obj: vb.Obj) -> int:
    try:
        return int(str((obj.get("metadata") or {}).get("resourceVersion")))
    except ValueError:
        return -1


class VolumeBinder:
    def __init__(self, kube: KubeClient, snapshot: Snapshot,
                 bind_timeout: float = DEFAULT_BIND_TIMEOUT_SECONDS,
                 poll: float = POLL_SECONDS):
        self.kube = kube
        self.snapshot = snapshot
        self.bind_timeout = bind_timeout
        self.poll = poll

    # ---- Reserve / Unreserve (the scheduling loop; synchronous) --------------------------------
    def reserve(self, pod: JSON, node: str) -> Reservation | None:
        """Assume the volumes ``pod`` takes on ``node``; None when it has nothing to bind (every
        claim bound, no claims, or no fit: then the filter, when configured, rejected the node;
        a Policy without CheckVolumeBinding leaves claims to others, as a profile without the
        plugin does)."""
        view = PodView.from_dict(pod)
        claims = vb.pod_volume_claims(view, self.snapshot)
        if not isinstance(claims, vb.PodVolumeClaims) or not claims.delayed:
            return None
        info = self.snapshot.node(node)
        if info is None:
            return None
        volumes, reasons = vb.find_pod_volumes(claims, self.snapshot, node, info.labels)
        if reasons or not volumes:
            return None
        res = Reservation(pod, node)
        try:
            for binding in volumes.static:
                assumed, dirty = vb.bind_volume_to_claim(binding.pv, binding.pvc)
                if dirty:
                    self.snapshot.assume_volume(PV, assumed)
                res.static.append((assumed, binding.pvc))
            for claim in volumes.provisions:
                assumed = vb.claim_with_selected_node(claim, node)
                self.snapshot.assume_volume(PVC, assumed)
                res.provisions.append(assumed)
        except (KeyError, ValueError):
            self.unreserve(res)
            log.exception("assuming volumes failed", extra={"pod": ObjectRef.of(pod)})
            return None
        return res

    def unreserve(self, res: Reservation) -> None:
        """RevertAssumedPodVolumes: restore what is still assumed."""
        for pv, _ in res.static:
            self.snapshot.restore_volume(PV, _name(pv))
        for claim in res.provisions:
            self.snapshot.restore_volume(PVC, vb.claim_key(claim))

    # ---- PreBind (the binder's task; asynchronous) --------------------------------------------
    async def pre_bind(self, res: Reservation, may_act: Callable[[], bool]) -> float:
        """BindPodVolumes: write, then wait until the PV controller has bound every claim.
        Returns the seconds waited after the writes. Raises PreBindError or NotLeader."""
        await self._write(res, may_act)
        started = time.monotonic()
        deadline = started + self.bind_timeout
        while True:
            # wait.PollUntilContextTimeout(..., immediate=false): the first check after a poll
            await asyncio.sleep(max(0.0, min(self.poll, deadline - time.monotonic())))
            if self._check(res):
                return time.monotonic() - started
            if time.monotonic() >= deadline:
                raise PreBindError("binding volumes: context deadline exceeded")

    async def _write(self, res: Reservation, may_act: Callable[[], bool]) -> None:
        """bindAPIUpdate: PUT each assumed PV, then each assumed claim; an error stops there
        (the objects not written are restored by the caller's unreserve)."""
        for pv, claim in res.static:
            if not may_act():
                raise NotLeader()
            log.info("updating PersistentVolume: binding to claim", extra={
                "pod": ObjectRef.of(res.pod), "pv": _name(pv), "pvc": vb.claim_key(claim)})
            written = await self._put(resource_path(CORE, "persistentvolumes", None, _name(pv)),
                                      pv, may_act)
            res.written[(PV, _name(pv))] = _version(written)
        for claim in res.provisions:
            if not may_act():
                raise NotLeader()
            meta = claim.get("metadata") or {}
            log.info("updating PersistentVolumeClaim: selected node", extra={
                "pod": ObjectRef.of(res.pod), "pvc": vb.claim_key(claim), "node": res.node})
            written = await self._put(resource_path(
                CORE, "persistentvolumeclaims", meta.get("namespace"), meta.get("name")), claim,
                may_act)
            res.written[(PVC, vb.claim_key(claim))] = _version(written)

    async def _put(self, path: str, body: JSON, may_act: Callable[[], bool]) -> JSON:
        # may_act again after the client's rate limiter wait (kube.py: fence)
        try:
            out: JSON = await self.kube.request("PUT", path, body=body, fence=may_act)
        except KubeError as error:
            if error.fenced:
                raise NotLeader() from error
            raise PreBindError(error.message or str(error)) from error
        return out

    def _check(self, res: Reservation) -> bool:
        """checkBindings against the watched (API) objects: True once every claim is fully
        bound; PreBindError when binding cannot complete any more."""
        pod = res.pod
        meta = pod.get("metadata") or {}
        info = self.snapshot.node(res.node)
        if info is None:
            raise PreBindError(f'binding volumes: failed to get node "{res.node}": '
                               f'node "{res.node}" not found')
        if self.snapshot.get_pod(pod_key(pod)) is None:
            raise PreBindError(f'binding volumes: pod does not exist any more: pods '
                               f'"{meta.get("name")}" not found', pod_gone=True)
        for pv, claim in res.static:
            name = _name(pv)
            api_pv = self.snapshot.api_volume(PV, name)
            if api_pv is None:
                raise PreBindError(f"binding volumes: failed to check binding: could not find "
                                   f'v1.PersistentVolume "{name}"')
            key = vb.claim_key(claim)
            api_pvc = self.snapshot.api_volume(PVC, key)
            if api_pvc is None:
                raise PreBindError(f"binding volumes: failed to check binding: could not find "
                                   f'v1.PersistentVolumeClaim "{key}"')
            if res.written.get((PV, name), -1) > _version(api_pv):
                return False  # the watch has not brought our write yet
            if not vb.volume_matches_node(api_pv, info.labels):
                raise PreBindError(f'binding volumes: pv "{name}" node affinity doesn\'t match '
                                   f'node "{res.node}": no matching NodeSelectorTerms')
            ref = (api_pv.get("spec") or {}).get("claimRef") or {}
            if not ref.get("uid"):
                raise PreBindError(f'binding volumes: ClaimRef got reset for pv "{name}"')
            if not vb.is_claim_fully_bound(api_pvc):
                return False
        for claim in res.provisions:
            key = vb.claim_key(claim)
            api_pvc = self.snapshot.api_volume(PVC, key)
            if api_pvc is None:
                raise PreBindError(f"binding volumes: failed to check provisioning pvc: could "
                                   f'not find v1.PersistentVolumeClaim "{key}"')
            if res.written.get((PVC, key), -1) > _version(api_pvc):
                return False
            annotations = (api_pvc.get("metadata") or {}).get("annotations")
            if annotations is None:
                raise PreBindError(f'binding volumes: selectedNode annotation reset for PVC '
                                   f'"{_name(api_pvc)}"')
            if annotations.get(vb.ANN_SELECTED_NODE) != res.node:
                # the provisioner removes the annotation to ask the scheduler to retry
                raise PreBindError(f'binding volumes: provisioning failed for PVC '
                                   f'"{_name(api_pvc)}"')
            volume_name = (api_pvc.get("spec") or {}).get("volumeName")
            if volume_name:
                api_pv = self.snapshot.api_volume(PV, volume_name)
                if api_pv is None:
                    return False  # not seen yet: tolerated, as upstream
                if not vb.volume_matches_node(api_pv, info.labels):
                    raise PreBindError(f'binding volumes: pv "{volume_name}" node affinity '
                                       f'doesn\'t match node "{res.node}": no matching '
                                       f'NodeSelectorTerms')
            if not vb.is_claim_fully_bound(api_pvc):
                return False
        return True


@dataclass
class VolumeBindingLifecycle(Lifecycle):
    """VolumeBinding's Reserve, Unreserve and PreBind as a
    :class:`~berthmaster.scheduler.framework.Lifecycle`: the :class:`Reservation` is kept in
    the cycle state under the plugin's name. PreBind raises :class:`PreBindError` or
    :class:`NotLeader` (the binder's failure paths)."""

    volumes: VolumeBinder | None = None
    may_act: Callable[[], bool] = lambda: True

    def reserve(self, state: CycleState, pod: JSON, node: str) -> None:
        assert self.volumes is not None
        reservation = self.volumes.reserve(pod, node)
        if reservation is not None:
            state[self.name] = reservation

    def unreserve(self, state: CycleState, pod: JSON, node: str) -> None:
        reservation = state.pop(self.name, None)
        if reservation is not None and self.volumes is not None:
            self.volumes.unreserve(reservation)

    async def pre_bind(self, state: CycleState, pod: JSON, node: str) -> None:
        reservation = state.get(self.name)
        if reservation is None or self.volumes is None:
            return
        waited = await self.volumes.pre_bind(reservation, self.may_act)
        log.info("volumes bound", extra={"pod": ObjectRef.of(pod), "node": ObjectRef(node),
                                         "seconds": round(waited, 3)})
