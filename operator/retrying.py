"""kopf handlers retry what is transient, and only that.

Design: kopf retries a handler that raises anything but :class:`kopf.PermanentError`, every
minute, for ever. An API error tells which it is (``KubeError.transient``: no answer, a
timeout, a conflict, 429, a server error): :func:`transient_only` wraps a handler so a transient
error becomes :class:`kopf.TemporaryError` (retried after ``delay`` seconds; kopf logs
"failed temporarily") and any other API error a :class:`kopf.PermanentError` (not retried
until the object changes; kopf logs "failed permanently"), each message saying which and why.
Other exceptions pass through unchanged (a handler's own TemporaryError stays one).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import kopf

from berthmaster.foundation.kube import KubeError

RETRY_SECONDS = 10.0

Handler = TypeVar("Handler", bound=Callable[..., Awaitable[Any]])


def as_kopf_error(error: KubeError, delay: float = RETRY_SECONDS) -> kopf.TemporaryError | \
        kopf.PermanentError:
    if error.transient:
        return kopf.TemporaryError(f"{error} (transient: retrying in {delay:g} s)", delay=delay)
    return kopf.PermanentError(f"{error} (not transient: not retried until the object changes)")


def transient_only(handler: Handler) -> Handler:
    @functools.wraps(handler)
    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return await handler(*args, **kwargs)
        except KubeError as error:
            raise as_kopf_error(error) from error

    return wrapped  # type: ignore[return-value]
