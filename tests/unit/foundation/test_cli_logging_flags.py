"""Every subcommand accepts ``--log-format json|text`` and klog's ``-v N``; the commands that do
not declare them configure logging only when they are given."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from berthmaster import cli
from berthmaster.foundation import logs


@pytest.fixture
def root_handlers() -> Iterator[logging.Logger]:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        yield root
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


@pytest.mark.parametrize("name", sorted(cli.SUBCOMMANDS))
def test_every_subcommand_takes_the_logging_flags(name: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.build_parser(name).parse_args([name, "--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert "--log-format {json,text}" in shown
    assert "-v [N], --v [N], --verbose [N]" in shown


def test_a_command_without_its_own_logging_is_left_alone_unless_asked(
        root_handlers: logging.Logger, capsys: pytest.CaptureFixture[str]) -> None:
    before = root_handlers.handlers[:]
    assert cli.main(["version"]) == 0
    assert root_handlers.handlers == before
    assert cli.main(["version", "--log-format", "text", "-v", "4"]) == 0
    (handler,) = root_handlers.handlers
    assert isinstance(handler.formatter, logs.TextFormatter)
    assert handler.formatter.component == "version"
    assert root_handlers.level == logging.DEBUG
    assert "berthmaster" in capsys.readouterr().out


def test_a_component_keeps_its_json_default() -> None:
    args = cli.build_parser("deschedule").parse_args(
        ["deschedule", "--policy-config-file", "p.yaml"])
    assert (args.log_format, args.verbosity) == ("json", 0)
    args = cli.build_parser("simulate").parse_args(["simulate", "--cluster", "c.yaml"])
    assert not hasattr(args, "log_format") and not hasattr(args, "verbosity")
