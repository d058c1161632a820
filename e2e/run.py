"""`make e2e`: berthmaster run as its users run it, end to end, then the e2e/ suite against it.

    python e2e/run.py [--mode auto|kind|kubelet] [--keep] [-- PYTEST ARGS]

The user's path is: build the image, create a cluster, load the image, ``helm install`` the
chart (with its CRDs, ``crds.install``), set ``schedulerName: berthmaster``
on pods. This driver walks it on one of two clusters and says which:

- **kind** (users with Docker and registry access): ``kind create cluster --config
  deploy/kind-cluster.yaml``; the images are ``kind load``ed. Chosen when kind is on PATH and
  Docker can start a privileged container (kind's nodes are privileged).
- **kubelet** (our build machines, where privileged containers cannot start): the local control
  plane with one real kubelet beside it (``berthmaster dev up --kubelets 1 --kwok cluster``,
  berthmaster/tooling/devcluster/kubelet.py); the images are loaded into the node's containerd, and
  the
  worker nodes of deploy/kind-cluster.yaml become kwok nodes with the same labels and taints.
  berthmaster's own pods, kwok and the descheduler Jobs run on the real kubelet. The cluster
  comes with kind's default storage, which kind's nodes ship: StorageClass ``standard`` served
  by rancher's local-path-provisioner, built here and run on the real kubelet
  (berthmaster/tooling/devcluster/local_path.py); on kind, kind's own is used. It also gets a
  metrics API: metrics-server, built here (cached) and run on the real kubelet, scraping it
  (berthmaster/tooling/devcluster/metrics_server.py), for the descheduler's usage-based policies.

On the real-kubelet cluster berthmaster arrives the way a release reaches a user's cluster
(docs/quickstart-existing-cluster.md): an OCI registry (the distribution project's, built here:
berthmaster/tooling/devcluster/registry.py) serves on loopback; ``make release SKIP_IMAGE=1``
and ``make publish OFFLINE=1`` (hack/release.py, hack/publish.py) push the image, its cosign
signature and CycloneDX attestation (with a key pair made for the run) and the chart to it; the
node's containerd reaches it through its registry ``config_path``; the chart is installed from
``oci://`` with ``image.digest`` and ``pullPolicy: IfNotPresent``, and the node pulls the image
(it is not loaded: e2e/test_publish.py checks the pull, the signature and the attestation).
On kind, whose nodes cannot reach the host's loopback, the image is ``kind load``ed and the chart
installed from the checkout with ``image.pullPolicy=Never``; kwok's image is loaded either way.
Where neither cluster can be had, the suite still runs and skips with one line saying why. Every
step prints its duration; the cluster is removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from berthmaster.tooling.devcluster import (  # noqa: E402
    build,
    images,
    kwok_incluster,
    metrics_server,
    registry,
)
from berthmaster.tooling.devcluster.cluster import ClusterError, ControlPlane, Options  # noqa: E402
from berthmaster.tooling.devcluster.kubelet import (  # noqa: E402
    NODE_LABEL,
    NODE_LABEL_VALUE,
    NodeError,
    preflight,
    write_registry_hosts,
)
from berthmaster.tooling.devcluster.nodes import kind_workers  # noqa: E402
from berthmaster.tooling.python import PYTHON  # noqa: E402

IMAGE, TAG = "berthmaster", "e2e"
NAMESPACE = "berthmaster-system"
KIND_CLUSTER = "berthmaster-e2e"
DEV_CLUSTER = "e2e"
CHART = ROOT / "charts" / "berthmaster"
CRDS = ROOT / "deploy" / "crds"
COSCHEDULING_VALUES = ROOT / "examples" / "coscheduling" / "values.yaml"
KIND_CONFIG = ROOT / "deploy" / "kind-cluster.yaml"
# e2e/test_admission.py's namespaces carry it; the webhook is asked about their pods only
ADMISSION_LABEL = "berthmaster-e2e-admission"


@contextmanager
def step(what: str) -> Iterator[None]:
    print(f"==> {what}", flush=True)
    started = time.monotonic()
    yield
    print(f"    {what}: {time.monotonic() - started:.0f}s", flush=True)


def run(*command: str, input: str | None = None, env: dict[str, str] | None = None,
        timeout: float = 900) -> str:
    result = subprocess.run(list(command), input=input, capture_output=True, text=True,
                            timeout=timeout, env=env, check=False)
    if result.returncode != 0:
        raise SystemExit(f"e2e: `{' '.join(command[:6])}` failed (exit {result.returncode}):\n"
                         f"{(result.stderr or result.stdout).strip()[-3000:]}")
    return result.stdout


def why_not_kind() -> str | None:
    if shutil.which("kind") is None:
        return "kind is not on PATH"
    try:
        images.require_docker()
    except images.ImageError as error:
        return str(error)
    # A privileged container with nothing to run: where privilege works it fails at exec (no
    # such file); where it does not, it fails earlier, applying capabilities or rlimits.
    probe_image = "berthmaster.local/privilege-probe:dev"
    images.one_file_image(probe_image, {"probe": (b"", 0o644)}, ["/no-such-program"])
    probe = images.docker("run", "--rm", "--privileged", probe_image, timeout=60)
    said = probe.stderr.decode(errors="replace")
    images.docker("image", "rm", probe_image, timeout=60)
    if "no such file" not in said.lower():
        return ("Docker cannot start privileged containers here (kind's nodes are "
                f"privileged): {said.strip()[:200]}")
    return None


def why_not_kubelet() -> str | None:
    try:
        preflight()
        images.require_docker()
    except (NodeError, images.ImageError) as error:
        return str(error)
    return None


@dataclasses.dataclass(frozen=True)
class Published:
    """A release in the loopback registry: where, the image's digest, the chart's version and
    the public half of the key that signed it."""

    registry: str
    digest: str
    version: str
    public_key: Path

    @property
    def image(self) -> str:
        return f"{self.registry}/{IMAGE}@{self.digest}"

    @property
    def chart(self) -> str:
        return f"oci://{self.registry}/charts/{IMAGE}"

    def chart_args(self) -> list[str]:
        """``helm install`` arguments: the chart from the registry, the image by digest."""
        return [self.chart, "--version", self.version, "--plain-http",
                "--set", f"image.repository={self.registry}/{IMAGE}",
                "--set", f"image.digest={self.digest}",
                "--set", "image.pullPolicy=IfNotPresent"]


def local_chart_args() -> list[str]:
    """``helm install`` arguments: the chart from the checkout, the image already loaded."""
    return [str(CHART), "--set", f"image.repository={IMAGE}", "--set", f"image.tag={TAG}",
            "--set", "image.pullPolicy=Never"]


def publish(work: Path, address: str) -> Published:
    """``make release SKIP_IMAGE=1`` and ``make publish OFFLINE=1`` of the image built for the
    run, into the registry at ``address``, signed with a key pair made for the run."""
    dist, keys = work / "dist", work / "cosign"
    for folder in (dist, keys):
        shutil.rmtree(folder, ignore_errors=True)
    run(*PYTHON, str(ROOT / "hack" / "release.py"), "--skip-image", "--dist", str(dist))
    said = run(*PYTHON, str(ROOT / "hack" / "publish.py"), "--registry", address, "--dist",
               str(dist), "--offline", "--ephemeral-key", str(keys), "--image",
               f"{IMAGE}:{TAG}", env={**os.environ, "COSIGN_PASSWORD": ""})
    # publish.py's last line: "published <registry>/berthmaster@sha256:..."
    reference = said.strip().splitlines()[-1].removeprefix("published ")
    digest = reference.rpartition("@")[2]
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
    if not digest.startswith("sha256:"):
        raise SystemExit(f"e2e: make publish printed no digest: {said.strip()[-500:]}")
    return Published(address, digest, str(version), keys / "cosign.pub")


def helm_install(helm: str, kubeconfig: Path, context: list[str], chart: Sequence[str],
                 admission_on: Sequence[str] = ()) -> None:
    """The chart as users install it (``chart``: where from, and its image), with the
    placement webhook on for the namespaces labelled ``ADMISSION_LABEL`` only (the other e2e
    tests' pods are not sent to it) and Coscheduling on in the scheduler's profile from the
    documented values file (``COSCHEDULING_VALUES``; pods of no PodGroup are placed as by the
    default profile); ``admission_on`` adds the values keeping its replicas on nodes that run
    containers."""
    run(helm, "upgrade", "--install", "berthmaster", *chart, "--kubeconfig",
        str(kubeconfig), *context, "--namespace", NAMESPACE, "--create-namespace",
        "--set", "admission.enabled=true",
        "--set", f"admission.namespaceSelector.matchLabels.{ADMISSION_LABEL}=on",
        "--values", str(COSCHEDULING_VALUES),
        *admission_on, "--wait", "--timeout", "5m")


def kubectl(kubeconfig: Path, context: list[str]) -> Callable[..., str]:
    binary = shutil.which("kubectl") or str(build.binary_path("kubectl"))

    def call(*args: str, input: str | None = None) -> str:
        return run(binary, "--kubeconfig", str(kubeconfig), *context, *args, input=input)
    return call


def install(kubeconfig: Path, context: list[str], chart: Sequence[str],
            admission_on: Sequence[str] = ()) -> None:
    k = kubectl(kubeconfig, context)
    with step(f"helm install berthmaster {chart[0]} (with its CRDs)"):
        helm_install(str(build.binary_path("helm")), kubeconfig, context, chart, admission_on)
    with step("CRDs Established"):
        k("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRDS))


def up_kind(work: Path) -> Path:
    kubeconfig = work / "kind.kubeconfig"
    with step(f"kind create cluster {KIND_CLUSTER}"):
        clusters = run("kind", "get", "clusters").split()
        if KIND_CLUSTER not in clusters:
            run("kind", "create", "cluster", "--name", KIND_CLUSTER, "--config",
                str(KIND_CONFIG), "--wait", "180s")
        kubeconfig.write_text(run("kind", "get", "kubeconfig", "--name", KIND_CLUSTER))
    with step("kind load docker-image"):
        run("kind", "load", "docker-image", f"{IMAGE}:{TAG}", images.KWOK_IMAGE, "--name",
            KIND_CLUSTER)
    with step("kwok in the cluster (local image)"):
        k = kubectl(kubeconfig, [])
        k("apply", "-f", "-", input=yaml.safe_dump_all(
            kwok_incluster.kwok_manifests(images.KWOK_IMAGE, kwok_incluster.stage_documents())))
        k("rollout", "status", "-n", kwok_incluster.NAMESPACE,
          f"deployment/{kwok_incluster.NAME}", "--timeout=180s")
    install(kubeconfig, [], local_chart_args())
    return kubeconfig


def up_kubelet(published: Published) -> Path:
    plane = ControlPlane(DEV_CLUSTER, say=lambda line: print(f"    {line}", flush=True),
                         options=Options(kubelets=1, kwok="cluster"),
                         images_to_load=(metrics_server.IMAGE,))
    with step("local control plane with a real kubelet (berthmaster dev up --kubelets 1 "
              "--kwok cluster)"):
        try:
            cluster = plane.up()
        except (ClusterError, NodeError, images.ImageError) as error:
            raise SystemExit(f"e2e: {error}") from error
    k = kubectl(cluster.kubeconfig, [])
    with step(f"the node's containerd pulls from {published.registry} (hosts.toml)"):
        write_registry_hosts(plane.node_layout, published.registry)
    with step("kwok workers shaped like deploy/kind-cluster.yaml's (with resource metrics)"):
        workers = kind_workers(yaml.safe_load(KIND_CONFIG.read_text()))
        for worker in workers:
            worker["metadata"].setdefault("annotations", {}).update(
                kwok_incluster.metrics_annotations(worker["metadata"]["name"]))
        k("apply", "-f", "-", input=yaml.safe_dump_all(workers))
        k("wait", "--for=condition=Ready", "--timeout=60s",
          *[f"node/{w['metadata']['name']}" for w in workers])
    with step("metrics-server (APIService v1beta1.metrics.k8s.io Available)"):
        k("apply", "-f", "-", input=yaml.safe_dump_all(metrics_server.manifests()))
        k("wait", "--for=condition=Available", "--timeout=180s",
          f"apiservice/{metrics_server.APISERVICE}")
    # the webhook's replicas must answer: kwok nodes only pretend to run pods
    install(cluster.kubeconfig, [], published.chart_args(), admission_on=(
        "--set", "admission.nodeSelector." + NODE_LABEL.replace(".", "\\.")
                 + f"={NODE_LABEL_VALUE}"))
    return cluster.kubeconfig


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("auto", "kind", "kubelet"), default="auto")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    started = time.monotonic()
    pytest = [*PYTHON, "-m", "pytest", "e2e", "-ra", "-q", "-p", "no:cacheprovider",
              *args.pytest_args]
    env = dict(os.environ)

    mode, why = args.mode, {}
    if mode == "auto":
        for candidate, check in (("kind", why_not_kind), ("kubelet", why_not_kubelet)):
            if shutil.which("docker") is None and candidate == "kind":
                why[candidate] = "docker is not on PATH"
                continue
            reason = check()
            if reason is None:
                mode = candidate
                break
            why[candidate] = reason
    if mode == "auto":
        print("e2e: no cluster can run here: " + "; ".join(f"{k}: {v}" for k, v in why.items()))
        env["BERTHMASTER_E2E_UNAVAILABLE"] = "; ".join(f"{k}: {v}" for k, v in why.items())
        return subprocess.call(pytest, cwd=ROOT, env=env)
    for skipped, reason in why.items():
        print(f"e2e: not {skipped}: {reason}")
    print(f"e2e: running on {mode}", flush=True)

    work = ROOT / ".e2e"
    work.mkdir(exist_ok=True)
    with step(f"image {IMAGE}:{TAG} (make image)"):
        try:
            report = images.build_image(f"{IMAGE}:{TAG}", lambda line: print(f"    {line}"))
            images.kwok_image(lambda line: print(f"    {line}"))
            if mode == "kubelet":
                images.pause_image(lambda line: print(f"    {line}"))
                images.local_path_image(lambda line: print(f"    {line}"))
                images.local_path_helper_image(lambda line: print(f"    {line}"))
                metrics_server.metrics_server_image(lambda line: print(f"    {line}"))
        except images.ImageError as error:
            raise SystemExit(f"e2e: {error}") from error
    # the registry serves until the suite ends (with --keep, the cluster outlives it: pods
    # already pulled keep running)
    stack = contextlib.ExitStack()
    try:
        published = None
        if mode == "kubelet":
            with step("an OCI registry on loopback (distribution, built from hack/registry)"):
                tools = build.build_publishing(lambda line: print(f"    {line}"))
                shutil.rmtree(work / "registry", ignore_errors=True)
                address = stack.enter_context(
                    registry.running_registry(tools["registry"], work / "registry"))
            with step(f"make release SKIP_IMAGE=1; make publish REGISTRY={address} OFFLINE=1"):
                published = publish(work, address)
                print(f"    published {published.image} and {published.chart}:"
                      f"{published.version}", flush=True)
            env.update(BERTHMASTER_E2E_REGISTRY=address,
                       BERTHMASTER_E2E_CHART_VERSION=published.version,
                       BERTHMASTER_E2E_COSIGN=str(tools["cosign"]),
                       BERTHMASTER_E2E_COSIGN_PUB=str(published.public_key))
        kubeconfig = up_kind(work) if published is None else up_kubelet(published)
        env.update(BERTHMASTER_E2E_KUBECONFIG=str(kubeconfig), BERTHMASTER_E2E_MODE=mode,
                   BERTHMASTER_E2E_NAMESPACE=NAMESPACE,
                   BERTHMASTER_E2E_IMAGE=published.image if published else f"{IMAGE}:{TAG}")
        with step("pytest e2e/"):
            status = subprocess.call(pytest, cwd=ROOT, env=env)
    finally:
        stack.close()
        if not args.keep:
            with step("tear down"):
                if mode == "kind":
                    subprocess.call(["kind", "delete", "cluster", "--name", KIND_CLUSTER])
                else:
                    ControlPlane(DEV_CLUSTER, say=lambda line: None).down(quiet=True)
    print(f"e2e: {mode}: image {report.size_bytes / 2**20:.0f} MiB; total "
          f"{time.monotonic() - started:.0f}s; pytest exit {status}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
