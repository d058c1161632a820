"""A throw-away OCI registry on loopback: the CNCF distribution registry (``registry serve``,
built from hack/registry like every tool, berthmaster.tooling.devcluster.build), for `make e2e`
to publish to and the real node to pull from.

Design: :func:`registry_config` is the pure configuration (distribution's
configuration/configuration.go: ``version``, ``storage.filesystem.rootdirectory``,
``http.addr``); :func:`running_registry` starts it on a free loopback port with its storage in
a folder of the caller's, waits for ``GET /v2/`` (the distribution spec's API version check) and
stops it on exit. Plain HTTP, loopback only: Docker, helm ``--plain-http``, cosign
``--allow-http-registry`` and containerd's hosts.toml (kubelet.registry_hosts_toml) accept it.
"""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from berthmaster.tooling.devcluster.ports import free_port
from berthmaster.tooling.processes import terminate

LOOPBACK = "127.0.0.1"


class RegistryError(RuntimeError):
    """The registry did not start; the message says why and where its log is."""


def registry_config(storage: Path, address: str) -> dict[str, Any]:
    """distribution's configuration for a filesystem-backed registry at ``address``."""
    return {"version": 0.1, "log": {"level": "warn"},
            "storage": {"filesystem": {"rootdirectory": str(storage)},
                        "delete": {"enabled": True}},
            "http": {"addr": address}}


@contextmanager
def running_registry(binary: Path, folder: Path, ready_within: float = 30) -> Iterator[str]:
    """Serve a registry from ``folder`` (config, storage, log); yields ``127.0.0.1:PORT``."""
    folder.mkdir(parents=True, exist_ok=True)
    address = f"{LOOPBACK}:{free_port()}"
    config = folder / "config.yml"
    config.write_text(yaml.safe_dump(registry_config(folder / "storage", address)))
    log = folder / "registry.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(binary), "serve", str(config)], stdout=out,
                                   stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + ready_within
        while True:
            try:
                with urllib.request.urlopen(f"http://{address}/v2/", timeout=2):
                    break
            except (urllib.error.URLError, OSError) as error:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RegistryError(f"the registry at {address} did not answer /v2/ "
                                        f"({error}); its log: {log}") from error
                time.sleep(0.2)
        yield address
    finally:
        terminate(process)
