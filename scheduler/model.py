"""Typed, read-only views over raw pod and node dicts, and the matching rules they obey.

Pods and nodes arrive as the API server's JSON (or a file's YAML). The engine never mutates
them: ``PodView.from_dict`` / ``NodeView.from_dict`` read every field the placement rules need
once, normalise it (quantities become integers: CPU in millicores, everything else in units,
rounded up as the API server's ``MilliValue``/``Value`` do) and keep it in ``__slots__``. A view
is built once per object version and reused by every decision (the snapshot stores views; a
cache keyed by uid and resourceVersion serves repeated ``from_dict`` calls for as long as
something holds the view: its values are weak references, so it never keeps the view of a
deleted pod or of an earlier version alive).

The matching helpers here are the single truth for selectors and tolerations, used by the
predicates, the priorities, the descheduler and the autoscaler:

- label selectors (``matchLabels`` + ``matchExpressions`` In/NotIn/Exists/DoesNotExist);
- node selector terms (ORed terms, ANDed expressions, Gt/Lt numeric, ``matchFields`` on
  ``metadata.name``; an empty term matches nothing);
- tolerations (an empty key with Exists matches every taint, an empty effect every effect, the
  operator defaults to Equal).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Generic, TypeVar

from berthmaster.foundation.keys import object_key
from berthmaster.scheduler.pod_resources import pod_requests

# quantities are re-exported: the model's users have always read them from here
from berthmaster.scheduler.quantities import CPU as CPU
from berthmaster.scheduler.quantities import DEFAULT_MEMORY_REQUEST as DEFAULT_MEMORY_REQUEST
from berthmaster.scheduler.quantities import DEFAULT_MILLI_CPU_REQUEST as DEFAULT_MILLI_CPU_REQUEST
from berthmaster.scheduler.quantities import EPHEMERAL_STORAGE as EPHEMERAL_STORAGE
from berthmaster.scheduler.quantities import MEMORY as MEMORY
from berthmaster.scheduler.quantities import PODS as PODS
from berthmaster.scheduler.quantities import QuantityError as QuantityError
from berthmaster.scheduler.quantities import parse_quantity as parse_quantity
from berthmaster.scheduler.quantities import quantity_value as quantity_value
from berthmaster.scheduler.quantities import resource_list as resource_list

Obj = Mapping[str, Any]

SYSTEM_NODE_CRITICAL = 2000001000
SYSTEM_CLUSTER_CRITICAL = 2000000000
SYSTEM_PRIORITY_CLASSES = {
    "system-node-critical": SYSTEM_NODE_CRITICAL,
    "system-cluster-critical": SYSTEM_CLUSTER_CRITICAL,
}

# --------------------------------------------------------------------------------------------
# Label selectors, node selectors, tolerations
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            v = labels.get(self.key)
            return v is not None and v in self.values
        if op == "NotIn":
            v = labels.get(self.key)
            return v is None or v not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        if op in ("Gt", "Lt"):
            v = labels.get(self.key)
            if v is None or len(self.values) != 1:
                return False
            try:
                have, want = int(v), int(next(iter(self.values)))
            except ValueError:
                return False
            return have > want if op == "Gt" else have < want
        return False  # an operator the API would reject matches nothing


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector. ``None`` selectors are represented by ``NOTHING``."""

    requirements: tuple[Requirement, ...]
    matches_nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.matches_nothing:
            return False
        for r in self.requirements:  # noqa: SIM110 - a plain loop is faster on the hot path
            if not r.matches(labels):
                return False
        return True

    @property
    def empty(self) -> bool:
        return not self.requirements and not self.matches_nothing


NOTHING = LabelSelector((), matches_nothing=True)
EVERYTHING = LabelSelector(())
# the operators of a metav1.LabelSelector's matchExpressions (Gt/Lt are node selectors' only)
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _requirement(expr: Obj) -> Requirement:
    values = expr.get("values") or ()
    return Requirement(str(expr.get("key", "")), str(expr.get("operator", "")),
                       frozenset(str(v) for v in values))


def label_selector(raw: Obj | None, *, none_matches: bool = False) -> LabelSelector:
    """Compile a metav1.LabelSelector; a null selector matches nothing unless told otherwise."""
    if raw is None:
        return EVERYTHING if none_matches else NOTHING
    reqs = [Requirement(str(k), "In", frozenset((str(v),)))
            for k, v in (raw.get("matchLabels") or {}).items()]
    for expr in raw.get("matchExpressions") or ():
        r = _requirement(expr)
        if r.operator not in SELECTOR_OPERATORS:
            return NOTHING
        reqs.append(r)
    return LabelSelector(tuple(reqs))


