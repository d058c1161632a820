"""Lifecycle hooks: the Drainable/Terminable conditions and the hook-change refusal messages."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from berthmaster.operator.machines.hooks import (
    changed_hooks,
    drainable_condition,
    go_format,
    hook_change_refusals,
    terminable_condition,
    with_hook_conditions,
)
from tests.unit.operator.machines.machine_builders import make_machine

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SEED = make_machine(pre_drain=[("MigrateImportantApp", "my-app-migration-controller")],
                    pre_terminate=[("BackupFileSystem", "my-backup-controller"),
                                   ("CloudProviderSpecialCase",
                                    "my-custom-storage-detach-controller"),
                                   ("WaitForStorageDetach", "my-custom-storage-detach-controller")])


def test_go_format_matches_percent_plus_v() -> None:
    assert go_format([{"name": "a", "owner": "b"}, {"name": "c", "owner": "d"}]) == \
        "[{Name:a Owner:b} {Name:c Owner:d}]"
    assert go_format([]) == "[]"


def test_seed_example_blocks_both_stages() -> None:
    drainable = drainable_condition(SEED)
    assert drainable == {
        "type": "Drainable", "status": "False", "severity": "Warning", "reason": "HookPresent",
        "message": "Drain operation currently blocked by: "
                   "[{Name:MigrateImportantApp Owner:my-app-migration-controller}]"}
    terminable = terminable_condition(SEED)
    assert terminable["reason"] == "HookPresent"
    assert terminable["message"].startswith(
        "Terminate operation currently blocked by: "
        "[{Name:BackupFileSystem Owner:my-backup-controller} ")


def test_without_hooks_conditions_are_true() -> None:
    machine = make_machine()
    assert drainable_condition(machine) == {"type": "Drainable", "status": "True"}
    assert terminable_condition(machine) == {"type": "Terminable", "status": "True"}


def test_transition_time_kept_while_status_unchanged() -> None:
    first = with_hook_conditions([], SEED, NOW)
    later = with_hook_conditions(first, SEED, datetime(2026, 1, 2, tzinfo=UTC))
    assert later == first
    released = make_machine(pre_terminate=[("BackupFileSystem", "my-backup-controller")])
    after = with_hook_conditions(first, released, datetime(2026, 1, 3, tzinfo=UTC))
    drainable = next(c for c in after if c["type"] == "Drainable")
    assert drainable == {"type": "Drainable", "status": "True",
                         "lastTransitionTime": "2026-01-03T00:00:00Z"}


@pytest.mark.parametrize(("old", "new", "changed"), [
    ([("a", "x")], [("a", "x")], []),
    ([("a", "x")], [], []),
    ([("a", "x")], [("a", "y")], [("a", "y")]),
    ([], [("b", "z")], [("b", "z")]),
])
def test_changed_hooks(old: list[tuple[str, str]], new: list[tuple[str, str]],
                       changed: list[tuple[str, str]]) -> None:
    as_hooks = lambda pairs: [{"name": n, "owner": o} for n, o in pairs]  # noqa: E731
    assert changed_hooks(as_hooks(old), as_hooks(new)) == as_hooks(changed)


def test_refusal_message_is_upstreams() -> None:
    old = make_machine(deleting=True)
    new = make_machine(deleting=True, pre_drain=[("pre-drain", "pre-drain-owner")])
    assert hook_change_refusals(old, new) == [
        "spec.lifecycleHooks.preDrain: Forbidden: pre-drain hooks are immutable when machine is "
        "marked for deletion: the following hooks are new or changed: "
        "[{Name:pre-drain Owner:pre-drain-owner}]"]
    assert hook_change_refusals(new, old) == []  # removing is allowed
    live_old, live_new = make_machine(), make_machine(pre_drain=[("pre-drain", "o")])
    assert hook_change_refusals(live_old, live_new) == []
