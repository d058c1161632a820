"""The placement admission configuration: OpenShift's ``admissionConfig.pluginConfig`` shape.

The administrator copies the documentation's master-config snippets as they are into the
``config.yaml`` key of a ConfigMap (docs/admission.md): the whole ``admissionConfig:`` section,
or just its ``pluginConfig:`` map, with one entry per plugin holding a ``configuration:``

- ``PodNodeSelector``: ``podNodeSelectorPluginConfig`` with ``clusterDefaultNodeSelector`` and
  one whitelist per namespace (``ns1: region=west,env=test``);
- ``PodTolerationRestriction``: upstream's ``Configuration``
  (podtolerationrestriction.admission.k8s.io/v1alpha1) with ``default`` and ``whitelist``;
- ``PodNodeConstraints``: ``PodNodeConstraintsConfig`` with ``nodeSelectorLabelBlacklist``
  (``kubernetes.io/hostname`` when omitted, as OpenShift defaults it).

PodNodeSelector and PodTolerationRestriction run with empty settings when not configured (their
namespace annotations work with no configuration); PodNodeConstraints runs only when
configured, as in OpenShift. A ConfigMap can be a ConfigMap only, so ``location:`` (a file on a
master) is refused. Validation collects every problem, each named by its path, and raises one
:class:`AdmissionConfigError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from berthmaster.foundation.documents import safe_load
from berthmaster.foundation.problems import Problems
from berthmaster.operator.admission import podnodeconstraints as pnc
from berthmaster.operator.admission import podnodeselector as pns
from berthmaster.operator.admission import podtolerationrestriction as ptr
from berthmaster.operator.admission.selectors import SelectorError, selector_to_map
from berthmaster.scheduler.label_string import label_key_problem

CONFIG_KEY = "config.yaml"
PLUGINS = (pns.NAME, ptr.NAME, pnc.NAME)
TOLERATION_API_VERSION = "podtolerationrestriction.admission.k8s.io/v1alpha1"
_NAMESPACE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class AdmissionConfigError(ValueError):
    """Every problem of one configuration, each a line naming its path and the fix."""

    def __init__(self, source: str, problems: Problems):
        self.problems = problems.lines()
        super().__init__(problems.render(f"the admission configuration {source} has "
                                         f"{len(problems)} problem(s)"))


@dataclass(frozen=True)
class AdmissionConfig:
    node_selector: pns.Settings = field(default_factory=pns.Settings)
    tolerations: ptr.Settings = field(default_factory=ptr.Settings)
    constraints: pnc.Settings = field(default_factory=pnc.Settings)


def parse_text(text: str, source: str) -> AdmissionConfig:
    """Parse and validate the YAML/JSON text of the ConfigMap's ``config.yaml``."""
    try:
        document = safe_load(text) if text.strip() else {}
    except yaml.YAMLError as error:
        problems = Problems()
        problems.add("", f"not valid YAML or JSON: {' '.join(str(error).split())}")
        raise AdmissionConfigError(source, problems) from None
    return parse(document, source)


def parse(document: Any, source: str) -> AdmissionConfig:
    problems = Problems()
    plugins, path = _plugin_map(document or {}, problems)
    node_selector, tolerations, constraints = pns.Settings(), ptr.Settings(), pnc.Settings()
    for name, entry in plugins.items():
        where = f"{path}.{name}"
        if name not in PLUGINS:
            problems.add(where, f"unknown plugin; berthmaster serves {', '.join(PLUGINS)}")
            continue
        configuration = _configuration(entry, where, problems)
        if configuration is None:
            continue
        where += ".configuration"
        if name == pns.NAME:
            node_selector = _node_selector(configuration, where, problems)
        elif name == ptr.NAME:
            tolerations = _tolerations(configuration, where, problems)
        else:
            constraints = _constraints(configuration, where, problems)
    if problems:
        raise AdmissionConfigError(source, problems)
    return AdmissionConfig(node_selector, tolerations, constraints)


def _plugin_map(document: Any, problems: Problems) -> tuple[Mapping[str, Any], str]:
    if not isinstance(document, Mapping):
        problems.add("", "the document must be a map with admissionConfig: or pluginConfig:")
        return {}, ""
    path = ""
    if "admissionConfig" in document:
        document, path = document["admissionConfig"] or {}, "admissionConfig."
        if not isinstance(document, Mapping):
            problems.add("admissionConfig", "must be a map with pluginConfig:")
            return {}, ""
    unknown = sorted(set(document) - {"pluginConfig"})
    if unknown:
        problems.add(path or "(top level)", f"unknown key(s) {', '.join(map(str, unknown))}; "
                     "the plugins go under pluginConfig:")
    plugins = document.get("pluginConfig") or {}
    if not isinstance(plugins, Mapping):
        problems.add(f"{path}pluginConfig", "must be a map from plugin name to its entry")
        return {}, ""
    return plugins, f"{path}pluginConfig"


