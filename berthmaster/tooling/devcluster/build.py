"""Build the local control plane's binaries from the Go module proxy, and cache them.

Design: every tool family has a pinned wrapper Go module under ``hack/<family>/`` (``go.mod``
and ``go.sum`` committed). Its ``tool`` directives name the ``main`` packages to build. The build
runs ``go build`` inside that module with ``GOTOOLCHAIN=local`` and ``GOFLAGS=-mod=mod`` off, so
the committed ``go.sum`` is what verifies every download; nothing is ever fetched as a release
binary.

Binaries land in ``<cache>/bin/<family>-<key>/`` where ``key`` hashes the wrapper's go.mod,
go.sum and the build flags: an unchanged wrapper reuses what is there, a changed one rebuilds
into a fresh folder. The cache lives outside the repository (``$BERTHMASTER_CACHE`` or
``~/.cache/berthmaster``), so clean clones and CI runs on the same machine reuse it, and Go's
own build cache makes even a rebuild after a flag change cheap.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from berthmaster.tooling.devcluster.paths import cache_dir, hack_dir


class BuildError(RuntimeError):
    """A tool could not be built; the message says which, why, and what to do."""


@dataclasses.dataclass(frozen=True)
class Family:
    """One wrapper module and the binaries it produces."""

    name: str
    packages: tuple[tuple[str, str], ...]  # (output binary name, Go package path)
    ldflags: str = ""
    tags: str = ""
    module: str = ""  # the wrapper module under hack/ (default: the family's name)

    @property
    def module_dir(self) -> Path:
        return hack_dir() / (self.module or self.name)


KUBE_VERSION = "v1.35.4"
_KUBE_LDFLAGS = " ".join(
    f"-X {pkg}.{key}={value}"
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
    for key, value in (
        ("gitVersion", KUBE_VERSION),
        ("gitMajor", "1"),
        ("gitMinor", "35"),
        ("gitTreeState", "clean"),
    )
)

# helm's release build (its Makefile's LDFLAGS, helm.sh/helm/v3@v3.22.0/Makefile) stamps its
# version and derives the Kubernetes version `helm template` assumes from the client-go module it
# is built with (v0.37 -> 1.37); without them helm calls itself "v3.22" and assumes Kubernetes
# v1.20.0, which the chart's kubeVersion refuses. Both must match hack/helm/go.mod (a unit test
# compares them). The git commit is not stamped: the module proxy does not serve it.
HELM_VERSION = "v3.22.0"
HELM_CLIENT_GO_VERSION = "v0.37.0"
_HELM_KUBE_MAJOR = str(int(HELM_CLIENT_GO_VERSION.removeprefix("v").split(".")[0]) + 1)
_HELM_KUBE_MINOR = HELM_CLIENT_GO_VERSION.split(".")[1]
_HELM_LDFLAGS = " ".join(
    [f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}",
     "-X helm.sh/helm/v3/internal/version.gitTreeState=clean"]
    + [f"-X helm.sh/helm/v3/pkg/{pkg}.k8sVersion{part}={value}"
       for pkg in ("lint/rules", "chartutil")
       for part, value in (("Major", _HELM_KUBE_MAJOR), ("Minor", _HELM_KUBE_MINOR))]
)

FAMILIES: tuple[Family, ...] = (
    Family("etcd", (("etcd", "go.etcd.io/etcd/server/v3"),)),
    Family("kwok", (("kwok", "sigs.k8s.io/kwok/cmd/kwok"),)),
    Family(
        "kubernetes",
        (
            ("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"),
            ("kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager"),
            ("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"),
            ("kubectl", "k8s.io/kubernetes/cmd/kubectl"),
        ),
        ldflags="-s -w " + _KUBE_LDFLAGS,
        tags="selinux,notest",
    ),
    Family("helm", (("helm", "helm.sh/helm/v3/cmd/helm"),), ldflags="-s -w " + _HELM_LDFLAGS),
)

BINARIES = tuple(binary for family in FAMILIES for binary, _ in family.packages)

# The real nodes' binaries (berthmaster.tooling.devcluster.kubelet), from the same pinned Kubernetes
# version in a wrapper module of their own (hack/kubernetes-node: their dependencies then leave
# the control plane's go.sum and cache key alone); built only when a cluster asks for real
# kubelets (`dev up --kubelets 1`, `make e2e`).
NODE_FAMILY = Family(
    "kubernetes-node",
    (("kubelet", "k8s.io/kubernetes/cmd/kubelet"),
     ("kube-proxy", "k8s.io/kubernetes/cmd/kube-proxy")),
    ldflags="-s -w " + _KUBE_LDFLAGS,
    tags="selinux,notest",
    module="kubernetes-node",
)
NODE_BINARIES = tuple(binary for binary, _ in NODE_FAMILY.packages)

# kind's default dynamic provisioner (its ``standard`` StorageClass): rancher's
# local-path-provisioner, at the version the Go module proxy serves, for the real node's
# clusters (berthmaster.tooling.devcluster.local_path); its version is stamped as its release build
# does.
LOCAL_PATH_VERSION = "v0.0.30"
LOCAL_PATH_FAMILY = Family(
    "local-path-provisioner",
    (("local-path-provisioner", "github.com/rancher/local-path-provisioner"),),
    ldflags=f"-s -w -X main.VERSION={LOCAL_PATH_VERSION}",
    module="local-path-provisioner",
)

# metrics-server (sigs.k8s.io/metrics-server), which serves metrics.k8s.io from the kubelets'
# summary API: what a descheduler policy balancing by actual usage reads
# (docs/descheduler.md). Built only when asked for (:func:`build_metrics_server`), cached as
# every family is; its version is stamped as its Makefile's VERSION_LDFLAGS do (client-go).
METRICS_SERVER_VERSION = "v0.8.0"
METRICS_SERVER_FAMILY = Family(
    "metrics-server",
    (("metrics-server", "sigs.k8s.io/metrics-server/cmd/metrics-server"),),
    ldflags=f"-s -w -X k8s.io/client-go/pkg/version.gitVersion={METRICS_SERVER_VERSION}",
    module="metrics-server",
)

# Prometheus (github.com/prometheus/prometheus, whose v0.3XX.Y modules are Prometheus 3.XX.Y)
# and its promtool, which the alerting tests run over the chart's rules (docs/observability.md).
# Built only when asked for (:func:`build_prometheus`). ``remove_all_sd`` is upstream's build tag
# (plugins/plugin_*.go) that leaves out every service discovery but file and HTTP
# (plugins/minimum.go): the tests scrape static targets. promtool imports the Kubernetes
# discovery itself (cmd/promtool/main.go), so client-go stays either way. The version is stamped
# as upstream's .promu.yml does (github.com/prometheus/common/version.Version).
PROMETHEUS_MODULE_VERSION = "v0.316.0"
PROMETHEUS_VERSION = "3.16.0"
PROMETHEUS_FAMILY = Family(
    "prometheus",
    (("prometheus", "github.com/prometheus/prometheus/cmd/prometheus"),
     ("promtool", "github.com/prometheus/prometheus/cmd/promtool")),
    ldflags=f"-s -w -X github.com/prometheus/common/version.Version={PROMETHEUS_VERSION}",
    tags="remove_all_sd",
    module="prometheus",
)

# The publishing tools `make publish` and `make e2e` use (hack/publish.py, docs/release.md): the
# CNCF distribution registry (cmd/registry; its Makefile's GO_LDFLAGS stamp version.version and
# version.mainpkg) and cosign (cmd/cosign; its Makefile's LDFLAGS stamp
# sigs.k8s.io/release-utils/version.gitVersion). cosign is built as its default `make cosign`
# (CGO off, no pivkey/pkcs11key tags). Built only when asked for (:func:`build_publishing`).
REGISTRY_VERSION = "v3.1.2"
REGISTRY_FAMILY = Family(
    "registry",
    (("registry", "github.com/distribution/distribution/v3/cmd/registry"),),
    ldflags=("-s -w -X github.com/distribution/distribution/v3/version.version="
             f"{REGISTRY_VERSION} -X github.com/distribution/distribution/v3/version.mainpkg="
             "github.com/distribution/distribution/v3"),
    module="registry",
)
COSIGN_VERSION = "v3.1.3"
COSIGN_FAMILY = Family(
    "cosign",
    (("cosign", "github.com/sigstore/cosign/v3/cmd/cosign"),),
    ldflags=f"-s -w -X sigs.k8s.io/release-utils/version.gitVersion={COSIGN_VERSION}",
    module="cosign",
)

# kwok's published stages: the defaults (fake node start-up and lease heart-beats; pods turn
# Ready, Job pods complete, deletions finish) and the chaos stages, which act only on objects
# carrying their label (a pod labelled pod-container-running-failed.stage.kwok.x-k8s.io=true
# turns Failed, a node labelled node-not-ready.stage.kwok.x-k8s.io=true turns Ready=False). The
# kwok binary embeds none of them when run outside kwokctl, so the build collects them from the
# pinned kwok module into the binary cache; the file's name carries a hash of this list, so a
# cache written for another list is never reused.
KWOK_STAGE_DIRS = ("node/fast", "node/heartbeat-with-lease", "pod/fast", "pod/chaos",
                   "node/chaos")
KWOK_STAGES = "kwok-stages-{key}.yaml"


def _key(family: Family, module_dir: Path) -> str:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((module_dir / name).read_bytes())
    # The module is keyed only when it differs from the name, so adding the field kept every
    # existing family's cache folder.
    fields = dataclasses.astuple(family)
    digest.update(repr(fields if family.module else fields[:-1]).encode())
    return digest.hexdigest()[:12]


def family_dir(family: Family) -> Path:
    """Where this family's binaries live for the wrapper module as committed."""
    return cache_dir() / "bin" / f"{family.name}-{_key(family, family.module_dir)}"


