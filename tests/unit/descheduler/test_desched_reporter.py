"""When the Descheduler runs' reporter looks at the API server (operator/deschedulers/reporter.py):
only while a Descheduler exists or a run of one is unfinished, so an operator without one asks
nothing at rest."""

from __future__ import annotations

import asyncio

import pytest

from berthmaster.operator.deschedulers.reporter import RunReporter, worth_looking


@pytest.mark.parametrize(("deschedulers", "unfinished", "expected"), [
    ((), False, False),
    ((), True, True),
    (("nightly",), False, True),
    (("nightly",), True, True),
])
def test_worth_looking(deschedulers: tuple[str, ...], unfinished: bool, expected: bool) -> None:
    assert worth_looking(deschedulers, unfinished) is expected


def test_the_reporter_looks_while_a_descheduler_or_an_unfinished_run_exists() -> None:
    looks: list[bool] = []
    answers = iter([True, False])

    async def report() -> bool:
        looks.append(True)
        return next(answers)

    reporter = RunReporter(report)
    asyncio.run(reporter.step())
    assert looks == []  # nothing exists: no request
    reporter.seen("ADDED", {"metadata": {"name": "nightly"}})
    reporter.seen(None, {"metadata": {"name": "nightly"}})  # kopf's initial listing
    assert reporter.deschedulers == {"nightly"}
    reporter.seen("DELETED", {"metadata": {"name": "nightly"}})
    assert reporter.deschedulers == set()
    reporter.unfinished = True  # the last look, before the deletion, saw a run going on
    asyncio.run(reporter.step())
    assert looks == [True] and reporter.unfinished  # still going on
    asyncio.run(reporter.step())
    assert looks == [True, True] and not reporter.unfinished  # finished (or gone)
    asyncio.run(reporter.step())
    assert looks == [True, True]
    reporter.seen("MODIFIED", {"metadata": {}})  # no name: ignored
    assert reporter.deschedulers == set()
