"""One log format for every berthmaster component: Kubernetes' JSON lines by default, text on
request.

Design: :func:`configure` puts one handler on the root logger, so the component's own loggers,
kopf's (``kopf.*``, including its per-object loggers) and the libraries' all write the same
shape to stderr. A JSON line has the keys of Kubernetes' JSON logging format
(k8s.io/component-base/logs/json/json.go: zap's encoder with ``ts``, ``logger``, ``caller``,
``msg``, and zapr's ``v`` and ``err``), in zap's order:

``ts``         milliseconds since the Unix epoch, a float (``epochMillisTimeEncoder``)
``logger``     the Python logger (``berthmaster.scheduler``, ``kopf.objects``, ...)
``caller``     ``directory/file.py:line``, as zap's ``ShortCallerEncoder``
``msg``        the message
``v``          the klog verbosity of an info line: 0 for INFO (and WARNING: klog writes a
               warning as an info line through logr), 4 for DEBUG; absent on ERROR and
               CRITICAL lines, as zapr writes an error

then ``component`` (``scheduler``, ``operator``, ...: the command that logs), the Kubernetes
objects the line is about the way klog's structured logging writes ``klog.KObj`` (the key is
the object's role, ``pod``, ``node``, ``machine``, ``lease``, ...; the value ``{"name": ...,
"namespace": ...}``, no ``namespace`` for cluster-scoped objects), any other ``extra=`` fields,
and last ``err`` (zapr's ``ErrorKey("err")``): an exception's one line, its traceback under
``stacktrace``; an ``extra`` field named ``error`` is written as ``err`` too. A caller names an
object by passing an :class:`ObjectRef` in ``extra``; kopf's per-object records (its
``k8s_ref``) are rendered the same way under their kind's lower-case name.

The text format carries the same fields on one line, with a readable time and the level:
``2026-11-23T12:00:00.123Z INFO scheduler berthmaster.scheduler: bound pod=ns/p node=n1``.

Levels follow klog's ``-v N`` (:mod:`berthmaster.foundation.verbosity`): below 4 INFO and above,
from 4
DEBUG.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from berthmaster.foundation.keys import object_key

FORMATS = ("json", "text")
# The keys every JSON line starts with, in this order (``v`` follows on info lines).
KEYS = ("ts", "logger", "caller", "msg")
ERROR_KEY, STACKTRACE_KEY, VERBOSITY_KEY = "err", "stacktrace", "v"

# Attributes every LogRecord has; what else a record carries came from ``extra=``.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message", "asctime", "taskName"}
# kopf's per-object extras: its reference is rendered as an object, the rest is its plumbing.
_KOPF_REF, _KOPF_PLUMBING = "k8s_ref", {"k8s_skip", "settings"}
# klog's level of a debug line (berthmaster.foundation.verbosity.DEBUG_LEVEL, not imported: that
# module
# is the CLI's).
_DEBUG_V = 4


@dataclass(frozen=True)
class ObjectRef:
    """A Kubernetes object named in a log line (klog's ``KObj``)."""

    name: str
    namespace: str = ""

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> ObjectRef:
        meta = body.get("metadata") or {}
        return cls(str(meta.get("name") or ""), str(meta.get("namespace") or ""))

    @classmethod
    def from_key(cls, key: str) -> ObjectRef:
        """``namespace/name`` (or a bare ``name`` for cluster-scoped objects)."""
        namespace, _, name = key.rpartition("/")  # never raises: a log line must not fail
        return cls(name, namespace)

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "namespace": self.namespace} if self.namespace else {
            "name": self.name}

    def __str__(self) -> str:
        return object_key(self.namespace, self.name)


