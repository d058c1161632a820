"""The gate of the e2e suite: a cluster set up by `make e2e`, or one line saying why not."""

from __future__ import annotations

import pytest

from e2e.conftest import MODE, why_not_runnable


def test_a_cluster_is_available() -> None:
    reason = why_not_runnable()
    if reason is not None:
        pytest.skip(f"e2e needs a cluster: {reason}; run `make e2e`")
    assert MODE in ("kind", "kubelet")
