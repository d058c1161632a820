"""A Grafana dashboard checked against Grafana's own dashboard model.

Design: the model is grafana-foundation-sdk (PyPI, Apache-2.0), whose classes Grafana generates
from its dashboard schema (models/dashboard.py: Dashboard, Panel, RowPanel, VariableModel, ...;
the panel options and the Prometheus query of models/timeseries.py, stat.py, prometheus.py,
registered by cog/plugins.py). The document is read with the model's ``from_json``; then
:func:`problems` reports

- a field the model does not declare (lost when the model writes the dashboard back), unless
  listed in ``UNDECLARED`` with the reason Grafana accepts it;
- a value that comes back changed;
- a value whose type is not the one the model's constructor declares (``typing`` hints:
  ``Optional``, unions, ``Literal``, lists, enums, nested model classes).

Fields the model adds with its defaults when writing back are Grafana's defaults, not errors.
"""

from __future__ import annotations

import enum
import json
import types
import typing
from collections.abc import Mapping
from typing import Any

from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard

# Fields Grafana writes and reads but the model leaves out, by the key's name and where.
UNDECLARED = {
    # A query variable's text as its editor shows it; Grafana's variable editor saves it beside
    # ``query`` (and reads ``query``).
    ("templating", "definition"),
}
_MODELS = "grafana_foundation_sdk.models."


def problems(document: Mapping[str, Any]) -> list[str]:
    """What in ``document`` Grafana's dashboard model does not accept; empty when all is."""
    register_default_plugins()
    model = Dashboard.from_json(dict(document))
    found = _type_problems(model, "dashboard")
    back = json.loads(json.dumps(model, cls=JSONEncoder))
    found += _lost(document, back, "dashboard")
    return found


def _lost(original: Any, back: Any, path: str) -> list[str]:
    if isinstance(original, Mapping):
        if not isinstance(back, Mapping):
            return [f"{path}: an object the model reads as {back!r}"]
        found = []
        for key, value in original.items():
            if key not in back:
                if (path.split(".")[1] if "." in path else "", key) not in UNDECLARED:
                    found.append(f"{path}.{key}: not a field of Grafana's dashboard model")
                continue
            found += _lost(value, back[key], f"{path}.{key}")
        return found
    if isinstance(original, list):
        if not isinstance(back, list) or len(back) != len(original):
            return [f"{path}: a list the model reads as {back!r}"]
        return [p for index, (a, b) in enumerate(zip(original, back, strict=True))
                for p in _lost(a, b, f"{path}[{index}]")]
    if original != back:
        return [f"{path}: {original!r} comes back from the model as {back!r}"]
    return []


def _type_problems(model: Any, path: str) -> list[str]:
    hints = typing.get_type_hints(type(model).__init__)
    found = []
    for name, hint in hints.items():
        if name == "return" or not hasattr(model, name):
            continue
        found += _conforms(getattr(model, name), hint, f"{path}.{name}")
    return found


def _conforms(value: Any, hint: Any, path: str) -> list[str]:
    origin = typing.get_origin(hint)
    arguments = typing.get_args(hint)
    if hint is Any:
        return []
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in arguments:
            return []
        options = [argument for argument in arguments if argument is not type(None)]
        attempts = [_conforms(value, option, path) for option in options]
        if any(not attempt for attempt in attempts):
            return []
        # Report against the option of the value's own class (Panel or RowPanel), if any.
        for option, attempt in zip(options, attempts, strict=True):
            if isinstance(option, type) and isinstance(value, option):
                return attempt
        return attempts[0] if len(attempts) == 1 else [
            f"{path}: {value!r} is none of {[str(option) for option in options]}"]
    if origin is typing.Literal:
        return [] if value in arguments else [f"{path}: {value!r} is not one of {arguments}"]
    if hint is type(None):
        return [] if value is None else [f"{path}: {value!r} is not null"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {value!r} is not a list"]
        return [p for index, item in enumerate(value)
                for p in _conforms(item, arguments[0], f"{path}[{index}]")]
    if origin is dict:
        return [] if isinstance(value, dict) else [f"{path}: {value!r} is not an object"]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        if isinstance(value, hint) or value in {member.value for member in hint}:
            return []
        return [f"{path}: {value!r} is not one of {[m.value for m in hint]}"]
    if hint is bool:
        return [] if isinstance(value, bool) else [f"{path}: {value!r} is not a boolean"]
    if hint in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                hint is int and not float(value).is_integer()):
            return [f"{path}: {value!r} is not a {hint.__name__}"]
        return []
    if hint is str:
        return [] if isinstance(value, str) else [f"{path}: {value!r} is not a string"]
    if isinstance(hint, type):
        if not isinstance(value, hint):
            return [f"{path}: {value!r} is not a {hint.__name__}"]
        return _type_problems(value, path) if type(value).__module__.startswith(_MODELS) else []
    return []
