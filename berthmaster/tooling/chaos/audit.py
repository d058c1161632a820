"""Who bound a pod, from the API server's audit log: attribution the binder cannot drop.

A scheduler's ``Scheduled`` Event is written by the scheduler itself, best effort and after the
binding: a deposed leader that binds and dies (or whose event is dropped) leaves no trace there.
The pod does not say either: a binding is written by ``BindingREST.setPodNodeAndMetadata``
straight through storage (pkg/registry/core/pod/storage/storage.go, kubernetes 1.35.4), past
the handlers that keep ``managedFields``, so ``spec.nodeName`` is recorded under no field
manager whatever ``fieldManager`` or User-Agent the binder sends (checked on the local control
plane: after a binding with ``?fieldManager=binder-a`` the pod's managedFields list only its
creator's fields). The API server's audit log does record every request, with the
authenticated user, the response code and the time it was received
(staging/src/k8s.io/apiserver/pkg/apis/audit/types.go: ``Event``).

So the campaign starts kube-apiserver with :data:`POLICY` (Metadata level for pod writes by the
group :data:`SCHEDULERS`, nothing else) and gives each scheduler process life its own client
certificate, whose common name is its leader-election identity: an audit entry names the life
that acted, in the Lease's own words. :func:`act_of` reads one entry (pure);
:class:`AuditTail` reads the log's new complete lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from berthmaster.foundation.times import parse_rfc3339


def stamp_seconds(text: str | None) -> float | None:
    """An object's or audit entry's RFC 3339 stamp in epoch seconds; None when absent or not a
    stamp (the campaign's observers record what they can and go on)."""
    try:
        moment = parse_rfc3339(text)
    except ValueError:
        return None
    return None if moment is None else moment.timestamp()


SCHEDULERS = "chaos:schedulers"  # the group (certificate organisation) of every scheduler life
POLICY = f"""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["{SCHEDULERS}"]
  verbs: [create, delete]
  resources:
  - group: ""
    resources: [pods, pods/binding]
- level: None
"""


def flags(policy: Path, log: Path) -> list[str]:
    """kube-apiserver's audit flags (cmd/kube-apiserver options: ``--audit-*``): one JSON
    object a line, written before the response (``blocking``), never rotated."""
    return [f"--audit-policy-file={policy}", f"--audit-log-path={log}",
            "--audit-log-format=json", "--audit-log-mode=blocking", "--audit-log-maxsize=0"]


@dataclass(frozen=True)
class Act:
    """One write of a scheduler life: ``bind`` (pods/binding) or ``delete`` (a preemption
    victim), on ``pod`` (namespace/name), received at ``at`` (epoch seconds)."""

    user: str
    verb: str
    pod: str
    at: float
    code: int

    @property
    def succeeded(self) -> bool:
        return 200 <= self.code < 300


def act_of(entry: dict[str, Any]) -> Act | None:
    """The scheduler act an audit ``Event`` records, or None (another request, another stage,
    a user outside :data:`SCHEDULERS`)."""
    if entry.get("kind") != "Event" or entry.get("stage") != "ResponseComplete":
        return None
    user = entry.get("user") or {}
    if SCHEDULERS not in (user.get("groups") or ()):
        return None
    ref = entry.get("objectRef") or {}
    if ref.get("resource") != "pods" or ref.get("apiGroup"):
        return None
    verb, subresource = entry.get("verb"), ref.get("subresource") or ""
    if verb == "create" and subresource == "binding":
        kind = "bind"
    elif verb == "delete" and not subresource:
        kind = "delete"
    else:
        return None
    at = stamp_seconds(entry.get("requestReceivedTimestamp"))
    if at is None:
        return None
    code = int((entry.get("responseStatus") or {}).get("code") or 0)
    return Act(str(user.get("username") or ""), kind,
               f"{ref.get('namespace') or ''}/{ref.get('name')}", at, code)


@dataclass
class AuditTail:
    """The new complete lines of an audit log since the last read (the file may not exist
    yet; a partial last line waits for its end)."""

    path: Path
    offset: int = 0
    malformed: int = 0

    def read(self) -> list[Act]:
        try:
            with self.path.open("rb") as log:
                log.seek(self.offset)
                data = log.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        acts = []
        for line in data[:end].splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                self.malformed += 1
                continue
            act = act_of(entry) if isinstance(entry, dict) else None
            if act is not None:
                acts.append(act)
        return acts
