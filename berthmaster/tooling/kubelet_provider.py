"""The ``kubelet`` provider: a Machine's instance is a real kubelet on the operator's host.

providerSpec shape (``spec.providerSpec.value``)::

    apiVersion: berthmaster.io/v1alpha1
    kind: KubeletMachineProviderSpec
    maxPods: 110          # optional: the kubelet's maxPods

The instance is a node of :class:`berthmaster.tooling.devcluster.host_nodes.HostNodes` named after
the
Machine: its own containerd, a kubelet joined with a client certificate ``system:node:<name>``
issued from the cluster's CA, pods on a bridge of this host. The kubelet registers the Node
itself, with ``spec.providerID: berthmaster-kubelet://<name>`` (the Machine's), the Machine's
taints (``registerWithTaints``) and the label ``berthmaster.io/node: kubelet``; the machine
controller links it by providerID and adds the Machine's labels.

Where it runs: only where the operator runs on the host, as root, beside the control plane's
files (the local control plane, the demo, integration tests). The operator's environment says
where the CA and the API server are:

- ``BERTHMASTER_KUBELET_PKI``: a folder with the CA's ``ca.crt`` and ``ca.key`` (the local
  control plane's ``<state>/<cluster>/pki``); required.
- ``BERTHMASTER_KUBELET_SERVER``: the API server's URL for the kubelets; default: the URL the
  operator itself uses.
- ``BERTHMASTER_KUBELET_STATE``: where the nodes keep their files; default
  ``<state>/kubelet-machines`` (``$BERTHMASTER_STATE``, else ``~/.cache/berthmaster/clusters``).

A host that cannot run them (not root, no containerd, no kubelet built, no CA) is reported by
``instance_exists`` as an invalid configuration: the Machine goes ``Failed``
(``InvalidConfiguration``) with an event naming what is missing, before anything starts.

The instance exists while the node's folder does; a dead kubelet leaves it existing (the Node
goes NotReady, for a MachineHealthCheck to judge, as a crashed machine would), with the
Machine's ``machine.openshift.io/instance-state`` ``stopped`` instead of ``running``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from berthmaster.foundation.kube import KubeClient
from berthmaster.operator.machines.api import INSTANCE_STATE
from berthmaster.operator.machines.providers import Instance, InvalidProviderSpec
from berthmaster.operator.machines.providers.kwok import node_machine_problems, provider_spec
from berthmaster.tooling.devcluster import host_nodes
from berthmaster.tooling.devcluster.certs import Pki
from berthmaster.tooling.devcluster.paths import state_root

KIND = "KubeletMachineProviderSpec"
API_VERSION = "berthmaster.io/v1alpha1"
PROVIDER_ID_PREFIX = "berthmaster-kubelet://"
FIELDS = {"apiVersion", "kind", "maxPods", "metadata"}
DEFAULT_MAX_PODS = 110
PKI_VARIABLE = "BERTHMASTER_KUBELET_PKI"
SERVER_VARIABLE = "BERTHMASTER_KUBELET_SERVER"
STATE_VARIABLE = "BERTHMASTER_KUBELET_STATE"


def provider_id(machine: dict[str, Any]) -> str:
    return f"{PROVIDER_ID_PREFIX}{(machine.get('metadata') or {}).get('name')}"


def validate(machine: dict[str, Any]) -> list[str]:
    """Every problem with the Machine's providerSpec, name and labels (not the host's)."""
    name = (machine.get("metadata") or {}).get("name")
    value = provider_spec(machine)
    problems = node_machine_problems(machine, KIND, FIELDS)
    max_pods = value.get("maxPods", DEFAULT_MAX_PODS)
    if isinstance(max_pods, bool) or not isinstance(max_pods, int) or max_pods < 1:
        problems.add("spec.providerSpec.value.maxPods", f"{max_pods!r} is not a positive whole "
                     f"number; write it like {DEFAULT_MAX_PODS}")
    return problems.lines(f"Machine {name}")


def settings_problems(environ: Mapping[str, str]) -> list[str]:
    """What the operator's environment lacks to issue node identities."""
    pki = environ.get(PKI_VARIABLE)
    if not pki:
        return [f"${PKI_VARIABLE} is not set in the operator's environment; set it to the "
                "folder holding the cluster CA's ca.crt and ca.key (the local control plane's "
                "<state>/<cluster>/pki)"]
    missing = [f for f in ("ca.crt", "ca.key") if not (Path(pki) / f).is_file()]
    if missing:
        return [f"${PKI_VARIABLE}={pki} has no {' or '.join(missing)}; point it at the "
                "cluster CA's folder"]
    return []