def binary_path(binary: str) -> Path:
    """The cached path of one binary (it may not be built yet)."""
    for family in (*FAMILIES, NODE_FAMILY, LOCAL_PATH_FAMILY, METRICS_SERVER_FAMILY,
                   PROMETHEUS_FAMILY, REGISTRY_FAMILY, COSIGN_FAMILY):
        if any(name == binary for name, _ in family.packages):
            return family_dir(family) / binary
    raise KeyError(binary)


def missing_binaries(names: Iterable[str] = BINARIES) -> list[str]:
    return [name for name in names if not binary_path(name).is_file()]


def kwok_stages_name(stage_dirs: Iterable[str] = KWOK_STAGE_DIRS) -> str:
    """The cached stages file's name, keyed on the stage folders it collects."""
    key = hashlib.sha256("\n".join(stage_dirs).encode()).hexdigest()[:12]
    return KWOK_STAGES.format(key=key)


def kwok_stages_path() -> Path:
    """kwok's published stages, collected for the pinned module (may not be written yet)."""
    return binary_path("kwok").parent / kwok_stages_name()


def berthmaster_stages_path() -> Path:
    """berthmaster's own kwok Stage documents (container restarts): package data, read by
    every cluster start rather than cached, so an edit takes effect at the next ``dev up``."""
    return Path(__file__).parent / "data" / "kwok-stages.yaml"


