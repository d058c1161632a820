"""The contract every operator capability is written to: how it starts, stops, holds its
state and reports its health.

A capability (``berthmaster operator --only NAME``; the names are
:data:`berthmaster.operator.command.CAPABILITIES`) is a set of kopf handlers registered when its
``handlers`` module is imported. What it keeps between handler calls — queues, workers, what the
watches told so far — is a :class:`Runtime`:

- **starts** in a ``@kopf.on.startup()`` handler, which builds the runtime over the operator's
  shared client (:func:`berthmaster.operator.client.operator_client`) and calls
  :func:`install`: ``start()`` creates its asyncio tasks in kopf's event loop;
- **holds its state** in the runtime object, kept in kopf's ``memo`` under the runtime's name;
  the event handlers find it with :func:`running` (kopf answers an event that comes before the
  startup handler finished with a retry, not an error), never in module globals;
- **stops** before the shared client closes: :func:`install` registers ``stop()`` with
  :func:`berthmaster.operator.client.stop_before_close`, whose cleanup handler awaits every
  stop in order and only then closes the client;
- **reports its health** through ``ready()``, an ``(ok, reason)`` condition of the operator's
  ``/readyz`` (:mod:`berthmaster.operator.health`), registered by :func:`install` under the
  runtime's name.

A capability with no state between calls (``podgroups``: each event handler reads and writes
what it needs) has no runtime and nothing to install. docs/architecture.md lists each
capability's runtime.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any, Protocol, TypeVar

import kopf

from berthmaster.operator import health
from berthmaster.operator.client import stop_before_close


class Runtime(Protocol):
    """What a capability keeps running between handler calls."""

    def start(self) -> None:
        """Create the runtime's tasks (in kopf's event loop; awaits nothing)."""

    async def stop(self) -> None:
        """Cancel the tasks and wait for them (the shared client is still open)."""

    def ready(self) -> tuple[bool, str]:
        """``(True, "ok")``, or False and what is wrong (a worker that died, a cache not
        synced), for ``/readyz``."""


R = TypeVar("R", bound=Runtime)


def install(memo: MutableMapping[str, Any], name: str, runtime: Runtime) -> None:
    """Start ``runtime``, stop it before the operator's client closes, report its health, and
    keep it in kopf's ``memo`` under ``name`` for :func:`running`."""
    runtime.start()
    stop_before_close(runtime.stop)
    health.set_check(name, runtime.ready)
    memo[name] = runtime


def running(memo: Mapping[str, Any], name: str, kind: type[R]) -> R:
    """The runtime :func:`install` kept under ``name``; before that, a kopf TemporaryError
    (the event is handled again a second later)."""
    runtime = memo.get(name)
    if not isinstance(runtime, kind):
        raise kopf.TemporaryError(f"the {name} capability is still starting", delay=1)
    return runtime