def selector_from_map(raw: Mapping[str, str] | None) -> LabelSelector:
    """A Service/ReplicationController style selector (a plain map); empty selects nothing."""
    if not raw:
        return NOTHING
    return LabelSelector(tuple(Requirement(str(k), "In", frozenset((str(v),)))
                               for k, v in raw.items()))


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    expressions: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False
        for r in self.expressions:
            if not r.matches(labels):
                return False
        for f in self.fields:  # noqa: SIM110
            if not f.matches({"metadata.name": name}):
                return False
        return True


def node_selector_term(raw: Obj | None) -> NodeSelectorTerm:
    raw = raw or {}
    expressions = tuple(_requirement(e) for e in raw.get("matchExpressions") or ())
    fields = []
    for f in raw.get("matchFields") or ():
        r = _requirement(f)
        # only metadata.name with In/NotIn is a valid field selector; anything else never matches
        if r.key != "metadata.name" or r.operator not in ("In", "NotIn"):
            r = Requirement(r.key, "Invalid", r.values)
        fields.append(r)
    return NodeSelectorTerm(expressions, tuple(fields))


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """requiredDuringSchedulingIgnoredDuringExecution: terms ORed."""

    terms: tuple[NodeSelectorTerm, ...]

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        for t in self.terms:  # noqa: SIM110
            if t.matches(name, labels):
                return True
        return False


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str
    seconds: int | None

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{{{self.key}: {self.value}}}"


def taint_from_dict(raw: Obj) -> Taint:
    return Taint(str(raw.get("key", "")), str(raw.get("value") or ""), str(raw.get("effect", "")))


def toleration_from_dict(raw: Obj) -> Toleration:
    seconds = raw.get("tolerationSeconds")
    return Toleration(str(raw.get("key") or ""), str(raw.get("operator") or ""),
                      str(raw.get("value") or ""), str(raw.get("effect") or ""),
                      None if seconds is None else int(seconds))


def tolerates_all(tolerations: Sequence[Toleration], taints: Iterable[Taint]) -> Taint | None:
    """The first taint none of ``tolerations`` tolerates, or None when all are tolerated."""
    for taint in taints:
        for t in tolerations:
            if t.tolerates(taint):
                break
        else:
            return taint
    return None


def noexecute_eviction_delay(pod: Obj | PodView, taints: Iterable[Obj | Taint]) -> int | None:
    """How long ``pod`` may stay on a node carrying ``taints`` (taint-based eviction).

    ``None``: never evicted (no NoExecute taint, or every one tolerated without
    tolerationSeconds). ``0``: evict now (an untolerated NoExecute taint, or a matching
    toleration with tolerationSeconds <= 0). Otherwise the smallest tolerationSeconds among the
    tolerations used, in seconds.
    """
    view = pod if isinstance(pod, PodView) else PodView.from_dict(pod)
    minimum: int | None = None
    for raw in taints:
        taint = raw if isinstance(raw, Taint) else taint_from_dict(raw)
        if taint.effect != "NoExecute":
            continue
        used = next((t for t in view.tolerations if t.tolerates(taint)), None)
        if used is None:
            return 0
        if used.seconds is not None:
            if used.seconds <= 0:
                return 0
            minimum = used.seconds if minimum is None else min(minimum, used.seconds)
    return minimum