def kwok_metrics_path() -> Path:
    """The resource metrics the in-cluster kwok serves for its nodes (package data,
    kwok_incluster)."""
    return Path(__file__).parent / "data" / "kwok-metrics.yaml"


def write_kwok_stages(target: Path) -> None:
    """Collect kwok's Stage documents (``KWOK_STAGE_DIRS``) from the pinned module into
    ``target``."""
    module_dir = hack_dir() / "kwok"
    result = subprocess.run(
        [_go(), "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"], cwd=module_dir,
        env=dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=readonly"),
        capture_output=True, text=True, check=False,
    )
    source = Path(result.stdout.strip()) / "kustomize" / "stage"
    if result.returncode != 0 or not source.is_dir():
        raise BuildError(f"cannot find kwok's stage definitions in the module cache: "
                         f"{result.stderr.strip() or source}")
    missing = [folder for folder in KWOK_STAGE_DIRS if not (source / folder).is_dir()]
    if missing:
        raise BuildError(f"kwok's module at {source.parent.parent} has no stage folder "
                         f"{', '.join(missing)}")
    documents = [
        stage.read_text()
        for folder in KWOK_STAGE_DIRS
        for stage in sorted((source / folder).glob("*.yaml"))
        if stage.name != "kustomization.yaml"
    ]
    # Written aside and renamed: test sessions sharing the cache may write it at the same time.
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    partial.write_text("\n---\n".join(doc.strip() for doc in documents) + "\n")
    partial.replace(target)


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "Go is not installed or not on PATH: the local control plane is built from the Go "
            "module proxy. Install Go 1.25 or newer (https://go.dev/doc/install) and retry."
        )
    return go


