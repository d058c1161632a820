"""The loopback registry's configuration (distribution v3:
configuration/configuration.go, ``Storage`` ``filesystem.rootdirectory``, ``HTTP.Addr``)."""

from __future__ import annotations

from pathlib import Path

from berthmaster.tooling.devcluster.registry import registry_config


def test_a_filesystem_registry_on_the_given_address() -> None:
    config = registry_config(Path("/work/storage"), "127.0.0.1:5000")
    assert config["version"] == 0.1
    assert config["storage"]["filesystem"] == {"rootdirectory": "/work/storage"}
    assert config["http"] == {"addr": "127.0.0.1:5000"}
