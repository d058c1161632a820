"""Waiting for the cluster to reach a state, with a timeout that says what was awaited (and a
single GET to poll an HTTP endpoint with)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp

T = TypeVar("T")


async def wait_for(
    condition: Callable[[], Awaitable[T] | T],
    timeout: float = 30.0,
    what: str = "condition",
    interval: float = 0.2,
) -> T:
    """Poll ``condition`` until it returns something truthy and return that value.

    Raises AssertionError naming ``what`` (and the last value or error seen) on timeout, so a
    failing test says what it was waiting for instead of hanging or failing obscurely.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = condition()
            if inspect.isawaitable(value):
                value = await value
            last = value
            if value:
                return value  # type: ignore[return-value]
        except AssertionError as error:
            last = error
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        await asyncio.sleep(interval)


async def http_get(url: str) -> tuple[int, str]:
    """GET ``url`` once: (status, body), or (0, "") when nothing answers (for polling an
    endpoint that is still starting with :func:`wait_for`)."""
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            return response.status, await response.text()
    except aiohttp.ClientError:
        return 0, ""
