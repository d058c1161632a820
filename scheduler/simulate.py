"""``berthmaster simulate``: place pods offline on a cluster snapshot file.

Input: ``--cluster FILE`` holds any number of YAML documents, each an object or a ``List``
(``kubectl get nodes,pods -A -o yaml`` prints one): Nodes, Pods, Namespaces, Services,
ReplicationControllers, ReplicaSets, StatefulSets, PodDisruptionBudgets, PriorityClasses,
PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes, CSIDrivers,
CSIStorageCapacities; other kinds are ignored.
Pods with ``spec.nodeName`` are running. Pods without it are placed when their schedulerName is
``berthmaster``; every pod of ``--pods FILE`` is placed, whatever its schedulerName.
``--from-cluster`` reads the same kinds from the live cluster instead (what the running
scheduler's cache lists, see ``berthmaster.scheduler.live``), and ``--save FILE`` writes them as
a ``kind: List`` that ``--cluster`` replays offline; both go through :func:`build_inputs`.

Placement follows the scheduler's queue order (priority, then creation time, then file order;
pods without creationTimestamp come after those with one),
each decision applied before the next: a placed pod is counted on its node; when nothing fits,
preemption is evaluated and, when it finds a node, its victims are removed and the pod is
counted on the nominated node (as the scheduler reserves room for nominated pods).

Output: ``-o table`` (default, for people), ``json`` or ``yaml``:
``{"placements": [{"pod", "node", "message", "nominatedNode", "victims"}]}``; ``--explain`` adds
each evaluated node's predicate verdicts and each priority's score. Exit status 0 once the
simulation ran (unschedulable pods are results, not errors), 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

import yaml

from berthmaster.foundation.documents import load_documents, read_text
from berthmaster.foundation.errors import PolicyError
from berthmaster.scheduler.config import default_profile
from berthmaster.scheduler.config import load_profile as load_profile_text
from berthmaster.scheduler.engine import Decision, Engine
from berthmaster.scheduler.model import PodView, resolve_priority
from berthmaster.scheduler.policy import Policy
from berthmaster.scheduler.preemption import evaluate_preemption, failed_scheduling_message
from berthmaster.scheduler.shape import shape_problem
from berthmaster.scheduler.snapshot import KINDS, Snapshot

SCHEDULER_NAME = "berthmaster"


class InputError(ValueError):
    """A cluster or pods file that cannot be read; the message names the file and the fix."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--cluster", metavar="FILE",
                        help="cluster snapshot: YAML documents or kind: List objects "
                             "(e.g. kubectl get nodes,pods -A -o yaml)")
    source.add_argument("--from-cluster", action="store_true",
                        help="snapshot the live cluster (--kubeconfig, $KUBECONFIG, "
                             "~/.kube/config, then in-cluster)")
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="with --from-cluster: the kubeconfig to read the cluster with")
    parser.add_argument("--context", metavar="NAME",
                        help="with --from-cluster: the kubeconfig context to use")
    parser.add_argument("--save", metavar="FILE",
                        help="with --from-cluster: also write the snapshot to FILE, in the "
                             "format --cluster reads (JSON when FILE ends in .json, else YAML)")
    parser.add_argument("--pods", metavar="FILE", help="pods to place (any schedulerName)")
    parser.add_argument("--policy", metavar="FILE",
                        help="scheduler Policy file (JSON or YAML), or a "
                             "KubeSchedulerConfiguration (its first profile: in-tree and "
                             "installed plugins, docs/plugins.md); default: the default "
                             "profile")
    parser.add_argument("--seed", type=int, default=0,
                        help="random seed for breaking score ties (default 0)")
    parser.add_argument("--explain", action="store_true",
                        help="show each node's predicate verdicts and priority scores")
    parser.add_argument("--percentage-of-nodes-to-score", type=int, default=0, metavar="N",
                        help="stop filtering after this percentage of nodes fit "
                             "(0 = adaptive, as kube-scheduler; 100 = all)")
    parser.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")


def iter_objects(docs: list[Any], source: str) -> Iterator[dict[str, Any]]:
    """Every object in the documents of ``source``, unpacking List documents."""
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            raise InputError(f"{source}: document {i + 1} is not an object; expected Kubernetes "
                             "objects or a kind: List")
        kind = str(doc.get("kind") or "")
        if kind.endswith("List") and "items" in doc:
            item_kind = kind[:-4] if kind != "List" else ""
            for item in doc.get("items") or ():
                if isinstance(item, Mapping):
                    obj = dict(item)
                    if not obj.get("kind") and item_kind:
                        obj["kind"] = item_kind
                    yield obj
        else:
            yield dict(doc)


