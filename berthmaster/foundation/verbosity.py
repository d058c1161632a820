"""``-v N`` / ``--v=N`` / ``--verbose``: klog-style verbosity levels for every long-running command.

kube-scheduler and OpenShift's operators take a klog level (``--v=2``, ``-v 4``); berthmaster's
commands accept the same spellings, and a bare ``-v``/``--verbose`` (berthmaster's older boolean
flag) means level 4. Levels of 4 and above log debug lines; any level above 0 makes a fatal
error print its Python traceback (``berthmaster.cli``).
"""

from __future__ import annotations

import argparse
from typing import Any

# Default verbosity of a bare ``-v``/``--verbose``: debug.
VERBOSE_LEVEL = 4
# From this klog level on, berthmaster logs at DEBUG (klog's "debug-level verbosity").
DEBUG_LEVEL = 4


def level(text: str) -> int:
    """A klog verbosity level (``-v 4``, ``--v=4``): a non-negative integer."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a log level; use 0-10") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a log level; use 0-10")
    return value


def add_verbosity(parser: argparse.ArgumentParser, default: Any = 0) -> None:
    """Add ``-v``/``--v``/``--verbose`` (``args.verbosity``, default 0)."""
    parser.add_argument("-v", "--v", "--verbose", dest="verbosity", type=level, nargs="?",
                        const=VERBOSE_LEVEL, default=default, metavar="N",
                        help=f"log verbosity, as klog's -v (a bare -v is {VERBOSE_LEVEL}); "
                             f"{DEBUG_LEVEL} and above log debug lines; any level prints a "
                             "traceback with a fatal error")


def debug_logging(args: argparse.Namespace) -> bool:
    return int(getattr(args, "verbosity", 0)) >= DEBUG_LEVEL
