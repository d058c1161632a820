"""Names of the Machine API: group, resources, finalizer, annotations, phases, conditions.

Every string here is upstream's (openshift/api ``machine/v1beta1`` and the
machine-api-operator) unless it says ``berthmaster``: those mark the few additions this project
makes beyond upstream (drain timeout, deletion-phase timestamps, the kwok provider).
"""

from __future__ import annotations

from typing import Any

from berthmaster.foundation.kube import CORE, group_path, resource_path

GROUP = "machine.openshift.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
API = group_path(GROUP, VERSION)
MACHINES = "machines"
MACHINESETS = "machinesets"

# The machine controller's finalizer (openshift/api MachineFinalizer).
FINALIZER = "machine.machine.openshift.io"

# Annotations and labels.
EXCLUDE_NODE_DRAINING = "machine.openshift.io/exclude-node-draining"
DELETE_MACHINE = "machine.openshift.io/delete-machine"
OLD_DELETE_MACHINE = "machine.openshift.io/cluster-api-delete-machine"
NODE_MACHINE = "machine.openshift.io/machine"  # on Nodes: "<namespace>/<name>" (annotation)
# The kopf watch of Nodes asks the API server only for Nodes carrying the NODE_MACHINE label,
# which the node link puts beside the annotation (nodes.wanted_labels): other Nodes, and their
# status heartbeats, never reach the operator.
NODES_WATCH = ("", "v1", "nodes")
NODES_WATCH_SELECTOR = NODE_MACHINE
INSTANCE_STATE = "machine.openshift.io/instance-state"
UNKNOWN_INSTANCE_STATE = "Unknown"  # set on a Failed Machine (annotation and providerStatus)
INSTANCE_TYPE_LABEL = "machine.openshift.io/instance-type"
REGION_LABEL = "machine.openshift.io/region"
ZONE_LABEL = "machine.openshift.io/zone"
MACHINESET_LABEL = "machine.openshift.io/cluster-api-machineset"
# berthmaster additions (item 4 of the issue): the schema is upstream's, so these are annotations.
DRAIN_TIMEOUT = "berthmaster.io/drain-timeout"
PROCEED_AFTER_DRAIN_TIMEOUT = "berthmaster.io/proceed-after-drain-timeout"

# Phases.
PROVISIONING = "Provisioning"
PROVISIONED = "Provisioned"
RUNNING = "Running"
DELETING = "Deleting"
FAILED = "Failed"

# Conditions, reasons and severities.
DRAINABLE = "Drainable"
DRAINED = "Drained"
TERMINABLE = "Terminable"
INSTANCE_EXISTS = "InstanceExists"
HOOK_PRESENT = "HookPresent"
DRAIN_ERROR = "DrainError"
DRAIN_TIMEOUT_REASON = "DrainTimeout"  # berthmaster
# berthmaster: status.nodeRef names a Node whose spec.providerID is not the Machine's
NODE_NOT_OWNED = "NodeNotOwned"
INSTANCE_NOT_CREATED = "InstanceNotCreated"
INSTANCE_MISSING = "InstanceMissing"
ERROR_CHECKING_PROVIDER = "ErrorCheckingProvider"
SEVERITY_WARNING = "Warning"
SEVERITY_ERROR = "Error"  # openshift/api machine/v1beta1 ConditionSeverityError

# Status error reasons (MachineStatusError).
INVALID_CONFIGURATION = "InvalidConfiguration"

# errorMessage of a Machine whose instance vanished outside the Machine API.
INSTANCE_NOT_FOUND_MESSAGE = "can't find created instance"

JSON = dict[str, Any]


def machine_path(namespace: str | None, name: str | None = None, sub: str = "") -> str:
    return resource_path(API, MACHINES, namespace, name, sub)


def machineset_path(namespace: str | None, name: str | None = None, sub: str = "") -> str:
    return resource_path(API, MACHINESETS, namespace, name, sub)


def node_path(name: str | None = None) -> str:
    return resource_path(CORE, "nodes", None, name)


def key_of(obj: JSON) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def deleting(obj: JSON) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))
