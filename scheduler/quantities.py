"""Resource quantities as placement counts them: integers, cpu in millicores, everything else
in units, rounded up as the API server's ``MilliValue``/``Value`` do
(k8s.io/apimachinery pkg/api/resource/quantity.go).

Design: one parser for the whole project (``parse_quantity`` is exact, over ``Fraction``);
``resource_list`` turns a ResourceList into ``{name: int}`` and names the field of a bad value.
The resource names and the scheduler's non-zero defaults (pkg/scheduler/util/pod_resources.go,
DefaultMilliCPURequest and DefaultMemoryRequest) live here so that the model and the request
rules (:mod:`.pod_resources`) share them without importing each other.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

Obj = Mapping[str, Any]

# Requests assumed for scoring when a container sets none (upstream's non-zero defaults).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# --------------------------------------------------------------------------------------------
# Quantities
# --------------------------------------------------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, Fraction | int] = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


class QuantityError(ValueError):
    """A resource quantity that Kubernetes would not accept."""


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a Kubernetes quantity ("100m", "1Gi", "1e3", "2Ki", "0.5") exactly."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity {value!r} is a boolean; write a number such as 1 or '500m'")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"quantity {value!r} is not finite")
        return Fraction(str(value))
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(
            f"invalid quantity {value!r}: expected a number with an optional suffix "
            "(m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent such as 1e3)")
    number, exponent, suffix = match.groups()
    amount = Fraction(number)
    if exponent:
        power = int(exponent[1:])
        scale = Fraction(int(10**abs(power)))
        return amount * scale if power >= 0 else amount / scale
    suffix = suffix or ""
    factor: Fraction | int = _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    return amount * factor


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


_QUANTITY_MEMO: dict[tuple[bool, str], int] = {}
_QUANTITY_MEMO_LIMIT = 4096


def quantity_value(resource: str, value: str | int | float) -> int:
    """A resource amount as the engine counts it: millicores for cpu, units (rounded up) else."""
    # clusters repeat a handful of request strings ("500m", "1Gi"): parse each once
    memo_key = (resource == CPU, value) if type(value) is str else None
    if memo_key is not None:
        known = _QUANTITY_MEMO.get(memo_key)
        if known is not None:
            return known
    q = parse_quantity(value)
    amount = _ceil(q * 1000) if resource == CPU else _ceil(q)
    if memo_key is not None:
        if len(_QUANTITY_MEMO) >= _QUANTITY_MEMO_LIMIT:
            _QUANTITY_MEMO.clear()
        _QUANTITY_MEMO[memo_key] = amount
    return amount


def resource_list(raw: Obj | None, where: str = "resources") -> dict[str, int]:
    out: dict[str, int] = {}
    for name, value in (raw or {}).items():
        try:
            out[name] = quantity_value(name, value)
        except QuantityError as exc:
            raise QuantityError(f"{where}.{name}: {exc}") from None
    return out
