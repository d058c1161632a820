"""Errors that end a command with one line and a documented exit status, and the one error
every policy reader raises.

Design: code that finds a problem an administrator must fix (a kubeconfig that does not exist,
an API server that cannot be reached) raises a :class:`CommandError` whose message is that one
line: what is wrong and what to do. ``berthmaster.cli.main`` prints it as
``berthmaster COMMAND: MESSAGE`` and exits with the error's status; the Python traceback is
printed only when ``-v``/``--verbose`` asks for it. Exit statuses: 2 for configuration (the
same as a bad flag), 3 for connectivity.

:class:`PolicyError` is what the scheduler's Policy reader and the descheduler's policy reader
raise: a ``ValueError`` that carries every problem found (validation never stops at the first),
each naming its field and the fix. Each command words it as its own: the scheduler prints the
problems, the descheduler and ``simulate`` the whole message, the Descheduler resource's status
joins the problems.
"""

from __future__ import annotations

from collections.abc import Iterable

from berthmaster.foundation.problems import bulleted

EXIT_CONFIGURATION = 2
EXIT_CONNECTIVITY = 3


class CommandError(Exception):
    """A problem the user must fix; ``str()`` is one line naming it and the fix."""

    exit_code = 1


class ConfigurationError(CommandError):
    exit_code = EXIT_CONFIGURATION


class ConnectivityError(CommandError):
    exit_code = EXIT_CONNECTIVITY


class PolicyError(ValueError):
    """Every problem found in a policy ``source`` (a file name, or what the policy is)."""

    def __init__(self, source: str, problems: Iterable[str], *, document: str = "policy"):
        self.source = source
        self.problems = list(problems)
        super().__init__(bulleted(f"invalid {document} {source}: {len(self.problems)} problem(s)",
                                  self.problems))
