"""Policy names -> predicate and priority classes. A plain map: no discovery, no magic.

Static entries are keyed by the seed's names and by kube-scheduler's plugin names (aliases).
Configurable entries are keyed by their argument (``labelsPresence``, ``serviceAffinity``,
``serviceAntiAffinity``, ``labelPreference``): a Policy entry carrying that argument may use
any name. ``PREDICATE_ORDER`` is the order predicates run in (cheap and decisive first, as
upstream's ordering), whatever order the policy lists them in.
"""

from __future__ import annotations

from berthmaster.scheduler.plugins import (
    csi_volume_limits,
    equal,
    general,
    image_locality,
    inter_pod_affinity,
    node_affinity,
    node_condition,
    node_label,
    node_name,
    node_ports,
    node_prefer_avoid_pods,
    node_resources_fit,
    node_unschedulable,
    pod_topology_spread,
    resource_allocation,
    selector_spread,
    service_affinity,
    taint_toleration,
    volume_binding,
    volume_limits,
    volume_restrictions,
    volume_zone,
)
from berthmaster.scheduler.plugins.base import Predicate, Priority

_PREDICATE_CLASSES: tuple[type[Predicate], ...] = (
    node_unschedulable.NodeUnschedulable,
    node_condition.NodeCondition,
    node_name.NodeName,
    taint_toleration.TaintToleration,
    taint_toleration.NoExecuteTaintToleration,
    node_affinity.NodeAffinity,
    node_ports.NodePorts,
    node_resources_fit.NodeResourcesFit,
    general.GeneralPredicates,
    volume_restrictions.VolumeRestrictions,
    volume_limits.EBSLimits,
    volume_limits.GCEPDLimits,
    csi_volume_limits.CSILimits,
    volume_limits.AzureDiskLimits,
    volume_limits.CinderLimits,
    volume_binding.VolumeBinding,
    volume_zone.VolumeZone,
    node_condition.MemoryPressure,
    node_condition.DiskPressure,
    node_condition.PIDPressure,
    pod_topology_spread.PodTopologySpread,
    inter_pod_affinity.InterPodAffinity,
)
_PRIORITY_CLASSES: tuple[type[Priority], ...] = (
    resource_allocation.LeastRequested,
    resource_allocation.MostRequested,
    resource_allocation.NodeResourcesFitScore,
    resource_allocation.BalancedAllocation,
    selector_spread.SelectorSpread,
    inter_pod_affinity.InterPodAffinityPriority,
    node_affinity.NodeAffinityPriority,
    taint_toleration.TaintTolerationPriority,
    node_prefer_avoid_pods.NodePreferAvoidPods,
    image_locality.ImageLocality,
    equal.Equal,
    pod_topology_spread.PodTopologySpreadPriority,
)

PREDICATES: dict[str, type[Predicate]] = {}
for _cls in _PREDICATE_CLASSES:
    for _name in (_cls.NAME, *_cls.ALIASES):
        PREDICATES.setdefault(_name, _cls)
PRIORITIES: dict[str, type[Priority]] = {}
for _pcls in _PRIORITY_CLASSES:
    for _name in (_pcls.NAME, *_pcls.ALIASES):
        PRIORITIES.setdefault(_name, _pcls)

# argument key -> class, for user-named configurable entries
CONFIGURABLE_PREDICATES: dict[str, type[Predicate]] = {
    node_label.ARGUMENT: node_label.LabelsPresence,
    service_affinity.ARGUMENT: service_affinity.ServiceAffinity,
}
CONFIGURABLE_PRIORITIES: dict[str, type[Priority]] = {
    node_label.PRIORITY_ARGUMENT: node_label.LabelPreference,
    service_affinity.PRIORITY_ARGUMENT: service_affinity.ServiceAntiAffinity,
}
# the configurable rules also answer to their canonical names (they then need their argument)
CONFIGURABLE_BY_NAME: dict[str, str] = {
    node_label.NAME: node_label.ARGUMENT, "NodeLabel": node_label.ARGUMENT,
    service_affinity.NAME: service_affinity.ARGUMENT,
    "CheckServiceAffinity": service_affinity.ARGUMENT,
    "ServiceAffinity": service_affinity.ARGUMENT,
    node_label.PRIORITY_NAME: node_label.PRIORITY_ARGUMENT,
    service_affinity.PRIORITY_NAME: service_affinity.PRIORITY_ARGUMENT,
    "ServiceAntiAffinity": service_affinity.PRIORITY_ARGUMENT,
}

_ORDER = [*_PREDICATE_CLASSES[:10], node_label.LabelsPresence, service_affinity.ServiceAffinity,
          *_PREDICATE_CLASSES[10:]]
PREDICATE_ORDER: dict[type[Predicate], int] = {cls: i for i, cls in enumerate(_ORDER)}
# run whatever a Policy lists, as upstream did from 1.14 until the Policy API went (v1.22
# pkg/scheduler/framework/plugins/legacy_registry.go, NewLegacyRegistry, mandatoryPredicates)
# plus CheckVolumeBinding: the scheduling document says it "must be enabled in non-default
# schedulers" (a claim waiting for its first consumer is provisioned only once the scheduler
# picked the node), and berthmaster is always one
MANDATORY_PREDICATES: tuple[type[Predicate], ...] = (node_unschedulable.NodeUnschedulable,
                                                     taint_toleration.TaintToleration,
                                                     volume_binding.VolumeBinding)
