"""The descheduler's feature gates (``--feature-gates``), and the one berthmaster knows.

Upstream (sigs.k8s.io/descheduler pkg/features/features.go) has one alpha gate,
``EvictionsInBackground`` (default false): evictions of pods annotated
``descheduler.alpha.kubernetes.io/request-evict-only`` that the API answers with 429 and
"Eviction triggered evacuation" (KubeVirt's live migration) count as evictions in progress,
and pods already carrying ``descheduler.alpha.kubernetes.io/eviction-in-progress`` are not
evicted again and count against the limits (pkg/descheduler/evictions/evictions.go). The flag
is component-base's ``key=value,key=value`` map (cliflag.MapStringBool, strconv.ParseBool
values); an unknown gate is refused as featuregate.Set refuses it.
"""

from __future__ import annotations

EVICTIONS_IN_BACKGROUND = "EvictionsInBackground"
KNOWN = {EVICTIONS_IN_BACKGROUND: False}
TRUE = ("1", "t", "T", "TRUE", "true", "True")
FALSE = ("0", "f", "F", "FALSE", "false", "False")


def parse_feature_gates(text: str) -> dict[str, bool]:
    """``--feature-gates``'s value as every known gate's setting; ValueError naming the fault."""
    gates = dict(KNOWN)
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"missing bool value for {key}")
        if value.strip() not in TRUE + FALSE:
            raise ValueError(f"invalid value of {key}={value}, err: strconv.ParseBool: parsing "
                             f'"{value}": invalid syntax')
        if key.strip() not in KNOWN:
            raise ValueError(f"unrecognized feature gate: {key.strip()}")
        gates[key.strip()] = value.strip() in TRUE
    return gates