# --------------------------------------------------------------------------------------------
# Pod affinity terms, topology spread, volumes
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A PodAffinityTerm with its namespaces resolved as far as the pod alone allows.

    ``namespaces`` empty and ``namespace_selector`` None means "the pod's own namespace" (already
    folded into ``namespaces``). A non-None ``namespace_selector`` is resolved against the
    snapshot's namespaces at decision time (empty selector: every namespace).
    """

    selector: LabelSelector
    topology_key: str
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    weight: int = 0

    def matches_namespace(self, namespace: str, namespace_labels: Mapping[str, str] | None) -> bool:
        if namespace in self.namespaces:
            return True
        if self.namespace_selector is None:
            return False
        return self.namespace_selector.matches(namespace_labels or {})

    @property
    def identity(self) -> tuple[Any, ...]:
        return (self.selector, self.topology_key, self.namespaces, self.namespace_selector)


def affinity_term(raw: Obj, pod_namespace: str, pod_labels: Mapping[str, str],
                  weight: int = 0) -> AffinityTerm:
    selector = label_selector(raw.get("labelSelector"))
    extra: list[Requirement] = []
    for key in raw.get("matchLabelKeys") or ():
        if key in pod_labels:
            extra.append(Requirement(key, "In", frozenset((pod_labels[key],))))
    for key in raw.get("mismatchLabelKeys") or ():
        if key in pod_labels:
            extra.append(Requirement(key, "NotIn", frozenset((pod_labels[key],))))
    if extra and not selector.matches_nothing:
        selector = LabelSelector(selector.requirements + tuple(extra))
    namespaces = frozenset(str(n) for n in raw.get("namespaces") or ())
    ns_raw = raw.get("namespaceSelector")
    ns_selector = None if ns_raw is None else label_selector(ns_raw)
    if not namespaces and ns_selector is None:
        namespaces = frozenset((pod_namespace,))
    return AffinityTerm(selector, str(raw.get("topologyKey", "")), namespaces, ns_selector,
                        weight)


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    selector: LabelSelector
    min_domains: int | None
    node_affinity_policy: str  # Honor | Ignore
    node_taints_policy: str  # Honor | Ignore


@dataclass(frozen=True, slots=True)
class Volume:
    """The parts of a pod volume the volume predicates look at."""

    name: str
    kind: str  # gcePersistentDisk, awsElasticBlockStore, rbd, iscsi, azureDisk, pvc, ...
    ident: str  # disk name / volume id / "monitors|pool|image" / iqn+lun / claim name
    read_only: bool


def pod_volume(raw: Obj) -> Volume | None:
    """The volume placement reads from one entry of spec.volumes, or None (a source no
    predicate looks at: service-account tokens, config maps, secrets, emptyDirs...)."""
    name = str(raw.get("name", ""))
    if (g := raw.get("gcePersistentDisk")) is not None:
        return Volume(name, "gcePersistentDisk", str(g.get("pdName", "")), bool(g.get("readOnly")))
    if (a := raw.get("awsElasticBlockStore")) is not None:
        return Volume(name, "awsElasticBlockStore", str(a.get("volumeID", "")),
                      bool(a.get("readOnly")))
    if (r := raw.get("rbd")) is not None:
        ident = "|".join([",".join(sorted(r.get("monitors") or ())), str(r.get("pool", "rbd")),
                          str(r.get("image", ""))])
        return Volume(name, "rbd", ident, bool(r.get("readOnly")))
    if (i := raw.get("iscsi")) is not None:
        return Volume(name, "iscsi", f"{i.get('iqn', '')}|{i.get('lun', 0)}",
                      bool(i.get("readOnly")))
    if (z := raw.get("azureDisk")) is not None:
        return Volume(name, "azureDisk", str(z.get("diskName", "")), bool(z.get("readOnly")))
    if (c := raw.get("cinder")) is not None:
        return Volume(name, "cinder", str(c.get("volumeID", "")), bool(c.get("readOnly")))
    if (p := raw.get("persistentVolumeClaim")) is not None:
        return Volume(name, "pvc", str(p.get("claimName", "")), bool(p.get("readOnly")))
    if (e := raw.get("ephemeral")) is not None and e is not False:
        return Volume(name, "ephemeral", "", False)
    return None


# --------------------------------------------------------------------------------------------
# Priority
# --------------------------------------------------------------------------------------------

def resolve_priority(pod: Obj, priority_classes: Mapping[str, Obj]) -> int:
    """spec.priority if set, else the PriorityClass value, else the globalDefault class, else 0."""
    spec = pod.get("spec") or {}
    if spec.get("priority") is not None:
        return int(spec["priority"])
    name = spec.get("priorityClassName")
    if name:
        pc = priority_classes.get(name)
        if pc is not None:
            return int(pc.get("value", 0))
        if name in SYSTEM_PRIORITY_CLASSES:
            return SYSTEM_PRIORITY_CLASSES[name]
        return 0
    defaults = [pc for pc in priority_classes.values() if pc.get("globalDefault")]
    if defaults:
        return int(max(defaults, key=lambda pc: int(pc.get("value", 0))).get("value", 0))
    return 0


# --------------------------------------------------------------------------------------------
# Views
# --------------------------------------------------------------------------------------------

V = TypeVar("V", "PodView", "NodeView")


class _ViewCache(Generic[V]):
    """Views by (uid, resourceVersion), for as long as something holds them (a snapshot, a
    decision in progress): the values are weak, so the view of a deleted object or of a
    version since replaced goes with its last holder. (A bounded plain dict kept every pod's
    earlier versions and every deleted pod's view until it filled, megabytes per thousand
    pods.) A view is handed out only for the very dict it was built from: an object edited in
    place keeps its version but is not the view's ``raw``."""

    def __init__(self) -> None:
        self._views: weakref.WeakValueDictionary[tuple[str, str], V] = \
            weakref.WeakValueDictionary()

    @staticmethod
    def _key(obj: Obj) -> tuple[str, str] | None:
        meta = obj.get("metadata") or {}
        uid, rv = meta.get("uid"), meta.get("resourceVersion")
        return (uid, rv) if uid and rv else None

    def get(self, obj: Obj) -> V | None:
        key = self._key(obj)
        cached = None if key is None else self._views.get(key)
        return cached if cached is not None and cached.raw is obj else None

    def keep(self, obj: Obj, view: V) -> V:
        key = self._key(obj)
        if key is not None:
            self._views[key] = view
        return view

    def __contains__(self, key: object) -> bool:
        return key in self._views