def host_problems(state: Path) -> list[str]:
    """What this host lacks to run real nodes keeping their files in ``state`` (the
    provider's preflight, before anything starts; the demo asks it too)."""
    too_long = host_nodes.root_problem(state)
    return [*host_nodes.host_problems(), *([f"${STATE_VARIABLE}: {too_long}"] if too_long
                                           else [])]


def taints(machine: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in t.items() if k in ("key", "value", "effect")}
            for t in (machine.get("spec") or {}).get("taints") or []]


class KubeletProvider:
    """Real-kubelet instances on the operator's host."""

    kind = KIND
    name = "kubelet"
    enabled_by_default = False  # needs root and the host: only when named

    @staticmethod
    def template_capacity(provider_spec: Mapping[str, Any]) -> dict[str, str] | None:
        """One node has the host's CPUs and memory (every node shares them)."""
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return {"cpu": str(os.cpu_count() or 1), "memory": f"{pages // 2**20}Mi",
                "pods": str(provider_spec.get("maxPods") or DEFAULT_MAX_PODS)}

    def __init__(self, kube: KubeClient, environ: Mapping[str, str] | None = None):
        self.kube = kube
        env = os.environ if environ is None else environ
        self.problems = settings_problems(env)
        root = Path(env.get(STATE_VARIABLE) or state_root() / "kubelet-machines")
        self.nodes = host_nodes.HostNodes(root, Pki(Path(env.get(PKI_VARIABLE) or ".")),
                                          env.get(SERVER_VARIABLE) or kube.host)

    def validate(self, machine: dict[str, Any]) -> list[str]:
        return validate(machine)

    def _instance(self, machine: dict[str, Any], running: bool) -> Instance:
        name = str(machine["metadata"]["name"])
        return Instance(
            provider_id=provider_id(machine), node_name=name,
            addresses=[{"type": "InternalIP", "address": host_nodes.GATEWAY},
                       {"type": "Hostname", "address": name}],
            machine_annotations={INSTANCE_STATE: "running" if running else "stopped"})

    async def instance_exists(self, machine: dict[str, Any]) -> Instance | None:
        name = str(machine["metadata"]["name"])
        if await asyncio.to_thread(self.nodes.find, name) is None:
            problems = [*self.problems, *host_problems(self.nodes.root)]
            if problems:
                raise InvalidProviderSpec(f"Machine {name}: this host cannot run a real "
                                          f"kubelet for {KIND}: {'; '.join(problems)}")
            return None
        return self._instance(machine, await asyncio.to_thread(self.nodes.kubelet_running, name))

    async def update_instance(self, machine: dict[str, Any], instance: Instance) -> Instance:
        return instance  # a dead kubelet stays dead: the MachineHealthCheck decides

    async def create_instance(self, machine: dict[str, Any]) -> Instance:
        name = str(machine["metadata"]["name"])
        max_pods = int(provider_spec(machine).get("maxPods") or DEFAULT_MAX_PODS)
        await asyncio.to_thread(self.nodes.start, name, provider_id(machine), taints(machine),
                                max_pods)
        return self._instance(machine, True)

    async def delete_instance(self, machine: dict[str, Any]) -> None:
        await asyncio.to_thread(self.nodes.remove, str(machine["metadata"]["name"]))
