"""The longest functions under a folder, by lines (``def`` line to last line, docstring included).

Usage: hack/longest_functions.py [FOLDER ...] [--top N] [--over N]. ``--over 60`` lists the
functions to look at for the rule that none in operator/ is over 60 lines without a reason in
its docstring.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def lengths(folder: Path) -> list[tuple[int, str, str]]:
    rows = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                end = node.end_lineno or node.lineno
                rows.append((end - node.lineno + 1, str(path), node.name))
    return sorted(rows, key=lambda row: (-row[0], row[1], row[2]))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", default=["operator"])
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--over", type=int, default=0)
    args = parser.parse_args(argv)
    for folder in args.folders:
        rows = [row for row in lengths(Path(folder)) if row[0] > args.over][:args.top]
        for length, path, name in rows:
            print(f"{length:5d} {path} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
