"""One source of truth, and an image consistent with the package, checked without Docker.

- charts/berthmaster/files/crds holds real copies of deploy/crds, and files/ a real copy of
  deploy/machine-lifecycle-hooks-policy.yaml (``hack/render-manifests.py`` writes them;
  ``--check`` fails on drift), byte-identical, and so does the packaged chart. The chart holds
  no symlink, so helm prints no "found symbolic link" note on every command.
- deploy/manifests/ is the chart's rendering (``hack/render-manifests.py --check``).
- The Dockerfile builds a wheel with ``pip wheel . --no-deps`` and installs it: the same wheel,
  built here, holds berthmaster.scheduler and berthmaster.operator (never top-level
  ``scheduler``/``operator``), the data files, and the ``berthmaster`` console script the
  image's ENTRYPOINT names. The image's user is the chart's runAsUser.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.integration.chart.chartkit import CHART, CRDS, ROOT, helm, helm_binary, render


def test_chart_crds_are_byte_identical_copies_of_deploy_crds() -> None:
    """Real files (Helm warns about symlinks, packaging tools mishandle them), kept equal to
    deploy/crds/ by hack/render-manifests.py: same names, same bytes."""
    chart_crds = CHART / "files" / "crds"
    assert not chart_crds.is_symlink(), "charts/berthmaster/files/crds must hold real files"
    assert not (CHART / "crds").exists(), (
        "charts/berthmaster/crds: Helm installs that folder once and never upgrades it; the "
        "CRDs are templates (templates/crds.yaml) rendered from files/crds")
    copies = {path.name: path.read_bytes() for path in chart_crds.iterdir()}
    sources = {path.name: path.read_bytes() for path in CRDS.glob("*.yaml")}
    assert sorted(copies) == sorted(sources), (
        "charts/berthmaster/files/crds and deploy/crds hold different files: run "
        "`python hack/render-manifests.py`")
    for name, data in sources.items():
        assert copies[name] == data, (
            f"charts/berthmaster/files/crds/{name} differs from deploy/crds/{name}: run "
            "`python hack/render-manifests.py`")


HOOKS_POLICY = "machine-lifecycle-hooks-policy.yaml"


def test_chart_holds_no_symlinks() -> None:
    links = sorted(str(path.relative_to(CHART)) for path in CHART.rglob("*") if path.is_symlink())
    assert links == [], f"replace with real copies (hack/render-manifests.py): {links}"


def test_chart_hooks_policy_is_a_byte_identical_copy() -> None:
    copy = CHART / "files" / HOOKS_POLICY
    assert not copy.is_symlink()
    assert copy.read_bytes() == (ROOT / "deploy" / HOOKS_POLICY).read_bytes(), (
        f"charts/berthmaster/files/{HOOKS_POLICY} differs from deploy/{HOOKS_POLICY}: run "
        "`python hack/render-manifests.py`")


def test_render_manifests_check_reports_hooks_policy_drift(tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "repo"
    for part in ("charts", "deploy", "hack", "scheduler/data"):
        shutil.copytree(ROOT / part, copy / part, symlinks=True)
    source = copy / "deploy" / HOOKS_POLICY
    source.write_text(source.read_text() + "# changed\n")
    script = [sys.executable, str(copy / "hack" / "render-manifests.py")]
    env = {**os.environ, "HELM": str(helm_binary())}
    result = subprocess.run([*script, "--check"], capture_output=True, text=True, check=False,
                            env=env)
    assert result.returncode == 1
    assert (f"charts/berthmaster/files/{HOOKS_POLICY} differs from deploy/{HOOKS_POLICY}"
            in result.stdout)
    subprocess.run(script, capture_output=True, text=True, check=True, env=env)
    assert (copy / "charts" / "berthmaster" / "files" / HOOKS_POLICY).read_bytes() == (
        source.read_bytes())


def test_render_manifests_check_reports_crd_drift(tmp_path: Path) -> None:
    """A CRD changed in deploy/crds without re-running the script fails --check, by name."""
    import shutil

    copy = tmp_path / "repo"
    for part in ("charts", "deploy", "hack", "scheduler/data"):
        shutil.copytree(ROOT / part, copy / part, symlinks=True)
    first = sorted((copy / "deploy" / "crds").glob("*.yaml"))[0]
    first.write_text(first.read_text() + "# changed\n")
    result = subprocess.run([sys.executable, str(copy / "hack" / "render-manifests.py"),
                             "--check"], capture_output=True, text=True, check=False,
                            env={**os.environ, "HELM": str(helm_binary())})
    assert result.returncode == 1
    assert f"charts/berthmaster/files/crds/{first.name} differs from deploy/crds/{first.name}" in (
        result.stdout)


def test_packaged_chart_carries_every_crd_byte_for_byte(tmp_path: Path) -> None:
    result = helm("package", str(CHART), "--destination", str(tmp_path))
    assert result.returncode == 0, result.stderr
    (archive,) = tmp_path.glob("berthmaster-*.tgz")
    with tarfile.open(archive) as tar:
        packaged = {Path(member.name).name: tar.extractfile(member).read()  # type: ignore[union-attr]
                    for member in tar.getmembers()
                    if member.name.startswith("berthmaster/files/crds/") and member.isfile()}
    expected = {path.name: path.read_bytes() for path in CRDS.glob("*.yaml")}
    assert expected, "deploy/crds/ is empty"
    assert packaged == expected


def test_packaged_chart_carries_the_hooks_policy_byte_for_byte(tmp_path: Path) -> None:
    result = helm("package", str(CHART), "--destination", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    (archive,) = tmp_path.glob("berthmaster-*.tgz")
    with tarfile.open(archive) as tar:
        member = tar.extractfile(f"berthmaster/files/{HOOKS_POLICY}")
        assert member is not None
        assert member.read() == (ROOT / "deploy" / HOOKS_POLICY).read_bytes()


def crd_names() -> list[str]:
    return sorted(yaml.safe_load(path.read_text())["metadata"]["name"]
                  for path in CRDS.glob("*.yaml"))


def test_the_packaged_chart_renders_every_crd_as_deploy_crds_has_it(tmp_path: Path) -> None:
    """What `helm template ... --show-only templates/crds.yaml` prints from a packaged chart
    (NOTES.txt and docs/deployment.md, for crds.install=false) is each CRD of deploy/crds with
    its own labels and annotations kept, the release's labels added and, with crds.keep (the
    default), helm.sh/resource-policy: keep (helm.sh/helm/v3 pkg/kube/resource_policy.go)."""
    result = helm("package", str(CHART), "--destination", str(tmp_path))
    assert result.returncode == 0, result.stderr
    (archive,) = tmp_path.glob("berthmaster-*.tgz")
    shown = helm("template", "bm", str(archive), "--show-only", "templates/crds.yaml")
    assert shown.returncode == 0, shown.stderr
    rendered = {doc["metadata"]["name"]: doc for doc in yaml.safe_load_all(shown.stdout) if doc}
    assert sorted(rendered) == crd_names()
    for path in CRDS.glob("*.yaml"):
        source = yaml.safe_load(path.read_text())
        crd = rendered[source["metadata"]["name"]]
        labels = crd["metadata"].pop("labels")
        annotations = crd["metadata"].pop("annotations")
        assert labels["app.kubernetes.io/instance"] == "bm"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert annotations["helm.sh/resource-policy"] == "keep"
        assert source["metadata"].pop("labels", {}).items() <= labels.items()
        assert source["metadata"].pop("annotations", {}).items() <= annotations.items()
        assert crd == source, f"templates/crds.yaml renders {path.name} differently"


def test_crds_keep_false_and_install_false() -> None:
    kept = [doc for doc in render(["crds.keep=false"]) if doc["kind"] == "CustomResourceDefinition"]
    assert sorted(doc["metadata"]["name"] for doc in kept) == crd_names()
    assert not [doc for doc in kept if "helm.sh/resource-policy" in
                doc["metadata"].get("annotations", {})]
    assert not [doc for doc in render(["crds.install=false"])
                if doc["kind"] == "CustomResourceDefinition"]


def test_template_prints_no_warning() -> None:
    """`helm template` of the chart says nothing on stderr: no "found symbolic link" note
    (helm.sh/helm/v3 pkg/chart/loader/directory.go), no deprecation, no lint remark."""
    result = helm("template", "x", str(CHART))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_plain_manifests_are_the_chart_rendering() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "hack" / "render-manifests.py"),
                             "--check"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_plain_manifests_hold_the_default_rendering() -> None:
    manifests = [doc for doc in yaml.safe_load_all(
        (ROOT / "deploy" / "manifests" / "berthmaster.yaml").read_text()) if doc]
    rendered = render(["crds.install=false"])
    assert [(o["kind"], o["metadata"]["name"]) for o in manifests] == [
        (o["kind"], o["metadata"]["name"]) for o in rendered]
    for obj in manifests:
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubectl"


# ---- the image, as far as it can be checked without Docker ---------------------------------

@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps",
         "--wheel-dir", str(out), str(ROOT)],
        capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = out.glob("berthmaster-*.whl")
    return built


def test_wheel_holds_the_mapped_packages_and_no_top_level_ones(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.endswith(".dist-info/")}
    assert {n for n in top_level if not n.endswith(".dist-info")} == {"berthmaster"}
    for required in ("berthmaster/cli.py", "berthmaster/scheduler/__init__.py",
                     "berthmaster/scheduler/daemon/command.py",
                     "berthmaster/scheduler/data/default-policy.json",
                     "berthmaster/tooling/devcluster/data/kwok-stages.yaml",
                     "berthmaster/operator/__init__.py", "berthmaster/operator/command.py"):
        assert required in names, f"{required} missing from the wheel"
    assert not [n for n in names if n.startswith(("scheduler/", "operator/"))]


def test_every_source_folder_is_a_package() -> None:
    """setup.py packages folders with an __init__.py only; any other .py never reaches the image."""
    missing = sorted(
        str(folder.relative_to(ROOT))
        for base in ("berthmaster", "scheduler", "operator")
        for folder in [ROOT / base, *(p for p in (ROOT / base).rglob("*") if p.is_dir())]
        if "__pycache__" not in folder.parts and any(folder.glob("*.py"))
        and not (folder / "__init__.py").is_file())
    assert missing == [], f"add an __init__.py to {', '.join(missing)} (else not in the wheel)"


def test_wheel_entry_point_is_the_image_entrypoint(wheel: Path) -> None:
    archive = zipfile.ZipFile(wheel)
    (entry_points,) = [n for n in archive.namelist() if n.endswith("entry_points.txt")]
    text = archive.read(entry_points).decode()
    assert "berthmaster = berthmaster.cli:main" in text
    assert 'ENTRYPOINT ["berthmaster"]' in (ROOT / "Dockerfile").read_text()


def test_every_subcommand_the_chart_runs_is_in_the_wheel(wheel: Path, tmp_path: Path) -> None:
    """Install the wheel alone (no editable checkout on the path) and load each subcommand."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet",
                    "--target", str(target), str(wheel)], check=True, timeout=300)
    probe = (
        "import sys, importlib\n"
        f"sys.path.insert(0, {str(target)!r})\n"
        "import berthmaster\n"
        f"assert berthmaster.__file__.startswith({str(target)!r}), berthmaster.__file__\n"
        "from berthmaster.cli import SUBCOMMANDS\n"
        "for name in ('scheduler', 'operator', 'deschedule', 'version'):\n"
        "    importlib.import_module(SUBCOMMANDS[name][0])\n"
        "from berthmaster.scheduler.policy import default_policy\n"
        "default_policy()\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            cwd=tmp_path, check=False, timeout=120)
    assert result.returncode == 0, result.stderr


def dockerfile_lines() -> list[str]:
    return (ROOT / "Dockerfile").read_text().splitlines()


def test_dockerfile_copies_what_the_wheel_is_built_from() -> None:
    copies = [line.split()[1:-1] for line in dockerfile_lines() if line.startswith("COPY ")
              and "--from" not in line]
    sources = [source.rstrip("/") for group in copies for source in group]
    assert sorted(sources) == ["README.md", "berthmaster", "hack/image", "operator",
                               "pyproject.toml", "scheduler", "setup.py"]
    for source in sources:
        assert (ROOT / source).exists(), f"Dockerfile copies {source}, which does not exist"
    allowed = [line.lstrip("!").rstrip("/") for line in
               (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")]
    assert sorted(allowed) == sorted(sources), ".dockerignore must let in exactly the copies"


def test_dockerfile_final_stage_is_slim_and_non_root() -> None:
    lines = dockerfile_lines()
    stages = [i for i, line in enumerate(lines) if line.startswith("FROM ")]
    assert len(stages) == 2, "multi-stage: build, then final"
    assert lines[stages[0]].endswith(" AS build")
    final = lines[stages[1]:]
    assert any(line.startswith("ARG PYTHON_IMAGE=python:3.13-slim-trixie") for line in lines)
    assert not any("pip install" in line or "apt-get" in line for line in final)
    assert "COPY --from=build /opt/berthmaster /opt/berthmaster" in final
    users = [line for line in final if line.startswith("USER ")]
    assert users == ["USER 65532:65532"]
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["podSecurityContext"]["runAsUser"] == 65532
    assert values["podSecurityContext"]["runAsGroup"] == 65532