def _labels(meta: Obj) -> dict[str, str]:
    return {str(k): "" if v is None else str(v) for k, v in (meta.get("labels") or {}).items()}


class PodView:
    """Everything placement needs from one pod; built once, never mutated, dict untouched."""

    __slots__ = (
        "__weakref__", "affinity_preferred", "affinity_required", "anti_preferred", "anti_required",
        "controller", "created", "deleting", "host_ports", "images", "key", "labels", "name",
        "namespace", "node_name", "node_selector", "nominated_node", "nonzero_cpu",
        "nonzero_memory", "owner_kinds", "phase", "preemption_policy", "preferred_node_affinity",
        "priority", "priority_class_name", "raw", "requests", "required_node_affinity",
        "scheduler_name", "scored", "spread_constraints", "start_time",
        "tolerations", "uid", "volumes",
    )

    raw: Obj
    namespace: str
    name: str
    uid: str
    key: str
    labels: dict[str, str]
    node_name: str
    nominated_node: str
    scheduler_name: str
    priority: int | None
    priority_class_name: str
    preemption_policy: str
    # pod_resources.pod_requests: what the pod counts for on a node (its resize included), the
    # node's non-zero totals, and what NodeResourcesFit's score adds for it when it is placed
    # (None: cpu and memory are nonzero_*, the rest requests)
    requests: dict[str, int]
    nonzero_cpu: int
    nonzero_memory: int
    scored: dict[str, int] | None
    host_ports: tuple[tuple[str, str, int], ...]
    tolerations: tuple[Toleration, ...]
    node_selector: dict[str, str]
    required_node_affinity: NodeSelector | None
    preferred_node_affinity: tuple[tuple[int, NodeSelectorTerm], ...]
    affinity_required: tuple[AffinityTerm, ...]
    affinity_preferred: tuple[AffinityTerm, ...]
    anti_required: tuple[AffinityTerm, ...]
    anti_preferred: tuple[AffinityTerm, ...]
    spread_constraints: tuple[SpreadConstraint, ...]
    volumes: tuple[Volume, ...]
    images: tuple[str, ...]
    controller: tuple[str, str, str] | None  # (kind, name, uid) of the controller owner
    owner_kinds: tuple[str, ...]
    created: str
    start_time: str
    deleting: bool
    phase: str

    @classmethod
    def from_dict(cls, pod: Obj) -> PodView:
        return _POD_CACHE.get(pod) or _POD_CACHE.keep(pod, cls._build(pod))

    @classmethod
    def _build(cls, pod: Obj) -> PodView:
        v = cls.__new__(cls)
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        v.raw = pod
        v.namespace = str(meta.get("namespace") or "default")
        v.name = str(meta.get("name") or meta.get("generateName") or "")
        v.key = object_key(v.namespace, v.name)
        v.uid = str(meta.get("uid") or v.key)
        v.labels = _labels(meta)
        v.node_name = str(spec.get("nodeName") or "")
        v.nominated_node = str(status.get("nominatedNodeName") or "")
        v.scheduler_name = str(spec.get("schedulerName") or "default-scheduler")
        v.priority = None if spec.get("priority") is None else int(spec["priority"])
        v.priority_class_name = str(spec.get("priorityClassName") or "")
        v.preemption_policy = str(spec.get("preemptionPolicy") or "PreemptLowerPriority")
        where = f"pod {v.key}: spec"
        counted = pod_requests(pod, where)
        v.requests = counted.requests
        v.nonzero_cpu, v.nonzero_memory = counted.nonzero_cpu, counted.nonzero_memory
        v.scored = counted.scored
        ports = []
        for c in spec.get("containers") or ():
            for p in c.get("ports") or ():
                hp = p.get("hostPort")
                if hp:
                    ports.append((str(p.get("hostIP") or "0.0.0.0"),
                                  str(p.get("protocol") or "TCP"), int(hp)))
        v.host_ports = tuple(ports)
        v.tolerations = tuple(toleration_from_dict(t) for t in spec.get("tolerations") or ())
        v.node_selector = {str(k): str(val) for k, val in (spec.get("nodeSelector") or {}).items()}
        affinity = spec.get("affinity") or {}
        na = affinity.get("nodeAffinity") or {}
        req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
        v.required_node_affinity = None if req is None else NodeSelector(
            tuple(node_selector_term(t) for t in req.get("nodeSelectorTerms") or ()))
        v.preferred_node_affinity = tuple(
            (int(p.get("weight", 0)), node_selector_term(p.get("preference")))
            for p in na.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
            if int(p.get("weight", 0)) != 0)
        pa = affinity.get("podAffinity") or {}
        paa = affinity.get("podAntiAffinity") or {}
        ns, lab = v.namespace, v.labels
        v.affinity_required = tuple(
            affinity_term(t, ns, lab) for t in
            pa.get("requiredDuringSchedulingIgnoredDuringExecution") or ())
        v.anti_required = tuple(
            affinity_term(t, ns, lab) for t in
            paa.get("requiredDuringSchedulingIgnoredDuringExecution") or ())
        v.affinity_preferred = tuple(
            affinity_term(t.get("podAffinityTerm") or {}, ns, lab, int(t.get("weight", 0)))
            for t in pa.get("preferredDuringSchedulingIgnoredDuringExecution") or ())
        v.anti_preferred = tuple(
            affinity_term(t.get("podAffinityTerm") or {}, ns, lab, int(t.get("weight", 0)))
            for t in paa.get("preferredDuringSchedulingIgnoredDuringExecution") or ())
        v.spread_constraints = tuple(
            SpreadConstraint(int(c.get("maxSkew", 1)), str(c.get("topologyKey", "")),
                             str(c.get("whenUnsatisfiable", "DoNotSchedule")),
                             _spread_selector(c, lab),
                             None if c.get("minDomains") is None else int(c["minDomains"]),
                             str(c.get("nodeAffinityPolicy") or "Honor"),
                             str(c.get("nodeTaintsPolicy") or "Ignore"))
            for c in spec.get("topologySpreadConstraints") or ())
        v.volumes = tuple(vol for vol in (pod_volume(x) for x in spec.get("volumes") or ()) if vol)
        # every container's image, init containers first (ImageLocality scores them all)
        v.images = tuple(str(c.get("image", "")) for c in chain(
            spec.get("initContainers") or (), spec.get("containers") or ()))
        owners = meta.get("ownerReferences") or ()
        ctl = next((o for o in owners if o.get("controller")), None)
        v.controller = None if ctl is None else (
            str(ctl.get("kind", "")), str(ctl.get("name", "")), str(ctl.get("uid", "")))
        v.owner_kinds = tuple(str(o.get("kind", "")) for o in owners)
        v.created = str(meta.get("creationTimestamp") or "")
        v.start_time = str(status.get("startTime") or v.created)
        v.deleting = bool(meta.get("deletionTimestamp"))
        v.phase = str(status.get("phase") or "")
        return v

    def unbound(self, raw: Obj) -> PodView:
        """This view as if ``spec.nodeName`` were unset, over ``raw`` (that unbound copy).

        Only ``node_name`` depends on ``spec.nodeName``, so the other fields are shared rather
        than rebuilt; the result is not cached (the bound view keeps its cache entry).
        """
        v = PodView.__new__(PodView)
        for slot in VIEW_FIELDS:
            setattr(v, slot, getattr(self, slot))
        v.raw = raw
        v.node_name = ""
        return v

    def bound(self, raw: Obj, node_name: str) -> PodView:
        """This view as if ``spec.nodeName`` were ``node_name``, over ``raw`` (that bound copy),
        cached as ``from_dict(raw)`` would be; like :meth:`unbound`, nothing is rebuilt."""
        v = PodView.__new__(PodView)
        for slot in VIEW_FIELDS:
            setattr(v, slot, getattr(self, slot))
        v.raw = raw
        v.node_name = node_name
        return _POD_CACHE.keep(raw, v)

    def placed_on(self, raw: Obj, node_name: str) -> PodView:
        """This view as if bound to ``node_name`` for a what-if question, over ``raw``; never
        cached (the pod is not bound: its own view must stay what ``from_dict`` gives)."""
        v = PodView.__new__(PodView)
        for slot in VIEW_FIELDS:
            setattr(v, slot, getattr(self, slot))
        v.raw = raw
        v.node_name = node_name
        return v

    def __repr__(self) -> str:
        return f"PodView({self.key})"


