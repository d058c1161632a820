"""Errors that end a command with one line and a documented exit status.

Design: code that finds a problem an administrator must fix (a kubeconfig that does not exist,
an API server that cannot be reached) raises a :class:`CommandError` whose message is that one
line: what is wrong and what to do. ``berthmaster.cli.main`` prints it as
``berthmaster COMMAND: MESSAGE`` and exits with the error's status; the Python traceback is
printed only when ``-v``/``--verbose`` asks for it. Exit statuses: 2 for configuration (the
same as a bad flag), 3 for connectivity.
"""

from __future__ import annotations

EXIT_CONFIGURATION = 2
EXIT_CONNECTIVITY = 3


class CommandError(Exception):
    """A problem the user must fix; ``str()`` is one line naming it and the fix."""

    exit_code = 1


class ConfigurationError(CommandError):
    exit_code = EXIT_CONFIGURATION


class ConnectivityError(CommandError):
    exit_code = EXIT_CONNECTIVITY
