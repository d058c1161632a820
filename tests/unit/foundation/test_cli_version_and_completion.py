"""``berthmaster --version`` and ``berthmaster completion bash|zsh``.

The version flag is argparse's ``action="version"`` (print, exit 0), with the first line of
``berthmaster version``. The bash script is exercised in a real bash the way bash's programmable
completion calls it (``complete -F``: COMP_WORDS, COMP_CWORD, then COMPREPLY; bash(1),
"Programmable Completion"); zsh is not installed here, so its script is checked for the
``#compdef`` tag compinit reads and for every subcommand and a subcommand's options.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from berthmaster import __version__
from berthmaster.cli import SUBCOMMANDS, main
from berthmaster.completion_command import script
from berthmaster.tooling.python import BERTHMASTER_CLI


def test_version_flag_prints_the_first_line_of_the_version_command(
    capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    flag = capsys.readouterr().out
    assert flag == f"berthmaster {__version__}\n"
    assert main(["version"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == flag.strip()


def test_version_flag_from_the_console_script() -> None:
    result = subprocess.run([*BERTHMASTER_CLI, "--version"],
                            capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"berthmaster {__version__}\n"


def complete_in_bash(words: list[str]) -> list[str]:
    """COMPREPLY for ``words`` (the last one being completed) from the generated script."""
    bash = shutil.which("bash")
    assert bash is not None, "bash is needed to exercise the completion script"
    quoted = " ".join(f"'{word}'" for word in words)
    program = (f"{script('bash')}\n"
               f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
               f"COMP_LINE='{' '.join(words)}'; COMP_POINT=${{#COMP_LINE}}\n"
               "_shtab_berthmaster berthmaster\n"
               'printf "%s\\n" "${COMPREPLY[@]}"\n')
    result = subprocess.run([bash, "--norc", "--noprofile", "-c", program],
                            capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def test_bash_completes_every_subcommand() -> None:
    assert sorted(complete_in_bash(["berthmaster", ""])) == sorted(SUBCOMMANDS)
    assert complete_in_bash(["berthmaster", "comp"]) == ["completion"]


def test_bash_completes_the_options_of_a_subcommand_not_loaded_at_startup() -> None:
    offered = complete_in_bash(["berthmaster", "explain", "--kube"])
    assert offered == ["--kubeconfig"]
    assert "--version" in complete_in_bash(["berthmaster", "--ver"])
    assert sorted(complete_in_bash(["berthmaster", "completion", ""])) == ["bash", "zsh"]


def test_zsh_script_is_tagged_for_compinit_and_covers_the_subcommands() -> None:
    text = script("zsh")
    assert text.startswith("#compdef berthmaster\n")
    for name in SUBCOMMANDS:
        assert f"\n    {name}:'" in text, f"{name} missing from the zsh subcommand list"
    assert "--kubeconfig[" in text


def test_an_unknown_shell_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["completion", "fish"])
    assert exited.value.code == 2
    assert "invalid choice: 'fish' (choose from" in capsys.readouterr().err


def test_a_tooling_subcommand_where_tooling_is_left_out_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The image leaves ``berthmaster.tooling`` out (.dockerignore): ``berthmaster demo`` there
    says what it is and where to run it (a None in sys.modules makes Python's import system
    raise ModuleNotFoundError for that name, as a missing package does)."""
    monkeypatch.setitem(sys.modules, "berthmaster.tooling.demo", None)
    assert main(["demo"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("berthmaster demo: `demo` is development tooling (berthmaster.tooling)")
    assert "pip install -e ." in err


def test_version_where_tooling_is_left_out_prints_the_package_version_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The image has no berthmaster.tooling, so no local control plane to report."""
    monkeypatch.setitem(sys.modules, "berthmaster.tooling.devcluster.build", None)
    assert main(["version"]) == 0
    assert capsys.readouterr().out == f"berthmaster {__version__}\n"