# the slots a copy of a view carries over (``__weakref__`` belongs to each object alone)
VIEW_FIELDS = tuple(slot for slot in PodView.__slots__ if slot != "__weakref__")


def _spread_selector(c: Obj, pod_labels: Mapping[str, str]) -> LabelSelector:
    sel = label_selector(c.get("labelSelector"))
    keys = [k for k in c.get("matchLabelKeys") or () if k in pod_labels]
    if keys and not sel.matches_nothing:
        sel = LabelSelector(sel.requirements + tuple(
            Requirement(k, "In", frozenset((pod_labels[k],))) for k in keys))
    return sel


# Equal taint sets share one tuple, so per-decision memos (the taint predicate's) can key on
# the tuple's identity instead of hashing its taints for every node; a cluster has few sets.
_TAINT_SETS: dict[tuple[Taint, ...], tuple[Taint, ...]] = {}
_TAINT_SETS_LIMIT = 4096


def intern_taints(taints: tuple[Taint, ...]) -> tuple[Taint, ...]:
    """The shared tuple equal to ``taints`` (``()`` for an untainted node)."""
    if not taints:
        return ()
    shared = _TAINT_SETS.get(taints)
    if shared is None:
        if len(_TAINT_SETS) >= _TAINT_SETS_LIMIT:
            _TAINT_SETS.clear()
        shared = _TAINT_SETS[taints] = taints
    return shared


