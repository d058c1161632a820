"""Installing a CustomResourceDefinition from deploy/crds on the test session's control plane
and waiting until it is served."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def install_crd(cluster: Any, path: Path) -> None:
    """``kubectl apply`` the CRD file, then wait (60 s at most) for it to be Established."""
    applied = cluster.kubectl("apply", "-f", str(path))
    assert applied.returncode == 0, applied.stderr
    name = next(d for d in yaml.safe_load_all(path.read_text()) if d)["metadata"]["name"]
    established = cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                                  f"crd/{name}")
    assert established.returncode == 0, established.stderr
