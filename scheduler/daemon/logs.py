"""JSON log lines (one object per line), as kube-scheduler's ``--logging-format=json``.

Design: a :class:`logging.Formatter` that writes ``ts`` (seconds since the epoch), ``level``,
``logger``, ``msg`` and every ``extra=`` field the caller passed, so a log line says which pod,
node or lease it is about in fields a log pipeline can index.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value if isinstance(value, int | float | bool | str | None) else str(
                    value)
        if record.exc_info:
            line["err"] = self.formatException(record.exc_info)
        return json.dumps(line, separators=(",", ":"))


def configure(fmt: str = "json", verbose: bool = False) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
