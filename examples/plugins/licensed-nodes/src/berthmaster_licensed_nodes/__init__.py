"""LicensedNodes: pods that need a licensed product go to nodes holding seats for it.

A pod asks for a product with the label ``<licenseDomain>/product`` (``matlab``); a node
offers seats with the label ``<licenseDomain>/<product>`` (``"4"``). The Filter rejects nodes
without at least ``minSeats`` seats of the pod's product; the Score prefers the nodes with the
most seats. A pod that asks for no product is left alone (PreFilter Skip, the same score
everywhere).

A label rather than an annotation: the scheduler's cache keeps no pod annotations (what a
plugin can read is in docs/plugins.md).

A node without the license is rejected as UnschedulableAndUnresolvable: evicting pods there
(preemption) cannot create a license. A rejected pod is retried when a node is added or its
labels change (the queueing hints).

Arguments (``pluginConfig``)::

    - name: LicensedNodes
      args:
        licenseDomain: licenses.example.com   # the pod's and the nodes' label prefix
        minSeats: 1                           # fewer seats than this: rejected
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from berthmaster.scheduler import framework

NAME = "LicensedNodes"
DEFAULT_DOMAIN = "licenses.example.com"
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def reason(product: str) -> str:
    return f"node(s) had no license for {product}"


def parse_args(raw: Mapping[str, Any], errors: framework.ArgErrors) -> dict[str, Any]:
    """Default and validate the arguments, reporting every problem at once."""
    known = ("licenseDomain", "minSeats")
    for name in raw:
        if name not in known:
            errors.unknown(name, known)
    domain = raw.get("licenseDomain", DEFAULT_DOMAIN)
    if not isinstance(domain, str) or len(domain) > 253 or not _SUBDOMAIN.match(domain):
        errors.invalid("licenseDomain", domain, "must be a DNS subdomain such as "
                       f"{DEFAULT_DOMAIN!r} (lower case letters, digits, '-' and '.')")
    seats = raw.get("minSeats", 1)
    if isinstance(seats, bool) or not isinstance(seats, int) or seats < 1:
        errors.invalid("minSeats", seats, "must be an integer of at least 1")
    return {"licenseDomain": domain, "minSeats": seats}


def _product(pod: framework.PodView, domain: str) -> str | None:
    product = pod.labels.get(f"{domain}/product")
    return str(product) if product else None


def seats(node: framework.NodeInfo, domain: str, product: str) -> int:
    """The node's seats of ``product`` (0: none, or a label that is not a number)."""
    value = node.labels.get(f"{domain}/{product}", "")
    return int(value) if value.isdigit() else 0


@dataclass
class LicensedNodesFilter(framework.Predicate):
    NAME: ClassVar[str] = NAME
    EVENTS: ClassVar[tuple[str, ...]] = ("Node/Add", "Node/UpdateNodeLabel")

    def prefilter(self, pod: framework.PodView, snapshot: framework.Snapshot
                  ) -> framework.PrefilterResult:
        domain = self.args.get("licenseDomain", DEFAULT_DOMAIN)
        minimum = self.args.get("minSeats", 1)
        product = _product(pod, domain)
        if product is None:
            return None  # Skip: nothing to check for this pod
        rejected = framework.unresolvable(reason(product))  # one Status, shared by the nodes

        def check(node: framework.NodeInfo) -> framework.Status | None:
            return None if seats(node, domain, product) >= minimum else rejected

        return check


@dataclass
class LicensedNodesScore(framework.Priority):
    NAME: ClassVar[str] = NAME

    def scores(self, pod: framework.PodView, snapshot: framework.Snapshot,
               nodes: Sequence[framework.NodeInfo]) -> list[int] | int:
        domain = self.args.get("licenseDomain", DEFAULT_DOMAIN)
        product = _product(pod, domain)
        if product is None:
            return 0  # the same everywhere: cannot change the winner
        return framework.normalize([seats(n, domain, product) for n in nodes])


PLUGIN = framework.plugin(filter=LicensedNodesFilter, score=LicensedNodesScore,
                          args=parse_args)
