"""The suite's one option: ``--long`` runs the tests marked ``long`` (the soak runs).

``make test`` leaves them out (each shows as skipped, naming the option) to keep the suite
short on two cores; ``make test-long`` (``pytest --long -m long``) runs only them,
and CI (``.ci/run``) runs it right after ``make test``: between the two, every test runs.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--long", action="store_true", default=False,
                     help="also run the tests marked long (the soak runs; `make test-long`)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--long"):
        return
    skip = pytest.mark.skip(reason="a long run: `make test-long` (pytest --long -m long)")
    for item in items:
        if item.get_closest_marker("long") is not None:
            item.add_marker(skip)
