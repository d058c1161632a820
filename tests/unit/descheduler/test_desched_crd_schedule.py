"""The Descheduler CRD's schedule rule refuses what CronJob refuses (out-of-range fields).

Kubernetes validates a CronJob's schedule with robfig/cron's ``ParseStandard``
(kubernetes ``pkg/apis/batch/validation/validation.go``, ``validateScheduleFormat``): five
fields, each a list of ``*``/``?``, a value or a range, with an optional ``/step``; minute 0-59,
hour 0-23, day of month 1-31, month 1-12 or names, day of week 0-6 or names (robfig/cron
``parser.go``, ``bounds``). The CRD's CEL rule is a regular expression; RE2 (CEL) and Python's
``re`` agree on this subset, so the table runs the rule's own pattern here, and
tests/integration/chart/test_crds_and_samples.py has the API server evaluate it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

CRD = Path(__file__).resolve().parents[3] / "deploy" / "crds" / "berthmaster.io_deschedulers.yaml"

VALID = ["*/10 * * * *", "0 3 * * *", "59 23 31 12 6", "0 0 1 1 0", "0,15,30,45 * * * *",
         "0-30/5 8-18 * * mon-fri", "0 0 * JAN,jul SUN", "* * ? * ?", "5/15 * * * *",
         "@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually",
         "0  3   * * *"]
INVALID = ["99 99 * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *",
           "* * * 13 *", "* * * 0 *", "* * * * 7", "*/0 * * * *", "* * * *", "* * * * * *",
           "@reboot", "@every 1h", "TZ=UTC 0 3 * * *", "0 3 * * funday", "1-", ""]


def schedule_pattern() -> re.Pattern[str]:
    crd = yaml.safe_load(CRD.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    rule = schema["properties"]["spec"]["properties"]["schedule"][
        "x-kubernetes-validations"][0]["rule"]
    match = re.fullmatch(r"self\.matches\('(.*)'\)", rule)
    assert match, rule
    return re.compile(match.group(1))


@pytest.mark.parametrize("schedule", VALID)
def test_crontab_schedules_are_accepted(schedule: str) -> None:
    assert schedule_pattern().search(schedule)


@pytest.mark.parametrize("schedule", INVALID)
def test_out_of_range_or_malformed_schedules_are_refused(schedule: str) -> None:
    assert not schedule_pattern().search(schedule)
