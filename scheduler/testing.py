"""A test kit for scheduler plugins: a cluster from YAML, one pod through a profile, and every
plugin's verdict and score to assert on.

Design: nothing here is a stand-in. :func:`snapshot_from_yaml` reads what ``kubectl get
nodes,pods -o yaml`` prints (a ``kind: List``, or any stream of objects) through the same path
``berthmaster simulate`` reads its cluster file; :func:`profile_from_yaml` loads a
KubeSchedulerConfiguration as the scheduler does (so an out-of-tree plugin is found through its
installed entry point and its arguments through its own parser); :func:`run_pod` asks the
scheduler's engine for one decision in its explain mode, which evaluates every filter on every
node and keeps every score. Plugins run contained, as in the scheduler: a plugin that raises
makes :func:`run_pod` raise the :class:`~berthmaster.scheduler.framework.PluginError` the
scheduler would report.

Example (docs/plugins.md, "Testing")::

    snapshot = snapshot_from_yaml(CLUSTER)
    profile = profile_from_yaml(CONFIG)
    outcome = run_pod(POD, snapshot, profile)
    assert outcome.node == "licensed-1"
    assert outcome.filters["plain-1"]["LicensedNodes"] == "node(s) had no license for matlab"
    assert outcome.scores["licensed-1"]["LicensedNodes"] == 100
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from berthmaster.foundation.documents import parse_documents, safe_load
from berthmaster.scheduler.config import load_config
from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.policy import Policy
from berthmaster.scheduler.simulate import Source, build_inputs, iter_objects
from berthmaster.scheduler.snapshot import Snapshot

__all__ = ["Outcome", "profile_from_yaml", "run_pod", "snapshot_from_yaml"]


def snapshot_from_yaml(text: str, source: str = "<cluster>") -> Snapshot:
    """The cluster of a YAML stream (a ``kubectl get -o yaml`` List, or objects separated by
    ``---``): nodes, bound pods and the other kinds the scheduler reads. Unbound pods are
    left out: place them with :func:`run_pod`."""
    docs = parse_documents(text, source)
    snapshot, _pending = build_inputs([Source(source, iter_objects(docs, source))])
    return snapshot


def profile_from_yaml(text: str, scheduler_name: str | None = None,
                      source: str = "<config>") -> Policy:
    """One profile of a KubeSchedulerConfiguration: ``scheduler_name``'s, else the first."""
    config = load_config(text, source)
    if scheduler_name is None:
        return config.profiles[0]
    for profile in config.profiles:
        if profile.scheduler_name == scheduler_name:
            return profile
    raise KeyError(f"{source}: no profile has schedulerName {scheduler_name!r}; it has "
                   f"{', '.join(config.scheduler_names)}")


@dataclass(frozen=True)
class Outcome:
    """One pod's decision. ``filters``: node -> plugin -> ``""`` (passed or skipped) or the
    rejection's words; ``scores``: feasible node -> score plugin -> its normalised score
    (before the weight); ``totals``: feasible node -> weighted sum. ``message`` is the
    FailedScheduling text when nothing fits."""

    node: str | None
    message: str
    filters: dict[str, dict[str, str]] = field(default_factory=dict)
    scores: dict[str, dict[str, int]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)

    def rejected_by(self, plugin: str) -> set[str]:
        """The nodes ``plugin`` rejected."""
        return {node for node, row in self.filters.items() if row.get(plugin)}


def run_pod(pod: Mapping[str, Any] | str, snapshot: Snapshot, profile: Policy | None = None,
            *, seed: int = 0) -> Outcome:
    """Run ``pod`` (an object, or its YAML) through ``profile`` (default: kube-scheduler
    1.35's default profile) on ``snapshot``, which is left unchanged. Ties between equal
    totals are broken by a generator seeded with ``seed``."""
    obj = safe_load(pod) if isinstance(pod, str) else pod
    if not isinstance(obj, Mapping) or obj.get("kind", "Pod") != "Pod":
        raise ValueError("run_pod takes one Pod (an object or its YAML)")
    obj = dict(obj)
    meta = dict(obj.get("metadata") or {})
    meta.setdefault("namespace", "default")
    meta.setdefault("name", "pod")
    obj["metadata"] = meta
    decision = Engine(profile, seed=seed).schedule(obj, snapshot, explain=True)
    return Outcome(decision.node, decision.message, decision.verdicts,
                   decision.priority_scores, decision.scores)
