"""Pods per topology domain, kept in step with the snapshot, for inter-pod affinity and spread.

Required pod anti-affinity and topology spread ask, for every decision, "which domains of
topology key K hold a pod that ...?". Answering it from the pods costs O(matching pods) per
decision, quadratic over a workload that matches itself (one pod per node, or spread over
zones). The snapshot instead keeps a ``Domains`` tally per question and updates it on each pod
add and remove, so a decision reads the answer:

- per distinct affinity term of the assigned pods (once a decision asked about it), the pods
  *carrying* the term (``Snapshot.carrier_domains``): for a required anti-affinity term, the
  nodes an incoming pod that the term selects may not use; for the other kinds, the weight the
  term adds to each domain in the inter-pod affinity score;
- per *watch*, a (selector, namespaces, topology key) an incoming pod asked about, the pods the
  selector *matches* (``Snapshot.matching_domains``): the pod's own required anti-affinity,
  topology spread's counts and the pod's own preferred terms in the score. Watches are made
  on first use and the most recent ``WATCHES`` are kept; a pod add or remove meets only the
  watches whose anchor its labels satisfy (``term_anchors``), so keeping them costs O(the
  pod's labels) per pod.

A tally counts, per domain value, the pods there and how many of them are being deleted
(topology spread leaves those out), and keeps ``blocked``: the names of the nodes in every
domain holding a pod. A node has one value per key, so domains are disjoint and ``blocked``
changes exactly when a domain's first pod arrives or its last one leaves.

Only pods on nodes the snapshot knows, in a domain of the key, are counted: what the direct
computation (``_domains_of`` in the inter-pod affinity plugin) counts. A node added, removed or
relabelled moves nodes between domains; rather than patch every tally, the snapshot bumps its
``topology_epoch`` and each tally is rebuilt from the pods the next time it is read (node
changes are rare beside pod changes: heartbeats never reach the snapshot, see daemon/cache).
"""

from __future__ import annotations

from collections.abc import Set

# watched (selector, namespaces, key) tallies kept at once: one per workload shape in practice
WATCHES = 64


class Domains:
    """Pods per domain value of one topology key, and the nodes of the occupied domains
    (``blocked``, kept only when ``keep_nodes``: what the filters read; a score reads only the
    counts, and the nodes of every occupied zone would cost each tally a set of most nodes)."""

    __slots__ = ("blocked", "deleting", "epoch", "keep_nodes", "key", "pods")

    def __init__(self, key: str, epoch: int, keep_nodes: bool = True) -> None:
        self.key = key
        self.epoch = epoch  # the snapshot's topology_epoch when this was built
        self.keep_nodes = keep_nodes
        self.pods: dict[str, int] = {}
        self.deleting: dict[str, int] = {}
        self.blocked: set[str] = set()

    def add(self, value: str, delta: int, deleting: bool, members: Set[str]) -> None:
        """Count ``delta`` pods (negative: uncount) in domain ``value``, whose nodes are
        ``members``."""
        before = self.pods.get(value, 0)
        after = before + delta
        if after > 0:
            self.pods[value] = after
            if before == 0 and self.keep_nodes:
                self.blocked |= members
        else:
            self.pods.pop(value, None)
            if before > 0 and self.keep_nodes:
                self.blocked -= members
        if deleting:
            left = self.deleting.get(value, 0) + delta
            if left > 0:
                self.deleting[value] = left
            else:
                self.deleting.pop(value, None)

    def live(self, value: str) -> int:
        """Pods in domain ``value`` that are not being deleted."""
        return self.pods.get(value, 0) - self.deleting.get(value, 0)
