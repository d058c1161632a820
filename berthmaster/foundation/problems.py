"""Validation problems: every mistake in one object or file, each naming its field and the fix.

Design: validation never stops at the first mistake. A parser takes a :class:`Problems`, adds
each problem as (field path, message) — the path as the API server's field errors print it
(``spec.unhealthyConditions[0].timeout``, ``profiles[0].pluginConfig[1].args``;
apimachinery's pkg/util/validation/field ``Path.String``), the message a sentence saying what
to write instead — returns a usable default and goes on. The caller turns what was found into
one error at the end: :meth:`Problems.lines` (``path: message``), :meth:`Problems.render` (a
heading and one bulleted line per problem, as every multi-problem error of the project reads)
or :meth:`Problems.joined` (one line, for a condition's message).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass
class Problems:
    """The problems found so far, in the order found."""

    found: list[Problem] = field(default_factory=list)

    def add(self, path: str, message: str) -> None:
        """Record ``message`` about the field at ``path`` ("" for the whole document)."""
        self.found.append(Problem(path, message))

    def extend(self, others: Iterable[Problem]) -> None:
        self.found.extend(others)

    def __bool__(self) -> bool:
        return bool(self.found)

    def __len__(self) -> int:
        return len(self.found)

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.found)

    def lines(self, subject: str = "") -> list[str]:
        """``path: message``, one a problem; each after ``subject: `` when one is given (the
        object the problems are about, such as ``Machine worker-1``)."""
        lead = f"{subject}: " if subject else ""
        return [f"{lead}{problem}" for problem in self.found]

    def render(self, heading: str) -> str:
        """``heading`` then ``  - path: message`` lines: the text of a multi-problem error."""
        return bulleted(heading, self.lines())

    def joined(self, separator: str = "; ") -> str:
        return separator.join(self.lines())


def bulleted(heading: str, lines: Iterable[str]) -> str:
    """``heading:`` and one ``  - line`` per line."""
    return f"{heading}:\n" + "\n".join(f"  - {line}" for line in lines)
