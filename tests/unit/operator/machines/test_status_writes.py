"""The status write both controllers share (operator/machines/controller.py): an update to
``None`` removes the field, and the merge patch says so with a null (RFC 7386: a field absent
from a merge patch is left as it was), as upstream's controllers clear ``errorReason`` and
``errorMessage`` once a Machine or MachineSet is fixed."""

from __future__ import annotations

from typing import Any

import pytest

from berthmaster.operator.machines.controller import merged_status, status_patch

JSON = dict[str, Any]


@pytest.mark.parametrize(("old", "updates", "new", "patch"), [
    ({"phase": "Running"}, {"phase": "Running"}, {"phase": "Running"}, {"phase": "Running"}),
    ({"phase": "Provisioned"}, {"phase": "Running"}, {"phase": "Running"}, {"phase": "Running"}),
    ({"replicas": 1, "errorReason": "InvalidConfiguration", "errorMessage": "bad selector"},
     {"replicas": 2, "errorReason": None, "errorMessage": None},
     {"replicas": 2},
     {"replicas": 2, "errorReason": None, "errorMessage": None}),
    ({}, {"errorReason": None}, {}, {}),
    ({"phase": "Failed"}, {"errorReason": "CreateError", "errorMessage": "no capacity"},
     {"phase": "Failed", "errorReason": "CreateError", "errorMessage": "no capacity"},
     {"phase": "Failed", "errorReason": "CreateError", "errorMessage": "no capacity"}),
])
def test_an_update_to_none_removes_the_field_and_the_patch_says_null(
        old: JSON, updates: JSON, new: JSON, patch: JSON) -> None:
    assert merged_status(old, updates) == new
    assert status_patch(old, merged_status(old, updates)) == patch
