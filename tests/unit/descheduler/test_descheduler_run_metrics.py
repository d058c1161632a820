"""The run counter's pure part: which Descheduler and result a finished Job counts as
(operator/deschedulers/run_metrics.py; a Job's outcome as operator/deschedulers/status.py reads
it, after k8s.io/api batch/v1 JobStatus' conditions)."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.operator.deschedulers.build import OWNER_LABEL
from berthmaster.operator.deschedulers.run_metrics import run_result


def job(status: dict[str, Any], owner: str | None = "nightly") -> dict[str, Any]:
    labels = {OWNER_LABEL: owner} if owner else {}
    return {"metadata": {"name": "nightly-1", "namespace": "berthmaster", "labels": labels},
            "status": status}


@pytest.mark.parametrize(("status", "expected"), [
    ({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]},
     ("nightly", "succeeded")),
    ({"failed": 1, "conditions": [{"type": "Failed", "status": "True"}]}, ("nightly", "failed")),
    ({"active": 1}, None),
    ({}, None),
])
def test_run_result(status: dict[str, Any], expected: tuple[str, str] | None) -> None:
    assert run_result(job(status)) == expected


def test_a_job_no_descheduler_owns_is_not_counted() -> None:
    assert run_result(job({"failed": 1}, owner=None)) is None
