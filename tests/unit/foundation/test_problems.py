"""The validation-problems type: field path and message, as apimachinery's field errors print
them (pkg/util/validation/field/errors.go ``Error.Error``: ``<path>: <detail>``)."""

from __future__ import annotations

from berthmaster.foundation.errors import PolicyError
from berthmaster.foundation.problems import Problem, Problems, bulleted


def test_problems_keep_their_order_and_render_path_then_message() -> None:
    problems = Problems()
    assert not problems
    problems.add("spec.maxUnhealthy", "'x' is neither an integer nor a percentage")
    problems.add("", "the document must be a map")
    assert len(problems) == 2
    assert next(iter(problems)) == Problem("spec.maxUnhealthy",
                                           "'x' is neither an integer nor a percentage")
    assert problems.lines() == ["spec.maxUnhealthy: 'x' is neither an integer nor a percentage",
                                "the document must be a map"]
    assert problems.lines("Machine m")[1] == "Machine m: the document must be a map"
    assert problems.joined() == ("spec.maxUnhealthy: 'x' is neither an integer nor a percentage"
                                 "; the document must be a map")
    assert problems.render("ClusterAutoscaler 'default' is invalid") == (
        "ClusterAutoscaler 'default' is invalid:\n"
        "  - spec.maxUnhealthy: 'x' is neither an integer nor a percentage\n"
        "  - the document must be a map")


def test_extend_and_the_policy_error_share_the_rendering() -> None:
    problems = Problems()
    problems.extend([Problem("a", "b")])
    assert str(PolicyError("p.yaml", problems.lines())) == bulleted(
        "invalid policy p.yaml: 1 problem(s)", ["a: b"])
