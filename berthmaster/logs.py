"""One log format for every berthmaster component: JSON lines by default, text on request.

Design: :func:`configure` puts one handler on the root logger, so the component's own loggers,
kopf's (``kopf.*``, including its per-object loggers) and the libraries' all write the same
shape to stderr. A JSON line is one object with these keys, always in this order:

``time``       RFC 3339 UTC with milliseconds (``2026-11-23T12:00:00.123Z``)
``level``      ``debug``, ``info``, ``warning``, ``error`` or ``critical``
``component``  ``scheduler``, ``operator``, ... (the command that logs)
``logger``     the Python logger (``berthmaster.scheduler``, ``kopf.objects``, ...)
``message``    the message

then the Kubernetes objects the line is about, the way klog's structured logging writes
``klog.KObj``: the key is the object's role (``pod``, ``node``, ``machine``, ``lease``, ...), the
value ``{"name": ..., "namespace": ...}`` (no ``namespace`` for cluster-scoped objects); then any
other ``extra=`` fields, and ``error`` with the traceback when there is one. A caller names an
object by passing an :class:`ObjectRef` in ``extra``; kopf's per-object records (its
``k8s_ref``) are rendered the same way under their kind's lower-case name.

The text format carries the same fields on one line:
``2026-11-23T12:00:00.123Z INFO scheduler berthmaster.scheduler: bound pod=ns/p node=n1``.

Levels follow klog's ``-v N`` (:mod:`berthmaster.verbosity`): below 4 INFO and above, from 4
DEBUG.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

FORMATS = ("json", "text")
KEYS = ("time", "level", "component", "logger", "message")

# Attributes every LogRecord has; what else a record carries came from ``extra=``.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message", "asctime", "taskName"}
# kopf's per-object extras: its reference is rendered as an object, the rest is its plumbing.
_KOPF_REF, _KOPF_PLUMBING = "k8s_ref", {"k8s_skip", "settings"}


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
        namespace, _, name = key.rpartition("/")
        return cls(name, namespace)

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "namespace": self.namespace} if self.namespace else {
            "name": self.name}

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def timestamp(created: float) -> str:
    seconds = int(created)
    millis = int((created - seconds) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def fields(record: logging.LogRecord, component: str) -> dict[str, Any]:
    """The record as the ordered fields of a log line (pure; both formats render these)."""
    line: dict[str, Any] = {
        "time": timestamp(record.created),
        "level": record.levelname.lower(),
        "component": component,
        "logger": record.name,
        "message": record.getMessage(),
    }
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
        elif key not in KEYS:
            extras[key] = value
    line.update(objects)
    line.update(extras)
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
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["error"] = record.exc_text
        return json.dumps(line, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    def __init__(self, component: str):
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        line = fields(record, self.component)
        text = (f"{line.pop('time')} {line.pop('level').upper()} {line.pop('component')} "
                f"{line.pop('logger')}: {line.pop('message')}")
        for key, value in line.items():
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
    from berthmaster.verbosity import DEBUG_LEVEL

    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter(component, fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbosity >= DEBUG_LEVEL else logging.INFO)
    # Library internals stay quiet below debug verbosity (kopf's own configure does the same).
    for noisy in ("asyncio", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbosity >= DEBUG_LEVEL
                                          else logging.WARNING)


def add_log_format(parser: argparse.ArgumentParser) -> None:
    """``--log-format json|text`` (kube-scheduler's ``--logging-format`` spelling too)."""
    parser.add_argument("--log-format", "--logging-format", dest="log_format", choices=FORMATS,
                        default="json",
                        help="log lines as JSON objects (default) or text; the same keys: "
                             "time, level, component, logger, message, objects, fields")