class NodeView:
    """Everything placement needs from one node."""

    __slots__ = ("__weakref__", "allocatable", "annotations", "conditions", "images", "labels",
                 "name", "raw", "taints", "unschedulable")

    raw: Obj
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    allocatable: dict[str, int]
    taints: tuple[Taint, ...]
    unschedulable: bool
    conditions: dict[str, str]
    images: dict[str, int]

    @classmethod
    def from_dict(cls, node: Obj) -> NodeView:
        return _NODE_CACHE.get(node) or _NODE_CACHE.keep(node, cls._build(node))

    @classmethod
    def _build(cls, node: Obj) -> NodeView:
        meta = node.get("metadata") or {}
        v = cls.__new__(cls)
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        v.raw = node
        v.name = str(meta.get("name") or "")
        v.labels = _labels(meta)
        v.annotations = {str(k): str(val) for k, val in (meta.get("annotations") or {}).items()}
        where = f"node {v.name}: status"
        v.allocatable = resource_list(status.get("allocatable") or status.get("capacity"),
                                      f"{where}.allocatable")
        v.taints = intern_taints(tuple(taint_from_dict(t) for t in spec.get("taints") or ()))
        v.unschedulable = bool(spec.get("unschedulable"))
        v.conditions = {str(c.get("type")): str(c.get("status")) for c in
                        status.get("conditions") or ()}
        images: dict[str, int] = {}
        for img in status.get("images") or ():
            size = int(img.get("sizeBytes") or 0)
            for n in img.get("names") or ():
                images[str(n)] = size
        v.images = images
        return v

    def __repr__(self) -> str:
        return f"NodeView({self.name})"


_POD_CACHE: _ViewCache[PodView] = _ViewCache()
_NODE_CACHE: _ViewCache[NodeView] = _ViewCache()


ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")


def zone_key(labels: Mapping[str, str]) -> str:
    """component-helpers/node/topology, GetZoneKey: "region:\\x00:zone", or "" for a node
    with neither label."""
    region = next((labels[k] for k in REGION_LABELS if k in labels), "")
    zone = next((labels[k] for k in ZONE_LABELS if k in labels), "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


def normalized_image_name(name: str) -> str:
    """Add the ``:latest`` tag an image reference without tag or digest implies."""
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in last:
        return name + ":latest"
    return name