def _describe(kind: str, obj: Mapping[str, Any]) -> str:
    """``Pod default/web`` (or the object's position when it has no usable name)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = str(meta.get("name") or meta.get("generateName") or "<unnamed>")
    namespace = meta.get("namespace")
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _name_pod(pod: dict[str, Any], index: int) -> dict[str, Any]:
    meta = dict(pod.get("metadata") or {})
    if not meta.get("name"):
        if meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{index}"
        else:
            raise InputError(f"pod #{index + 1} has no metadata.name; give it a name")
    meta.setdefault("namespace", "default")
    pod = {**pod, "metadata": meta}
    return pod


@dataclass(frozen=True)
class Source:
    """Objects from one place (a file, the live cluster); ``name`` prefixes their problems.
    ``place_all``: every object is a Pod to place, whatever its schedulerName (``--pods``)."""

    name: str
    objects: Iterable[dict[str, Any]]
    place_all: bool = False


def file_objects(path: str) -> Iterator[dict[str, Any]]:
    """The objects of one snapshot or pods file (read when first iterated)."""
    yield from iter_objects(load_documents(path), path)


def load_inputs(cluster: str, pods_file: str | None) -> tuple[Snapshot, list[dict[str, Any]]]:
    """(snapshot of the cluster file, pods to place in queue order)."""
    sources = [Source(cluster, file_objects(cluster))]
    if pods_file:
        sources.append(Source(pods_file, file_objects(pods_file), place_all=True))
    return build_inputs(sources)


def build_inputs(sources: Iterable[Source]) -> tuple[Snapshot, list[dict[str, Any]]]:
    """(snapshot of the sources' objects, pods to place in queue order): the one path from
    objects to a simulation, whether they come from files or from the live cluster."""
    snapshot = Snapshot()
    pending: list[tuple[dict[str, Any], int]] = []
    order = 0
    for source in sources:
        path, place_all = source.name, source.place_all
        for obj in source.objects:
            kind = str(obj.get("kind") or "")
            if place_all and kind != "Pod":
                raise InputError(f"{path}: holds a {kind or 'kindless object'}; --pods takes "
                                 "only Pods (put other objects in --cluster)")
            if kind not in KINDS:
                continue
            problem = shape_problem(kind, obj)
            if problem is not None:
                raise InputError(f"{path}: {_describe(kind, obj)}: {problem}; fix or remove "
                                 "the object")
            if kind == "Pod":
                obj = _name_pod(obj, order)
                order += 1
                spec = obj.get("spec") or {}
                if spec.get("nodeName"):
                    snapshot.upsert_pod(obj)
                elif place_all or spec.get("schedulerName") == SCHEDULER_NAME:
                    pending.append((obj, order))
                continue
            try:
                snapshot.upsert(kind, obj)
            except ValueError as exc:
                raise InputError(f"{path}: {exc}") from None
    pcs = snapshot.priority_classes

    def queue_key(item: tuple[dict[str, Any], int]) -> tuple[int, bool, str, int]:
        pod, index = item
        created = str((pod.get("metadata") or {}).get("creationTimestamp") or "")
        # a pod without creationTimestamp has not been created yet: it queues after the others
        return (-resolve_priority(pod, pcs), not created, created, index)

    pending.sort(key=queue_key)
    return snapshot, [p for p, _ in pending]


def _explain(decision: Decision) -> dict[str, Any]:
    nodes: dict[str, Any] = {}
    for name, verdicts in decision.verdicts.items():
        entry: dict[str, Any] = {
            "fits": name not in decision.reasons,
            "predicates": {p: (v or "passed") for p, v in verdicts.items()}}
        if name in decision.priority_scores:
            entry["scores"] = decision.priority_scores[name]
            entry["total"] = decision.scores.get(name)
        nodes[name] = entry
    return nodes


def simulate(snapshot: Snapshot, pods: list[dict[str, Any]], engine: Engine,
             explain: bool = False) -> list[dict[str, Any]]:
    """Place ``pods`` one after another on ``snapshot`` (mutated); return the placements."""
    placements: list[dict[str, Any]] = []
    for pod in pods:
        decision = engine.schedule(pod, snapshot, explain=explain)
        entry: dict[str, Any] = {"pod": decision.pod, "node": decision.node,
                                 "message": decision.message, "nominatedNode": None,
                                 "victims": []}
        if decision.node is not None:
            snapshot.assume(pod, decision.node)
            entry["message"] = f"Successfully assigned {decision.pod} to {decision.node}"
        elif decision.total_nodes:
            result = evaluate_preemption(pod, snapshot, engine, decision)
            entry["message"] = failed_scheduling_message(decision, result)
            if result.preemption is not None:
                chosen = result.preemption
                for victim in chosen.victims:
                    snapshot.remove_pod(PodView.from_dict(victim).uid)
                entry["nominatedNode"] = chosen.node
                entry["victims"] = [PodView.from_dict(v).key for v in chosen.victims]
                snapshot.assume(pod, chosen.node)
        if explain:
            entry["nodes"] = _explain(decision)
        placements.append(entry)
    return placements


def render_table(placements: list[dict[str, Any]], out: TextIO) -> None:
    headers = ("POD", "NODE", "NOMINATED", "VICTIMS", "MESSAGE")
    rows = [(p["pod"], p["node"] or "<none>", p["nominatedNode"] or "<none>",
             ",".join(p["victims"]) or "<none>", p["message"]) for p in placements]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers[:-1])]

    def line(cells: tuple[str, ...]) -> str:
        return "   ".join([*(c.ljust(w) for c, w in zip(cells, widths, strict=False)),
                           cells[-1]]).rstrip()

    out.write(line(headers) + "\n")
    for row, p in zip(rows, placements, strict=True):
        out.write(line(row) + "\n")
        for node, info in (p.get("nodes") or {}).items():
            if info["fits"]:
                scores = ", ".join(f"{k}={v}" for k, v in (info.get("scores") or {}).items())
                total = info.get("total")
                detail = f"fits, score {total}" + (f" ({scores})" if scores else "") \
                    if total is not None else "fits"
            else:
                failed = [f"{k}: {v}" for k, v in info["predicates"].items() if v != "passed"]
                detail = "rejected: " + "; ".join(failed)
            out.write(f"    {node}: {detail}\n")


def write_result(result: Mapping[str, Any], output: str, out: TextIO) -> None:
    """``result`` (``{"placements": [...], ...}``) as ``-o json``, ``yaml`` or ``table``; the
    table shows only the placements (callers print any other keys above it)."""
    if output == "json":
        json.dump(result, out, indent=2)
        out.write("\n")
    elif output == "yaml":
        yaml.safe_dump(dict(result), out, sort_keys=False)
    elif not result["placements"]:
        out.write("no pods to place (pods need spec.schedulerName: berthmaster, or use --pods)\n")
    else:
        render_table(result["placements"], out)


def _live_objects(args: argparse.Namespace) -> list[dict[str, Any]]:
    # The pure core never talks to the API server: only this command edge, and only with
    # --from-cluster, reaches it through berthmaster.scheduler.live.
    from berthmaster.scheduler import live

    objects = live.read_cluster(args.kubeconfig, args.context)
    if args.save:
        live.save_snapshot(objects, args.save)
    return objects


def load_profile(path: str) -> Policy:
    """A Policy file, or a KubeSchedulerConfiguration's first profile (told apart by kind)."""
    return load_profile_text(read_text(path), path)


def run(args: argparse.Namespace) -> int:
    if (args.save or args.kubeconfig or args.context) and not args.from_cluster:
        print("berthmaster simulate: --save, --kubeconfig and --context go with --from-cluster; "
              "add it (or drop them to simulate the --cluster file)", file=sys.stderr)
        return 2
    try:
        policy: Policy = load_profile(args.policy) if args.policy else default_profile()
        if args.from_cluster:
            sources = [Source("the live cluster", _live_objects(args))]
            if args.pods:
                sources.append(Source(args.pods, file_objects(args.pods), place_all=True))
            snapshot, pods = build_inputs(sources)
        else:
            snapshot, pods = load_inputs(args.cluster, args.pods)
        engine = Engine(policy, seed=args.seed,
                        percentage_of_nodes_to_score=args.percentage_of_nodes_to_score)
        placements = simulate(snapshot, pods, engine, explain=args.explain)
    except PolicyError as exc:
        print(f"berthmaster simulate: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # InputError, quantities, malformed objects
        print(f"berthmaster simulate: {exc}", file=sys.stderr)
        return 2
    write_result({"placements": placements}, args.output, sys.stdout)
    return 0
