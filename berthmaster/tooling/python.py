"""How tooling, tests and benchmarks start Python children from a checkout: the one place for
the one rule.

setup.py maps the checkout's top-level ``operator/`` folder into the package as
``berthmaster.operator``; with the checkout's root on ``sys.path`` that folder would shadow
the standard library's ``operator`` module, and ``python -m`` run from the root puts the root
there. ``-P`` (Python 3.11's safe path, the flag behind ``PYTHONSAFEPATH``) leaves the working
directory off ``sys.path``, so the child imports the installed package only. The image sets
``PYTHONSAFEPATH`` once (Dockerfile); ``hack/venv.sh`` exports it for the scripts and the test
runner.
"""

from __future__ import annotations

import sys

PYTHON = (sys.executable, "-P")
# ``berthmaster ...`` as a child process: BERTHMASTER_CLI + ("scheduler", "--kubeconfig", ...)
BERTHMASTER_CLI = (*PYTHON, "-m", "berthmaster.cli")
