"""``berthmaster_build_info``: which berthmaster a component runs, as a metric.

Design: Kubernetes components export ``kubernetes_build_info``, a gauge with the constant
value 1 whose labels describe the build (component-base metrics/prometheus/version/metrics.go:
``major``, ``minor``, ``git_version``, ``git_commit``, ``git_tree_state``, ``build_date``,
``go_version``, ``compiler``, ``platform``). Ours has the labels that apply to a Python
package: ``major``, ``minor`` and ``git_version`` (``v`` and the package version, as
Kubernetes' ``v1.35.4``), ``python_version`` in place of ``go_version``, ``compiler`` (the
Python implementation, as Go's ``gc``) and ``platform`` (``linux/amd64``: Go's GOOS/GOARCH
names). The package is not stamped at build time, so there is no commit, tree state or build
date to report. :func:`build_info_labels` is pure; :func:`register_build_info` puts the gauge
on a component's registry (the scheduler's, the operator's, the admission webhook's).
"""

from __future__ import annotations

import platform
import re
import weakref

from prometheus_client import CollectorRegistry, Gauge

from berthmaster import __version__

NAME = "berthmaster_build_info"
LABELS = ("major", "minor", "git_version", "python_version", "compiler", "platform")
# Python's platform.machine() -> Go's GOARCH (the spelling kubernetes_build_info's platform uses).
GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64",
          "ppc64le": "ppc64le", "s390x": "s390x", "i386": "386", "i686": "386",
          "armv7l": "arm"}


def build_info_labels(version: str, python_version: str, implementation: str, system: str,
                      machine: str) -> dict[str, str]:
    """The labels of ``berthmaster_build_info`` for this version and interpreter."""
    numbers = re.match(r"(\d+)\.(\d+)", version)
    major, minor = numbers.groups() if numbers else ("", "")
    arch = GOARCH.get(machine.lower(), machine.lower())
    return {"major": major, "minor": minor, "git_version": f"v{version}",
            "python_version": python_version, "compiler": implementation.lower(),
            "platform": f"{system.lower()}/{arch}"}


_REGISTERED: weakref.WeakSet[CollectorRegistry] = weakref.WeakSet()


def register_build_info(registry: CollectorRegistry) -> None:
    """``berthmaster_build_info`` with this process' labels, set to 1, on ``registry`` (once:
    the operator's is the process-wide default registry)."""
    if registry in _REGISTERED:
        return
    _REGISTERED.add(registry)
    gauge = Gauge(NAME, "A metric with a constant '1' value labeled by major, minor, git "
                  "version, Python version and implementation from which berthmaster was "
                  "built, and platform on which it is running.", LABELS, registry=registry)
    gauge.labels(**build_info_labels(__version__, platform.python_version(),
                                     platform.python_implementation(), platform.system(),
                                     platform.machine())).set(1)
