"""Map the repository's folders onto the ``berthmaster`` package.

``scheduler/`` and ``operator/`` live at the top of the repository (as the design lays it out)
but are installed as ``berthmaster.scheduler`` and ``berthmaster.operator``: ``operator`` is a
standard-library module, so neither may ever be importable at top level. The package list is
derived from the tree so new subpackages need no edit here. Wheel and editable installs use the
same mapping.
"""

from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).parent
MAPPING = {"berthmaster": "berthmaster", "berthmaster.scheduler": "scheduler",
           "berthmaster.operator": "operator"}


def packages() -> list[str]:
    found = []
    for package, folder in MAPPING.items():
        base = ROOT / folder
        for init in sorted(base.rglob("__init__.py")):
            relative = init.parent.relative_to(base)
            if any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
                continue
            found.append(".".join([package, *relative.parts]) if relative.parts else package)
    return found


setup(
    packages=packages(),
    package_dir=MAPPING,
    package_data={"berthmaster": ["py.typed", "data/*", "data/**/*"],
                  "berthmaster.tooling.devcluster": ["data/*"],
                  "berthmaster.scheduler": ["py.typed", "data/*"],
                  "berthmaster.operator": ["py.typed", "data/*"],
                  "berthmaster.operator.machines.providers.aws": ["*.csv"]},
    include_package_data=True,
)
