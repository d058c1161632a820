"""The bytes of review bodies one replica holds at once: a budget reserved before reading.

Design: ``--max-in-flight`` bounds how many reviews are read at once and ``--max-request-bytes``
how large each may be, but their product (32 x 7 MiB = 224 MiB raw, and parsed from one to nine
times that again, by the review's shape) is over the chart's 256Mi memory limit, so a burst of
large reviews could get the webhook OOM-killed. :class:`ByteBudget` is the third bound, on their
sum (``--max-in-flight-bytes``): a review reserves its declared ``Content-Length`` before any of
it is read, a chunked one reserves each chunk as it arrives, and both give everything back when
answered (server.py). A reservation that does not fit is refused at once, never waited for: the
server answers 429 as it does to the excess over ``--max-in-flight``, and the API server applies
the failurePolicy. Pure and single-threaded: the event loop is its only caller, so reserve and
release never interleave.
"""

from __future__ import annotations


class ByteBudget:
    """At most ``limit`` bytes reserved at once."""

    def __init__(self, limit: int):
        self.limit = limit
        self.reserved = 0

    def reserve(self, size: int) -> bool:
        """Take ``size`` more bytes, or nothing and False when they do not fit."""
        if size < 0 or self.reserved + size > self.limit:
            return False
        self.reserved += size
        return True

    def release(self, size: int) -> None:
        """Give back bytes reserved before."""
        self.reserved = max(0, self.reserved - size)


class Reservation:
    """What one review holds of a budget: grown as its body is read, released when answered."""

    def __init__(self, budget: ByteBudget):
        self.budget = budget
        self.size = 0

    def take(self, size: int) -> bool:
        if not self.budget.reserve(size):
            return False
        self.size += size
        return True

    def release(self) -> None:
        self.budget.release(self.size)
        self.size = 0
