"""The one log format of every component (berthmaster.foundation.logs): keys, object references,
kopf's
records, levels.

The keys are Kubernetes' JSON logging format (k8s.io/component-base/logs/json/json.go):
``ts`` in float milliseconds (``epochMillisTimeEncoder``), ``logger``, ``caller`` (zap's
``ShortCallerEncoder``), ``msg``, then zapr's ``v`` on info lines (``LogInfoLevel("v")``) and
``err`` for errors (``ErrorKey("err")``); component-base's json_test.go expects
``{"ts":%f,"caller":"json/json_test.go:%d","msg":"hello world","v":0}`` and, for an error,
``{"ts":%f,"caller":...,"msg":"failed","err":"some error"}`` (no ``v``).

The object reference follows klog's structured logging: ``klog.KObj`` renders
``{"name": ..., "namespace": ...}`` and drops an empty namespace (k8s.io/klog/v2 ``ObjectRef``
``MarshalLog``); kube-scheduler's JSON lines carry ``"pod": {...}`` and ``"node": {...}`` so.
kopf's per-object records carry ``k8s_ref`` (kopf/_core/actions/loggers.py ``ObjectLogger``).
"""

from __future__ import annotations

import io
import json
import logging
import re
from typing import Any

import pytest

from berthmaster.foundation import logs

TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def record(message: str = "bound", level: int = logging.INFO, name: str = "berthmaster.x",
           exc: bool = False, **extra: Any) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("boom")
        except ValueError:
            import sys
            exc_info = sys.exc_info()
    made = logging.LogRecord(name, level, __file__, 1, message, (), exc_info)
    made.created = 1795435200.1234  # 2026-11-23T12:00:00.123Z
    for key, value in extra.items():
        setattr(made, key, value)
    return made


def as_json(made: logging.LogRecord, component: str = "scheduler") -> dict[str, Any]:
    line = logs.JsonFormatter(component).format(made)
    assert "\n" not in line
    decoded: dict[str, Any] = json.loads(line)
    return decoded


def test_the_keys_come_first_in_a_fixed_order() -> None:
    line = as_json(record(pod=logs.ObjectRef("p", "ns"), attempts=3))
    assert list(line) == ["ts", "logger", "caller", "msg", "v", "component", "pod", "attempts"]
    assert line["ts"] == pytest.approx(1795435200123.4)
    assert (line["logger"], line["msg"], line["v"], line["component"]) == (
        "berthmaster.x", "bound", 0, "scheduler")
    assert line["caller"] == "observability/test_logs.py:1"
    assert line["attempts"] == 3


@pytest.mark.parametrize(("path", "expected"), [
    ("/app/berthmaster/scheduler/daemon/binder.py", "daemon/binder.py"),
    ("binder.py", "binder.py"),
    ("C:\\src\\pkg\\mod.py", "pkg/mod.py"),
])
def test_caller_is_the_file_and_its_directory(path: str, expected: str) -> None:
    assert logs.caller(path, 12) == f"{expected}:12"


@pytest.mark.parametrize(("extra", "expected"), [
    ({"pod": logs.ObjectRef("p", "ns")}, {"pod": {"name": "p", "namespace": "ns"}}),
    ({"node": logs.ObjectRef("n1")}, {"node": {"name": "n1"}}),
    ({"pod": logs.ObjectRef.from_key("ns/p"), "node": logs.ObjectRef.from_key("n1")},
     {"pod": {"name": "p", "namespace": "ns"}, "node": {"name": "n1"}}),
    ({"lease": logs.ObjectRef.of({"metadata": {"name": "l", "namespace": "kube-system"}})},
     {"lease": {"name": "l", "namespace": "kube-system"}}),
    # kopf's per-object logger: its reference under the kind's name, its plumbing dropped
    ({"k8s_ref": {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
                  "name": "m", "namespace": "ns", "uid": "u"}, "k8s_skip": False,
      "settings": object()},
     {"machine": {"name": "m", "namespace": "ns"}}),
    ({"k8s_ref": {"kind": "Node", "name": "n", "namespace": None}}, {"node": {"name": "n"}}),
    # anything else is stringified, never dropped; an error field is written last, as err
    ({"error": ValueError("x"), "flag": "--authentication-kubeconfig"},
     {"flag": "--authentication-kubeconfig", "err": "x"}),
])
def test_objects_and_fields(extra: dict[str, Any], expected: dict[str, Any]) -> None:
    line = as_json(record(**extra))
    assert {k: v for k, v in line.items()
            if k not in (*logs.KEYS, "v", "component")} == expected
    assert list(line)[-1] == list(expected)[-1]


@pytest.mark.parametrize(("level", "v"), [
    (logging.DEBUG, 4), (logging.INFO, 0), (logging.WARNING, 0),
    (logging.ERROR, None), (logging.CRITICAL, None)])
def test_verbosity_on_info_lines_only(level: int, v: int | None) -> None:
    """klog writes a warning as an info line at v=0 through logr; zapr writes no ``v`` on an
    error line."""
    assert as_json(record(level=level)).get("v") == v


def test_an_exception_is_err_and_its_traceback_stacktrace() -> None:
    line = as_json(record(exc=True, level=logging.ERROR))
    assert line["err"] == "ValueError: boom"
    assert line["stacktrace"].startswith("Traceback (most recent call last)")
    assert "ValueError: boom" in line["stacktrace"]
    assert list(line)[-2:] == ["err", "stacktrace"] and "v" not in line


def test_text_carries_the_same_fields_on_one_line() -> None:
    text = logs.TextFormatter("operator").format(record(
        "drained", pod=logs.ObjectRef("p", "ns"), reason="a b"))
    assert text == ('2026-11-23T12:00:00.123Z INFO operator berthmaster.x: drained pod=ns/p '
                    'reason="a b"')


@pytest.mark.parametrize(("verbosity", "debug_shown"), [(0, False), (2, False), (4, True),
                                                         (10, True)])
def test_configure_routes_every_logger_through_one_handler(verbosity: int,
                                                           debug_shown: bool) -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    stream = io.StringIO()
    try:
        logs.configure("operator", "json", verbosity, stream=stream)
        logging.getLogger("kopf.objects").info("Handler succeeded", extra={
            "k8s_ref": {"kind": "Descheduler", "name": "d", "namespace": "ns"}})
        logging.getLogger("berthmaster.operator").debug("detail")
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines[0]["component"] == "operator"
    assert lines[0]["logger"] == "kopf.objects"
    assert lines[0]["descheduler"] == {"name": "d", "namespace": "ns"}
    assert (len(lines) == 2) is debug_shown


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown log format 'xml'"):
        logs.formatter("scheduler", "xml")
