"""``berthmaster explain pod NAMESPACE/NAME``: why each node of the live cluster fits a pod or not.

Design: the command reads the pod, every object placement reads and the Policy the scheduler
runs with (``berthmaster.scheduler.live``), then answers with ``simulate``'s own path: the
objects go through :func:`~berthmaster.scheduler.simulate.build_inputs`, the pod is placed by
:func:`~berthmaster.scheduler.simulate.simulate` with ``explain=True`` (the engine's per-node
predicate verdicts and priority scores, then preemption when nothing fits) and printed by
:func:`~berthmaster.scheduler.simulate.write_result`. So ``explain`` and ``simulate --explain``
give the same answer on the same cluster state (a snapshot saved with ``simulate
--from-cluster --save FILE`` replays it offline).

Only the pod asked about is placed: other pending pods use nothing, as in the cluster. A pod
that is already bound is explained as if it were pending: its own placement is taken out of the
snapshot (it would otherwise compete with itself for its node), and the answer says so. Every
node is evaluated (``--percentage-of-nodes-to-score 100``) unless asked otherwise.

Usable as a kubectl plugin: the ``kubectl-berthmaster`` console script runs this CLI, so
``kubectl berthmaster explain pod NAMESPACE/NAME`` works once it is on PATH.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import sys
from dataclasses import dataclass, field
from typing import Any

from berthmaster.foundation.errors import ConfigurationError
from berthmaster.foundation.kube import CORE, KubeClient, KubeError, resource_path
from berthmaster.foundation.verbosity import add_verbosity
from berthmaster.scheduler import live
from berthmaster.scheduler.engine import Engine
from berthmaster.scheduler.live import ConfiguredPolicy
from berthmaster.scheduler.simulate import (
    SCHEDULER_NAME,
    Source,
    build_inputs,
    simulate,
    write_result,
)
from berthmaster.scheduler.snapshot import pod_key

JSON = dict[str, Any]
POD_KINDS = ("pod", "pods", "po")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=POD_KINDS, metavar="pod",
                        help="what to explain: pod (the only kind)")
    parser.add_argument("pod", metavar="NAMESPACE/NAME",
                        help="the pod; NAME alone is looked up in --namespace")
    parser.add_argument("-n", "--namespace", default="default",
                        help="namespace of a pod given without one (default: default)")
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then "
                             "in-cluster)")
    parser.add_argument("--context", metavar="NAME", help="the kubeconfig context to use")
    parser.add_argument("--policy", "--policy-config-file", dest="policy", metavar="FILE",
                        help="scheduler Policy file, or a KubeSchedulerConfiguration (its "
                             "first profile) (default: the running scheduler's policy "
                             "ConfigMap, else the default policy)")
    parser.add_argument("--policy-configmap", metavar="NAME",
                        help="read the Policy from this ConfigMap (key policy.json or "
                             "policy.cfg)")
    parser.add_argument("--policy-configmap-namespace", metavar="NAMESPACE",
                        help="namespace of --policy-configmap (default: kube-system, as "
                             "kube-scheduler's flag)")
    parser.add_argument("--scheduler-name", default=SCHEDULER_NAME, metavar="NAME",
                        help="the running scheduler's --scheduler-name (default berthmaster): "
                             "a pod naming another scheduler is explained with a note")
    parser.add_argument("--seed", type=int, default=0,
                        help="random seed for breaking score ties (default 0)")
    parser.add_argument("--percentage-of-nodes-to-score", type=int, default=100, metavar="N",
                        help="stop filtering after this percentage of nodes fit (default 100: "
                             "explain every node; 0 = adaptive, as the scheduler)")
    parser.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    add_verbosity(parser)


def pod_reference(text: str, namespace: str) -> tuple[str, str]:
    """(namespace, name) from ``NAMESPACE/NAME`` or ``NAME`` (in ``namespace``)."""
    parts = text.split("/")
    if len(parts) == 1 and parts[0]:
        return namespace, parts[0]
    if len(parts) == 2 and all(parts):
        return parts[0], parts[1]
    raise ConfigurationError(f"{text!r} is not a pod reference; give NAMESPACE/NAME "
                             "(or NAME with -n NAMESPACE)")


@dataclass
class Explanation:
    """The answer: ``placement`` is one entry of ``simulate``'s ``placements``."""

    pod: str
    placement: JSON
    notes: list[str] = field(default_factory=list)


