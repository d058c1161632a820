"""``berthmaster version``: the package version and the pinned versions of the local tools."""

from __future__ import annotations

import argparse

from berthmaster import __version__


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no options


def short_version() -> str:
    """The first line of ``berthmaster version``, and all ``berthmaster --version`` prints (the
    short form, as ``kube-scheduler --version`` prints ``Kubernetes v1.35.4``)."""
    return f"berthmaster {__version__}"


def run(args: argparse.Namespace) -> int:
    del args
    print(short_version())
    try:
        from berthmaster.tooling.devcluster.build import KUBE_VERSION
    except ModuleNotFoundError:  # the image leaves the tooling out (.dockerignore)
        return 0
    print(f"local control plane: Kubernetes {KUBE_VERSION} (built from the Go module proxy)")
    return 0