def build_family(family: Family, say: Callable[[str], None]) -> Path:
    """Build one family's binaries unless they are already cached; returns their folder."""
    target = family_dir(family)
    wanted = [name for name, _ in family.packages]
    if all((target / name).is_file() for name in wanted):
        if family.name == "kwok" and not (target / kwok_stages_name()).is_file():
            write_kwok_stages(target / kwok_stages_name())
        say(f"  {family.name}: cached in {target}")
        return target
    module_dir = family.module_dir
    partial = target.with_name(target.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-mod=readonly")
    for name, package in family.packages:
        say(f"  {family.name}: building {name} ({package}) ...")
        started = time.monotonic()
        command = [_go(), "build", "-trimpath", "-o", str(partial / name)]
        if family.tags:
            command += ["-tags", family.tags]
        if family.ldflags:
            command += ["-ldflags", family.ldflags]
        command.append(package)
        result = subprocess.run(
            command, cwd=module_dir, env=env, capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-20:])
            raise BuildError(
                f"building {name} from {module_dir} failed (go build exit {result.returncode}):\n"
                f"{tail}\n"
                "Check that the Go module proxy is reachable (GOPROXY) and that the wrapper "
                f"module under {module_dir} is unmodified."
            )
        say(f"  {family.name}: {name} built in {time.monotonic() - started:.0f}s")
    if family.name == "kwok":
        write_kwok_stages(partial / kwok_stages_name())
    if target.exists():
        shutil.rmtree(target)
    partial.rename(target)
    return target


def build_all(say: Callable[[str], None] = print) -> dict[str, Path]:
    """Build (or reuse) every binary; returns binary name -> path."""
    started = time.monotonic()
    say(f"Building the local control plane into {cache_dir() / 'bin'} "
        "(cached after the first time)")
    for family in FAMILIES:
        build_family(family, say)
    say(f"All binaries ready in {time.monotonic() - started:.0f}s")
    return {name: binary_path(name) for name in BINARIES}


def build_node(say: Callable[[str], None] = print) -> dict[str, Path]:
    """Build (or reuse) the real nodes' kubelet and kube-proxy."""
    build_family(NODE_FAMILY, say)
    return {name: binary_path(name) for name in NODE_BINARIES}


def build_metrics_server(say: Callable[[str], None] = print) -> Path:
    """Build (or reuse) metrics-server; returns its path."""
    build_family(METRICS_SERVER_FAMILY, say)
    return binary_path("metrics-server")


def build_prometheus(say: Callable[[str], None] = print) -> dict[str, Path]:
    """Build (or reuse) prometheus and promtool; returns binary name -> path."""
    build_family(PROMETHEUS_FAMILY, say)
    return {name: binary_path(name) for name, _ in PROMETHEUS_FAMILY.packages}


def build_publishing(say: Callable[[str], None] = print) -> dict[str, Path]:
    """Build (or reuse) the registry and cosign; returns binary name -> path."""
    for family in (REGISTRY_FAMILY, COSIGN_FAMILY):
        build_family(family, say)
    return {"registry": binary_path("registry"), "cosign": binary_path("cosign")}


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - for `python -m`
    """Build the control plane's binaries, or with the argument ``prometheus`` Prometheus and
    promtool (hack/test.sh builds them before the tests that run them), or with ``publishing``
    the registry and cosign (`make publish`)."""
    names = sys.argv[1:] if argv is None else argv
    try:
        if names == ["prometheus"]:
            build_prometheus()
        elif names == ["publishing"]:
            build_publishing()
        elif not names:
            build_all()
        else:
            raise SystemExit("usage: python -m berthmaster.tooling.devcluster.build "
                             "[prometheus|publishing]")
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(1) from error


if __name__ == "__main__":  # pragma: no cover
    main()
