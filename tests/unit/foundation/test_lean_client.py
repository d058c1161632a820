"""kubernetes_asyncio is imported without its generated modules, and is whole when asked.

Each case runs in a fresh interpreter (the deferral happens at the first import of the
process; this test process has long imported kubernetes_asyncio in full).
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

from berthmaster.tooling.python import PYTHON

KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "c",
    "clusters": [{"name": "k", "cluster": {"server": "https://192.0.2.10:6443",
                                           "insecure-skip-tls-verify": True}}],
    "users": [{"name": "u", "user": {"token": "abc"}}],
    "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
}


def run(code: str, tmp_path: Path) -> dict[str, object]:
    script = tmp_path / "probe.py"
    script.write_text(textwrap.dedent(code))
    env = {**os.environ}
    done = subprocess.run([*PYTHON, str(script)], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_the_client_loads_a_kubeconfig_without_the_generated_modules(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(json.dumps(KUBECONFIG))
    out = run(f"""
        import asyncio, json, sys
        from berthmaster.foundation.kube import KubeClient

        async def main():
            kube = await KubeClient.from_kubeconfig({str(config)!r})
            try:
                return kube.host
            finally:
                await kube.close()

        host = asyncio.run(main())
        loaded = [m for m in sys.modules if m.startswith("kubernetes_asyncio.client.")]
        print(json.dumps({{"host": host,
                          "models": [m for m in loaded if ".models." in m],
                          "apis": [m for m in loaded if ".api." in m]}}))
    """, tmp_path)
    assert out == {"host": "https://192.0.2.10:6443", "models": [], "apis": []}


def test_any_other_name_loads_the_whole_package(tmp_path: Path) -> None:
    out = run("""
        import json
        import berthmaster.foundation.kube
        import kubernetes_asyncio
        from kubernetes_asyncio.client import CoreV1Api, V1Pod
        from kubernetes_asyncio.client.models import V1Node
        print(json.dumps({"version": kubernetes_asyncio.__version__,
                          "names": [CoreV1Api.__name__, V1Pod.__name__, V1Node.__name__],
                          "watch": kubernetes_asyncio.watch.Watch.__name__}))
    """, tmp_path)
    assert out["names"] == ["CoreV1Api", "V1Pod", "V1Node"]
    assert out["watch"] == "Watch" and out["version"]