def timestamp(created: float) -> str:
    seconds = int(created)
    millis = int((created - seconds) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def caller(pathname: str, lineno: int) -> str:
    """``directory/file.py:line``: the file and its directory, as zap's ShortCallerEncoder."""
    parts = pathname.replace("\\", "/").rsplit("/", 2)
    return f"{'/'.join(parts[-2:])}:{lineno}"


def verbosity(levelno: int) -> int | None:
    """klog's ``v`` of a record: None for errors (zapr writes no ``v`` on them)."""
    if levelno >= logging.ERROR:
        return None
    return _DEBUG_V if levelno < logging.INFO else 0


def key_values(record: logging.LogRecord) -> dict[str, Any]:
    """The record's objects, then its other ``extra=`` fields (pure)."""
    objects: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    for key, value in record.__dict__.items():
        if key in _STANDARD or key.startswith("_") or key in _KOPF_PLUMBING:
            continue
        if key == _KOPF_REF and isinstance(value, Mapping):
            kind = str(value.get("kind") or "object").lower()
            objects[kind] = ObjectRef(str(value.get("name") or ""),
                                      str(value.get("namespace") or ""))
        elif isinstance(value, ObjectRef):
            objects[key] = value
        else:
            extras[key] = value
    return {**objects, **extras}


def fields(record: logging.LogRecord, component: str) -> dict[str, Any]:
    """The record as the ordered fields of a Kubernetes JSON log line, without the exception
    (pure)."""
    line: dict[str, Any] = {
        "ts": record.created * 1000.0,
        "logger": record.name,
        "caller": caller(record.pathname, record.lineno),
        "msg": record.getMessage(),
    }
    v = verbosity(record.levelno)
    if v is not None:
        line[VERBOSITY_KEY] = v
    line["component"] = component
    extras = key_values(record)
    error = extras.pop("error", None)
    for key, value in extras.items():
        if key not in line:
            line[key] = value
    if error is not None:
        line[ERROR_KEY] = error
    return line


def _json_value(value: Any) -> Any:
    if isinstance(value, ObjectRef):
        return value.as_json()
    if isinstance(value, int | float | bool | str | None):
        return value
    return str(value)


class JsonFormatter(logging.Formatter):
    def __init__(self, component: str):
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        line = {key: _json_value(value) for key, value in fields(record, self.component).items()}
        if record.exc_info and record.exc_info[1] is not None:
            line[ERROR_KEY] = "".join(traceback.format_exception_only(
                record.exc_info[1])).strip()
            line[STACKTRACE_KEY] = self.formatException(record.exc_info)
        elif record.exc_text:
            line[STACKTRACE_KEY] = record.exc_text
        return json.dumps(line, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    def __init__(self, component: str):
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        text = (f"{timestamp(record.created)} {record.levelname} {self.component} "
                f"{record.name}: {record.getMessage()}")
        for key, value in key_values(record).items():
            shown = str(value)
            text += f" {key}={json.dumps(shown) if (' ' in shown or not shown) else shown}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def formatter(component: str, fmt: str = "json") -> logging.Formatter:
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r}; use one of {', '.join(FORMATS)}")
    return JsonFormatter(component) if fmt == "json" else TextFormatter(component)


def configure(component: str, fmt: str = "json", verbosity: int = 0,
              stream: TextIO | None = None) -> None:
    """Route every logger of the process to one stderr handler in ``fmt``; ``verbosity`` is
    klog's ``-v`` level."""
    from berthmaster.foundation.verbosity import DEBUG_LEVEL

    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter(component, fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbosity >= DEBUG_LEVEL else logging.INFO)
    # Library internals stay quiet below debug verbosity (kopf's own configure does the same).
    for noisy in ("asyncio", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbosity >= DEBUG_LEVEL
                                          else logging.WARNING)


def add_log_format(parser: argparse.ArgumentParser, default: Any = "json") -> None:
    """``--log-format json|text`` (kube-scheduler's ``--logging-format`` spelling too)."""
    parser.add_argument("--log-format", "--logging-format", dest="log_format", choices=FORMATS,
                        default=default,
                        help="log lines as Kubernetes' JSON log format (default: ts, logger, "
                             "caller, msg, v, then the fields, err) or as text")
