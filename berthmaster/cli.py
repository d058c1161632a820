"""The ``berthmaster`` console script: one entry point, one subcommand per component.

Each subcommand lives in its own module, which exposes ``add_arguments(parser)`` and
``run(args) -> int``. The registry below maps names to module paths and is imported lazily, so
``berthmaster version`` does not pay for kopf or the Kubernetes client, and a component's
import error cannot break the others.

``berthmaster --version`` prints the first line of ``berthmaster version``.

Every subcommand accepts ``--log-format json|text`` and klog's ``-v N``: the long-running ones
declare them and configure logging themselves (JSON by default); for the others they are added
here and configure logging only when given, so an interactive command's output is unchanged
unless asked.
``berthmaster completion bash|zsh`` (berthmaster.completion_command) is the one command that
loads every subcommand's options, to describe the whole command line to the shell.

A :class:`~berthmaster.foundation.errors.CommandError` raised by any command ends it with one line
(``berthmaster COMMAND: what is wrong; what to do``) and its exit status (2 configuration,
3 connectivity); ``-v``/``--verbose`` adds the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
import traceback
from collections.abc import Sequence
from typing import Protocol, cast

from berthmaster.foundation.errors import CommandError

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "version": ("berthmaster.version_command", "print berthmaster's version and the pinned tools"),
    "dev": ("berthmaster.tooling.devcluster.command",
            "build, start and stop the local control plane"),
    "demo": ("berthmaster.tooling.demo",
             "bring up the local control plane and show berthmaster at work"),
    "simulate": ("berthmaster.scheduler.simulate", "place pods offline on a cluster snapshot"),
    "explain": ("berthmaster.scheduler.explain",
                "explain, per node, why a pod of the live cluster fits or not"),
    "scheduler": ("berthmaster.scheduler.daemon.command", "run the scheduler"),
    "policy": ("berthmaster.scheduler.policy_command",
               "convert a scheduler Policy file into a KubeSchedulerConfiguration"),
    "operator": ("berthmaster.operator.command",
                 "run the operator (Machines, Deschedulers, autoscaling)"),
    "admission": ("berthmaster.operator.admission.command",
                  "serve the placement admission webhook (PodNodeSelector, "
                  "PodTolerationRestriction, PodNodeConstraints)"),
    "deschedule": ("berthmaster.scheduler.descheduler.command", "one descheduler pass"),
    "completion": ("berthmaster.completion_command",
                   "print a shell completion script (bash or zsh)"),
}


class _Subcommand(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _load(name: str) -> _Subcommand:
    """The subcommand's module; a tooling subcommand in an installation that leaves
    ``berthmaster.tooling`` out (the image: .dockerignore) is a :class:`CommandError`."""
    module_path, _ = SUBCOMMANDS[name]
    try:
        return cast(_Subcommand, importlib.import_module(module_path))
    except ModuleNotFoundError as error:
        if not (error.name or "").startswith("berthmaster.tooling"):
            raise
        raise CommandError(f"`{name}` is development tooling (berthmaster.tooling), which this "
                           "installation leaves out (the image ships the components only); "
                           "run it from a checkout of the repository: pip install -e .") from error


def build_parser(selected: str | None, prog: str = "berthmaster",
                 load_all: bool = False) -> argparse.ArgumentParser:
    """The command line, with the options of the ``selected`` subcommand only (or of every
    subcommand with ``load_all``, which imports them all)."""
    from berthmaster.version_command import short_version

    parser = argparse.ArgumentParser(
        prog=prog,
        description="OpenShift's scheduling and machine-lifecycle features for any "
        "Kubernetes cluster.",
    )
    parser.add_argument("--version", action="version", version=short_version(),
                        help="print berthmaster's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, summary) in SUBCOMMANDS.items():
        child = sub.add_parser(name, help=summary, description=summary)
        if load_all or name == selected:
            try:
                module = _load(name)
            except CommandError:
                if load_all:
                    continue  # completion in the image: the tooling subcommands have no options
                raise
            module.add_arguments(child)
            _add_logging_flags(child)
    return parser


def _add_logging_flags(parser: argparse.ArgumentParser) -> None:
    """``--log-format`` and ``-v`` for a subcommand that does not declare them, absent from
    ``args`` unless given (argparse refuses an option string twice: that one declares it)."""
    from berthmaster.foundation.logs import add_log_format
    from berthmaster.foundation.verbosity import add_verbosity

    for add in (add_log_format, add_verbosity):
        with contextlib.suppress(argparse.ArgumentError):
            add(parser, default=argparse.SUPPRESS)


def _configure_logging(args: argparse.Namespace) -> None:
    """Logging as the flags say, when the command has them (its own run may configure again,
    with the same flags)."""
    fmt = getattr(args, "log_format", None)
    verbosity = int(getattr(args, "verbosity", 0) or 0)
    if fmt is not None or verbosity:
        from berthmaster.foundation import logs

        logs.configure(args.command, fmt or "json", verbosity)


def main(argv: Sequence[str] | None = None, prog: str = "berthmaster") -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    selected = next((a for a in arguments if not a.startswith("-")), None)
    try:
        parser = build_parser(selected if selected in SUBCOMMANDS else None, prog)
    except CommandError as error:
        print(f"berthmaster {selected}: {error}", file=sys.stderr)
        return error.exit_code
    args = parser.parse_args(arguments)
    if args.command is None:
        parser.print_help()
        return 2
    _configure_logging(args)
    try:
        return _load(args.command).run(args)
    except KeyboardInterrupt:
        return 130
    except CommandError as error:
        # One line naming the problem and the fix; the traceback only when -v asks for it.
        if getattr(args, "verbosity", 0) or getattr(args, "verbose", False):
            traceback.print_exc()
        print(f"berthmaster {args.command}: {error}", file=sys.stderr)
        return error.exit_code


def kubectl_plugin() -> int:
    """The ``kubectl-berthmaster`` console script: kubectl runs an executable named
    ``kubectl-<name>`` found on PATH for ``kubectl <name> ...``, passing the rest of the
    arguments, so ``kubectl berthmaster explain pod NS/NAME`` is this CLI's ``explain``."""
    return main(sys.argv[1:], prog="kubectl berthmaster")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