def as_pending(pod: JSON, scheduler_name: str = SCHEDULER_NAME) -> tuple[JSON, list[str]]:
    """A copy of ``pod`` the engine places afresh, and notes on what was set aside."""
    meta = pod.get("metadata") or {}
    key = f"{meta.get('namespace')}/{meta.get('name')}"
    spec = pod.get("spec") or {}
    notes: list[str] = []
    pending = copy.deepcopy(pod)
    node = spec.get("nodeName")
    if node:
        notes.append(f"pod {key} is bound to node {node}; explained as if it were pending "
                     "(its own placement is not counted)")
        del pending["spec"]["nodeName"]
    scheduler = spec.get("schedulerName") or "default-scheduler"
    if scheduler != scheduler_name:
        notes.append(f"pod {key} has schedulerName {scheduler}, so {scheduler_name} does not "
                     "schedule it; explained as if it did")
    return pending, notes


def explain(objects: list[JSON], pod: JSON, engine: Engine,
            scheduler_name: str = SCHEDULER_NAME) -> Explanation:
    """Place ``pod`` on the cluster of ``objects`` (which may hold the pod itself: its own
    placement is left out) and explain every node's verdict. Pure."""
    target = pod_key(pod)
    mine = [o for o in objects if o.get("kind") == "Pod" and pod_key(o) == target]
    pod = mine[0] if mine else pod  # as read with the rest (it may have been bound since)
    others = [o for o in objects if not (o.get("kind") == "Pod" and pod_key(o) == target)]
    pending, notes = as_pending(pod, scheduler_name)
    snapshot, queue = build_inputs([Source("the live cluster", others),
                                    Source("the explained pod", [pending], place_all=True)])
    (evaluated,) = [p for p in queue if pod_key(p) == target]
    (placement,) = simulate(snapshot, [evaluated], engine, explain=True)
    return Explanation(placement["pod"], placement, notes)


def result_document(explanation: Explanation, policy: ConfiguredPolicy) -> JSON:
    notes = [*([policy.note] if policy.note else []), *explanation.notes]
    return {"pod": explanation.pod, "policy": policy.source, "notes": notes,
            "placements": [explanation.placement]}


async def read_live(args: argparse.Namespace, namespace: str, name: str,
                    policy: ConfiguredPolicy | None
                    ) -> tuple[JSON, list[JSON], ConfiguredPolicy]:
    """(the pod, every object placement reads, the Policy) from one connection."""
    async with await KubeClient.connect(args.kubeconfig, context=args.context) as kube:
        try:
            pod = await kube.get(resource_path(CORE, "pods", namespace, name))
        except KubeError as error:
            if error.not_found:
                raise ConfigurationError(
                    f"pod {namespace}/{name} not found; check the namespace and name "
                    f"(kubectl get pods -n {namespace})") from error
            raise live.api_error("get", "pods", error, namespace, name) from error
        if policy is not None:
            return pod, await live.list_cluster(kube), policy
        objects, configured = await asyncio.gather(
            live.list_cluster(kube),
            live.configured_policy(kube, args.policy_configmap, args.policy_configmap_namespace,
                                   (pod.get("spec") or {}).get("schedulerName")))
        return pod, objects, configured


def run(args: argparse.Namespace) -> int:
    namespace, name = pod_reference(args.pod, args.namespace)
    if args.policy and args.policy_configmap:
        raise ConfigurationError("--policy and --policy-configmap both name a Policy; give one")
    try:
        policy = live.policy_file(args.policy) if args.policy else None
        pod, objects, policy = asyncio.run(read_live(args, namespace, name, policy))
        engine = Engine(policy.policy, seed=args.seed,
                        percentage_of_nodes_to_score=args.percentage_of_nodes_to_score)
        explanation = explain(objects, pod, engine, args.scheduler_name)
    except ValueError as error:  # PolicyError, an unreadable file, a malformed object
        print(f"berthmaster explain: {error}", file=sys.stderr)
        return 2
    document = result_document(explanation, policy)
    if args.output == "table":
        print(f"policy: {policy.source}")
        for note in document["notes"]:
            print(f"note: {note}")
    write_result(document, args.output, sys.stdout)
    return 0
