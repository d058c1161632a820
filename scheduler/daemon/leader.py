"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules.

Design: the decision is a pure function, :func:`decide`, over the Lease record read from the
API, what this candidate observed of it before and the clock; :class:`LeaderElector` only does
the I/O around it. The rules are client-go's ``tryAcquireOrRenew``:

- no Lease yet: create it holding it;
- a Lease held by someone else is respected until ``leaseDurationSeconds`` have passed *on our
  clock* since we first saw its current record (clocks are never compared across machines);
- a free (released) or expired Lease is taken: ``leaseTransitions`` + 1, ``acquireTime`` now;
- our own Lease is renewed (``renewTime`` now); writes carry the ``resourceVersion`` read, so
  two candidates racing for one expired Lease cannot both win (the loser gets 409).

A leader that has not renewed within ``renew_deadline`` (10 s, shorter than the 15 s lease)
stops acting at once: :meth:`LeaderElector.is_leader` turns false before any other candidate can
take over. A renewal counts from the moment its request *started* (before the GET), not from
when the reply arrived: client-go stamps the record's ``renewTime`` with the clock read at the
start of ``tryAcquireOrRenew`` (tools/leaderelection/leaderelection.go) and a follower's clock
for the new record (its ``observedTime``) starts only once it has read that record, after our
write landed; so a slow reply (a rate limiter's wait, a stalled connection) shortens our
validity instead of stretching it past what the other candidates allow. Every write that acts
for the leader (binds, preemption's deletes and nominations, status patches) passes
:meth:`LeaderElector.is_leader` as the request's ``fence``, asked after the client's rate
limiter wait, immediately before sending (:mod:`berthmaster.foundation.kube`).

On graceful shutdown the Lease is released (holder emptied, as client-go's
``ReleaseOnCancel``) so a standby takes over within one retry period instead of a whole lease
duration.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from berthmaster.foundation.kube import KubeClient, KubeError, group_path, resource_path
from berthmaster.foundation.logs import ObjectRef
from berthmaster.foundation.times import format_rfc3339_micro

JSON = dict[str, Any]
log = logging.getLogger("berthmaster.scheduler.leader")

LEASES = group_path("coordination.k8s.io", "v1")


@dataclass(frozen=True)
class LeaseRecord:
    holder: str
    lease_duration: int
    acquire_time: str | None
    renew_time: str | None
    transitions: int

    @classmethod
    def from_lease(cls, lease: JSON) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=spec.get("holderIdentity") or "",
            lease_duration=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> JSON:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        }


@dataclass(frozen=True)
class Observation:
    """The last record this candidate saw and when (its own monotonic clock)."""

    record: LeaseRecord | None = None
    at: float = 0.0


@dataclass(frozen=True)
class LeaseDecision:
    action: str  # "create", "update" or "wait"
    record: LeaseRecord | None
    observation: Observation


def decide(
    identity: str,
    current: LeaseRecord | None,
    observed: Observation,
    now: float,
    wall: datetime,
    lease_duration: int,
) -> LeaseDecision:
    """What to do with the Lease as read (``None``: it does not exist)."""
    stamp = format_rfc3339_micro(wall)
    if current is None:
        record = LeaseRecord(identity, lease_duration, stamp, stamp, 0)
        return LeaseDecision("create", record, Observation(record, now))
    if current != observed.record:
        observed = Observation(current, now)
    held_by_other = current.holder not in ("", identity)
    if held_by_other and observed.at + current.lease_duration > now:
        return LeaseDecision("wait", None, observed)
    if current.holder == identity:
        record = replace(current, lease_duration=lease_duration, renew_time=stamp)
    else:
        record = LeaseRecord(identity, lease_duration, stamp, stamp, current.transitions + 1)
    return LeaseDecision("update", record, observed)


def loss_reason(identity: str, holder: str, last_renew: float | None, now: float,
                renew_deadline: float) -> str:
    """Why a leader no longer leads, for the log line before it stops: another candidate
    holds the Lease, or our last renewal is older than the renew deadline (client-go logs
    ``failed to renew lease <namespace>/<name>: <why>`` before ``leaderelection lost``,
    tools/leaderelection/leaderelection.go ``renew``)."""
    if holder not in ("", identity):
        return f"the Lease is held by {holder}"
    if last_renew is None:
        return "the Lease was not held (never acquired, or released)"
    age = now - last_renew
    if age >= renew_deadline:
        return (f"not renewed for {age:.1f}s, past the renew deadline of "
                f"{renew_deadline:g}s")
    return f"renewed {age:.1f}s ago, within the renew deadline of {renew_deadline:g}s"


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class LeaderElector:
    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        name: str,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        on_leading: Callable[[bool], None] | None = None,
    ):
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError(
                "leader election: need lease duration > renew deadline > retry period > 0, got "
                f"{lease_duration} / {renew_deadline} / {retry_period}"
            )
        self.kube = kube
        self.path = resource_path(LEASES, "leases", namespace)
        self.name = name
        self.lease = ObjectRef(name, namespace)
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        # told True on acquiring and False on losing or releasing the Lease (and False at
        # once: a candidate starts as a backup, as client-go's leaderelection metric)
        self.on_leading = on_leading or (lambda leading: None)
        self.on_leading(False)
        self._observed = Observation()
        self._last_renew: float | None = None  # when we last wrote the Lease as its holder
        self._loss_logged = False

    # ---- state -----------------------------------------------------------------------------
    def is_leader(self) -> bool:
        """True while our last successful renewal is younger than the renew deadline."""
        return self._last_renew is not None and (
            self.clock() - self._last_renew < self.renew_deadline
        )

    @property
    def holder(self) -> str:
        return self._observed.record.holder if self._observed.record else ""

    def loss_reason(self) -> str:
        """Why this candidate does not lead now (:func:`loss_reason`)."""
        return loss_reason(self.identity, self.holder, self._last_renew, self.clock(),
                           self.renew_deadline)

    def log_lost(self) -> None:
        """The warning naming the Lease and why, then client-go's ``leaderelection lost``:
        every way out of leading says so before the caller stops (once per leadership: the
        renewal loop and the scheduling loop may both find it lost)."""
        if self._loss_logged:
            return
        self._loss_logged = True
        log.warning("failed to renew lease", extra={"lease": self.lease, "identity":
                                                    self.identity, "reason": self.loss_reason()})
        log.error("leaderelection lost", extra={"lease": self.lease, "identity": self.identity})

    # ---- one attempt -----------------------------------------------------------------------
    async def try_acquire_or_renew(self) -> bool:
        lease_path = f"{self.path}/{self.name}"
        started = self.clock()  # the renewal is valid from here (module docstring)
        try:
            lease: JSON | None = await self.kube.get(lease_path)
        except KubeError as error:
            if not error.not_found:
                log.warning("reading lease failed", extra={"error": str(error)})
                return False
            lease = None
        current = LeaseRecord.from_lease(lease) if lease is not None else None
        decision = decide(self.identity, current, self._observed, self.clock(),
                          datetime.now(UTC), int(self.lease_duration))
        self._observed = decision.observation
        if decision.action == "wait" or decision.record is None:
            return False
        body: JSON = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name},
            "spec": decision.record.to_spec(),
        }
        try:
            if decision.action == "create":
                written = await self.kube.create(self.path, body)
            else:
                assert lease is not None
                body["metadata"]["resourceVersion"] = lease["metadata"]["resourceVersion"]
                written = await self.kube.replace(lease_path, body)
        except KubeError as error:
            log.info("lease write lost", extra={"error": str(error), "lease": self.lease})
            return False
        self._observed = Observation(LeaseRecord.from_lease(written), started)
        self._last_renew = started
        return True

    # ---- loops -----------------------------------------------------------------------------
    async def acquire(self) -> None:
        """Return once this candidate holds the Lease."""
        log.info("attempting to acquire leader lease",
                 extra={"lease": self.lease, "identity": self.identity})
        while not await self.try_acquire_or_renew():  # noqa: ASYNC110 - polling the API
            await asyncio.sleep(self.retry_period * (1 + 0.2 * random.random()))
        log.info("successfully acquired lease", extra={"lease": self.lease,
                                                       "identity": self.identity})
        self._loss_logged = False
        self.on_leading(True)

    async def hold(self) -> None:
        """Renew until leadership is lost, then return (the caller stops acting)."""
        while True:
            await asyncio.sleep(self.retry_period)
            try:
                renewed = await asyncio.wait_for(self.try_acquire_or_renew(),
                                                 timeout=self.renew_deadline)
            except TimeoutError:
                renewed = False
            if renewed:
                continue
            if self.holder not in ("", self.identity):
                break  # someone else holds it now
            if not self.is_leader():
                break  # no renewal within the renew deadline
        self.log_lost()
        self._last_renew = None
        self.on_leading(False)

    async def release(self) -> None:
        """Give the Lease up (graceful shutdown), if we still hold it."""
        if self._last_renew is None:
            return
        self._last_renew = None
        self.on_leading(False)
        lease_path = f"{self.path}/{self.name}"
        try:
            lease = await self.kube.get(lease_path)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            stamp = format_rfc3339_micro(datetime.now(UTC))
            lease["spec"].update({"holderIdentity": "", "leaseDurationSeconds": 1,
                                  "renewTime": stamp, "acquireTime": stamp})
            await self.kube.replace(lease_path, lease)
        except KubeError as error:
            log.warning("releasing lease failed", extra={"error": str(error)})

