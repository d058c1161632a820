"""The live cluster as the engine's input: what ``explain`` and ``simulate --from-cluster`` read.

Design: one consistent read (no ``resourceVersion=0``, so a pod created a moment ago is seen)
of every kind the running scheduler's cache lists (``daemon.cache.RESOURCES``: one list of what
placement reads, so the two can never drift apart). Each item gets back the ``kind`` and
``apiVersion`` a list leaves out and loses its ``managedFields``, so the objects are exactly
what a ``simulate --cluster`` file holds: :func:`save_snapshot` writes them as one
``kind: List`` and a saved snapshot replays offline to the same answer.

The profile is the one the running scheduler was given: the chart's ConfigMap
(``<release fullname>-scheduler-policy``, key ``policy.json``, or
``<release fullname>-scheduler-config``, key ``config.yaml``: a KubeSchedulerConfiguration,
whose profile for the pod's schedulerName is used; labelled
``app.kubernetes.io/part-of=berthmaster,app.kubernetes.io/component=scheduler``), or
kube-scheduler's ``--policy-configmap`` convention (key ``policy.cfg``) when named. When none
is found the default profile is used and :class:`ConfiguredPolicy` says so in ``note``.

API problems end the command in one line (``berthmaster.foundation.errors``): a refused list is
exit 2
(RBAC is configuration), anything else the API server cannot answer is exit 3.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from berthmaster.foundation.documents import read_text
from berthmaster.foundation.errors import ConfigurationError, ConnectivityError
from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.scheduler.config import default_profile, load_config, load_profile
from berthmaster.scheduler.daemon.cache import RESOURCES, Resource
from berthmaster.scheduler.policy import Policy, load_policy

JSON = dict[str, Any]

# `helm install berthmaster charts/berthmaster -n berthmaster` (and deploy/manifests/): the
# chart renders a Policy (scheduler.policy) or a KubeSchedulerConfiguration (scheduler.config)
CHART_POLICY_CONFIGMAP = ("berthmaster", "berthmaster-scheduler-policy")
CHART_CONFIG_CONFIGMAP = ("berthmaster", "berthmaster-scheduler-config")
CHART_POLICY_SUFFIX = "-scheduler-policy"
CHART_CONFIG_SUFFIX = "-scheduler-config"
CONFIG_KEY = "config.yaml"
CHART_POLICY_LABELS = "app.kubernetes.io/part-of=berthmaster,app.kubernetes.io/component=scheduler"
# The chart's key, then kube-scheduler's (SchedulerPolicyConfigMapKey, removed in 1.23).
POLICY_KEYS = ("policy.json", "policy.cfg")


def api_version(resource: Resource) -> str:
    """``v1`` for ``/api/v1/...``, ``apps/v1`` for ``/apis/apps/v1/...``."""
    parts = resource.path.strip("/").split("/")
    return parts[1] if parts[0] == "api" else f"{parts[1]}/{parts[2]}"


def as_snapshot_object(resource: Resource, item: JSON) -> JSON:
    """A listed item as a snapshot file holds it: kind and apiVersion set, no managedFields."""
    meta = {k: v for k, v in (item.get("metadata") or {}).items() if k != "managedFields"}
    return {"apiVersion": api_version(resource), "kind": resource.kind, **item,
            "metadata": meta}


def api_error(verb: str, plural: str, error: KubeError, namespace: str | None = None,
              name: str | None = None) -> ConfigurationError | ConnectivityError:
    """One line for a request the API server refused (exit 2: RBAC or credentials are
    configuration) or could not answer (exit 3)."""
    target = f"{plural} {namespace}/{name}" if name else plural
    if error.status in (401, 403):
        scope = f"-n {namespace}" if namespace else "--all-namespaces"
        return ConfigurationError(
            f"the API server refused to {verb} {target} ({error.status} {error.reason}: "
            f"{error.message}); use a kubeconfig whose user may (kubectl auth can-i {verb} "
            f"{plural} {scope})")
    if error.status == 0:
        return ConnectivityError(f"lost the API server while reading {target} "
                                 f"({error.message}); check that it is running and retry")
    return ConnectivityError(f"the API server could not {verb} {target} ({error.status} "
                             f"{error.reason}: {error.message}); retry, or check its health")


async def list_cluster(kube: KubeClient, resources: Iterable[Resource] = RESOURCES) -> list[JSON]:
    """Every object placement reads, concurrently listed, in ``resources`` order."""

    async def one(resource: Resource) -> list[JSON]:
        params: dict[str, Any] = {}
        if resource.field_selector:
            params["fieldSelector"] = resource.field_selector
        try:
            items, _ = await kube.list_all(resource.path, **params)
        except KubeError as error:
            if error.not_found:
                return []  # an API group this server does not serve holds nothing to read
            raise api_error("list", resource.path.rsplit("/", 1)[-1], error) from error
        return [as_snapshot_object(resource, item) for item in items]

    lists = await asyncio.gather(*(one(r) for r in resources))
    return [obj for items in lists for obj in items]


def read_cluster(kubeconfig: str | None, context: str | None = None) -> list[JSON]:
    """:func:`list_cluster` over a fresh connection (``KubeClient.connect``'s rules)."""

    async def read() -> list[JSON]:
        async with await KubeClient.connect(kubeconfig, context=context) as kube:
            return await list_cluster(kube)

    return asyncio.run(read())


def save_snapshot(objects: list[JSON], path: str) -> None:
    """Write ``objects`` as one ``kind: List``: JSON when ``path`` ends in .json, else YAML."""
    document = {"apiVersion": "v1", "kind": "List", "items": objects}
    try:
        with open(path, "w", encoding="utf-8") as out:
            if path.endswith(".json"):
                json.dump(document, out, indent=1)
                out.write("\n")
            else:
                yaml.safe_dump(document, out, sort_keys=False)
    except OSError as error:
        raise ConfigurationError(f"cannot write the snapshot to {path} ({error.strerror}); "
                                 "give --save a writable path") from error


# what the scheduler runs with no configuration (scheduler/config.py)
DEFAULT_PROFILE = "the default profile (kube-scheduler 1.35's)"


@dataclass(frozen=True)
class ConfiguredPolicy:
    """The Policy an explanation uses, where it came from, and why, when it is the default."""

    policy: Policy
    source: str
    note: str = ""


def policy_from_configmap(configmap: JSON, scheduler_name: str | None = None
                          ) -> ConfiguredPolicy | None:
    """The profile the ConfigMap holds: its KubeSchedulerConfiguration's (``config.yaml``)
    profile for ``scheduler_name`` (else its first), or the Policy under the first of
    ``POLICY_KEYS`` (None: none of these keys)."""
    meta = configmap.get("metadata") or {}
    data = configmap.get("data") or {}
    if CONFIG_KEY in data:
        source = f"ConfigMap {meta.get('namespace')}/{meta.get('name')} key {CONFIG_KEY}"
        config = load_config(str(data[CONFIG_KEY]), source)
        profile = next((p for p in config.profiles if p.scheduler_name == scheduler_name),
                       config.profiles[0])
        return ConfiguredPolicy(profile, f"{source} profile {profile.scheduler_name}")
    for key in POLICY_KEYS:
        if key in data:
            source = f"ConfigMap {meta.get('namespace')}/{meta.get('name')} key {key}"
            return ConfiguredPolicy(load_policy(str(data[key]), source), source)
    return None


async def _get_configmap(kube: KubeClient, namespace: str, name: str) -> JSON | None:
    try:
        return await kube.get(resource_path(CORE, "configmaps", namespace, name))
    except KubeError as error:
        if error.not_found:
            return None
        raise api_error("get", "configmaps", error, namespace, name) from error


def policy_file(path: str) -> ConfiguredPolicy:
    """The Policy, or KubeSchedulerConfiguration's first profile, of a file (read before
    connecting: a bad file needs no cluster to report)."""
    return ConfiguredPolicy(load_profile(read_text(path), path), f"file {path}")


async def configured_policy(kube: KubeClient, configmap: str | None = None,
                            configmap_namespace: str | None = None,
                            scheduler_name: str | None = None) -> ConfiguredPolicy:
    """The Policy the scheduler runs with: the ConfigMap ``configmap`` when named (in
    ``configmap_namespace``, default ``kube-system`` as kube-scheduler's
    ``--policy-configmap-namespace``), else the chart's ConfigMap, else the default policy with
    a note saying why. Raises PolicyError for an invalid Policy."""
    if configmap:
        namespace = configmap_namespace or "kube-system"
        found = await _get_configmap(kube, namespace, configmap)
        if found is None:
            raise ConfigurationError(
                f"ConfigMap {namespace}/{configmap} not found; check --policy-configmap and "
                f"--policy-configmap-namespace (kubectl get configmaps -n {namespace})")
        chosen = policy_from_configmap(found, scheduler_name)
        if chosen is None:
            raise ConfigurationError(
                f"ConfigMap {namespace}/{configmap} has no {' or '.join(POLICY_KEYS)} key; "
                "put the Policy under one of them")
        return chosen
    return await _chart_policy(kube, scheduler_name)


async def labelled_policy_configmaps(kube: KubeClient) -> list[JSON]:
    """Every ConfigMap, in any namespace, that a chart release made for its scheduler's Policy
    (the chart's labels and a name ending in ``-scheduler-policy``)."""
    try:
        listed, _ = await kube.list_all(resource_path(CORE, "configmaps"),
                                        labelSelector=CHART_POLICY_LABELS)
    except KubeError as error:
        raise api_error("list", "configmaps", error) from error
    return [c for c in listed
            if str((c.get("metadata") or {}).get("name", "")).endswith(
                (CHART_POLICY_SUFFIX, CHART_CONFIG_SUFFIX))]


async def _chart_policy(kube: KubeClient, scheduler_name: str | None) -> ConfiguredPolicy:
    namespace, name = CHART_POLICY_CONFIGMAP
    candidates: list[JSON] = []
    try:
        for where, what in (CHART_POLICY_CONFIGMAP, CHART_CONFIG_CONFIGMAP):
            well_known = await _get_configmap(kube, where, what)
            if well_known is not None:
                candidates.append(well_known)
        if not candidates:
            candidates = await labelled_policy_configmaps(kube)
    except ConfigurationError as error:  # RBAC: explain with the default policy, and say so
        return ConfiguredPolicy(default_profile(), DEFAULT_PROFILE, note=(
            f"explained with the default profile: {error}; or pass --policy FILE (in the "
            "scheduler's Pod: --policy /etc/berthmaster/policy.json)"))
    found = [p for p in (policy_from_configmap(c, scheduler_name) for c in candidates)
             if p is not None]
    if len(found) > 1:
        names = ", ".join(p.source for p in found)
        raise ConfigurationError(f"more than one berthmaster scheduler policy ConfigMap ({names}); "
                                 "choose one with --policy-configmap and "
                                 "--policy-configmap-namespace")
    if found:
        return found[0]
    return ConfiguredPolicy(default_profile(), DEFAULT_PROFILE, note=(
        f"no berthmaster scheduler policy ConfigMap found ({namespace}/{name}, or labelled "
        f"{CHART_POLICY_LABELS}); explained with the default profile: pass --policy FILE or "
        "--policy-configmap NAME to use another"))

