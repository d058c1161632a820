"""A clock for tests of time-window logic: it moves only when told, so no test waits on, or
races, the wall clock."""

from __future__ import annotations


class FakeClock:
    """Callable like ``time.monotonic``; ``sleep`` (an awaitable like ``asyncio.sleep``)
    records the wait and moves the clock by it; ``tick`` moves it without a sleep."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
