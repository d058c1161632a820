"""The gate of the e2e suite: Docker and kind, or one line saying which is missing."""

from __future__ import annotations

import pytest

from e2e.conftest import why_not_runnable


def test_docker_and_kind_are_available() -> None:
    reason = why_not_runnable()
    if reason is not None:
        pytest.skip(f"e2e needs Docker and kind: {reason}; run `make -C e2e e2e` where both "
                    "exist")