def _configuration(entry: Any, where: str, problems: Problems) -> Mapping[str, Any] | None:
    if not isinstance(entry, Mapping):
        problems.add(where, "must be a map with configuration:")
        return None
    if "location" in entry:
        problems.add(f"{where}.location", "a file on a master is not read; put the file's "
                     "content under configuration: instead")
    unknown = sorted(set(entry) - {"configuration", "location"})
    if unknown:
        problems.add(where, f"unknown key(s) {', '.join(map(str, unknown))}; "
                     "use configuration:")
    configuration = entry.get("configuration")
    if configuration is None:
        return {} if "location" not in entry else None
    if not isinstance(configuration, Mapping):
        problems.add(f"{where}.configuration", "must be a map")
        return None
    return configuration


def _node_selector(configuration: Mapping[str, Any], where: str, problems: Problems
                   ) -> pns.Settings:
    unknown = sorted(set(configuration) - {"podNodeSelectorPluginConfig"})
    if unknown:
        problems.add(where, f"unknown key(s) {', '.join(map(str, unknown))}; "
                     "use podNodeSelectorPluginConfig:")
    entries = configuration.get("podNodeSelectorPluginConfig") or {}
    if not isinstance(entries, Mapping):
        problems.add(f"{where}.podNodeSelectorPluginConfig", "must be a map of "
                     "clusterDefaultNodeSelector and namespace names to label selectors")
        return pns.Settings()
    default: dict[str, str] = {}
    whitelists: dict[str, dict[str, str]] = {}
    for key, value in entries.items():
        at = f"{where}.podNodeSelectorPluginConfig.{key}"
        if not isinstance(value, str):
            problems.add(at, "must be a string of key=value pairs separated by commas "
                         "(quote it in YAML)")
            continue
        try:
            parsed = selector_to_map(value)
        except SelectorError as error:
            problems.add(at, str(error))
            continue
        if key == pns.CLUSTER_DEFAULT_KEY:
            default = parsed
        elif not isinstance(key, str) or not _NAMESPACE_NAME.match(key) or len(key) > 63:
            problems.add(at, "not a namespace name (lowercase letters, digits and '-') "
                         f"nor {pns.CLUSTER_DEFAULT_KEY}")
        else:
            whitelists[key] = parsed
    return pns.Settings(cluster_default=default, whitelists=whitelists)


def _tolerations(configuration: Mapping[str, Any], where: str, problems: Problems
                 ) -> ptr.Settings:
    unknown = sorted(set(configuration) - {"apiVersion", "kind", "default", "whitelist"})
    if unknown:
        problems.add(where, f"unknown key(s) {', '.join(map(str, unknown))}; use default: "
                     "and whitelist:")
    version = configuration.get("apiVersion")
    if version is not None and version != TOLERATION_API_VERSION:
        problems.add(f"{where}.apiVersion", f"{version!r}; use {TOLERATION_API_VERSION}")
    kind = configuration.get("kind")
    if kind is not None and kind != "Configuration":
        problems.add(f"{where}.kind", f"{kind!r}; use Configuration")
    lists: dict[str, list[ptr.Toleration]] = {}
    for name in ("default", "whitelist"):
        value = configuration.get(name) or []
        if not isinstance(value, list):
            problems.add(f"{where}.{name}", "must be a list of tolerations")
            continue
        lists[name] = []
        for index, toleration in enumerate(value):
            problem = (ptr.toleration_problem(toleration) if isinstance(toleration, Mapping)
                       else "is not a map")
            if problem:
                problems.add(f"{where}.{name}[{index}]", str(problem))
            else:
                lists[name].append(dict(toleration))
    return ptr.Settings(default=lists.get("default", []), whitelist=lists.get("whitelist", []))


def _constraints(configuration: Mapping[str, Any], where: str, problems: Problems
                 ) -> pnc.Settings:
    unknown = sorted(set(configuration) - {"apiVersion", "apiversion", "kind",
                                           "nodeSelectorLabelBlacklist"})
    if unknown:
        problems.add(where, f"unknown key(s) {', '.join(map(str, unknown))}; use "
                     "nodeSelectorLabelBlacklist:")
    version = configuration.get("apiVersion", configuration.get("apiversion"))
    if version is not None and version != "v1":
        problems.add(f"{where}.apiVersion", f"{version!r}; use v1")
    kind = configuration.get("kind")
    if kind is not None and kind != "PodNodeConstraintsConfig":
        problems.add(f"{where}.kind", f"{kind!r}; use PodNodeConstraintsConfig")
    blacklist = configuration.get("nodeSelectorLabelBlacklist")
    if blacklist is None:
        return pnc.Settings(enabled=True)
    if not isinstance(blacklist, list):
        problems.add(f"{where}.nodeSelectorLabelBlacklist", "must be a list of label keys")
        return pnc.Settings(enabled=True)
    keys: list[str] = []
    for index, key in enumerate(blacklist):
        problem = label_key_problem(key) if isinstance(key, str) else "is not a string"
        if problem:
            problems.add(f"{where}.nodeSelectorLabelBlacklist[{index}]", f"{key!r}: {problem}")
        else:
            keys.append(key)
    return pnc.Settings(enabled=True, blacklist=keys)
