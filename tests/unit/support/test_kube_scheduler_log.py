# ruff: noqa: E501  (captured log lines are kept whole)
"""Reading kube-scheduler's scores from its klog text log (tests.support.kube_scheduler_log),
on lines captured from kube-scheduler 1.35 at -v=10."""

from __future__ import annotations

from tests.support.kube_scheduler_log import Binding, ScoreLog, parse_line

# one scoring cycle (two nodes, three plugins of eight kept) and its binding, as captured,
# among lines of other kinds
CAPTURED = """\
I1126 09:07:28.486335   30710 flags.go:64] FLAG: --allow-metric-labels="[]"
I1126 09:07:11.581587   30352 node_tree.go:65] "Added node to NodeTree" node="diff-n0" zone=":\\x00:zone-d"
I1126 09:07:33.230275   30710 schedule_one.go:83] "About to try and schedule pod" pod="diff-b/new-0-k"
I1126 09:07:33.232572   30710 taint_toleration.go:130] "node had untolerated taints" logger="FilterWithNominatedPods.Filter.TaintToleration" node="diff-n47" pod="diff-b/new-0-k" untoleratedTaint={"key":"maintenance","effect":"NoExecute"}
I1126 09:07:33.234559   30710 schedule_one.go:830] "Plugin scored node for pod" pod="diff-b/new-0-k" plugin="TaintToleration" node="diff-n1" score=0
I1126 09:07:33.234607   30710 schedule_one.go:830] "Plugin scored node for pod" pod="diff-b/new-0-k" plugin="NodeResourcesFit" node="diff-n1" score=71
I1126 09:07:33.234612   30710 schedule_one.go:830] "Plugin scored node for pod" pod="diff-b/new-0-k" plugin="PodTopologySpread" node="diff-n1" score=200
I1126 09:07:33.234632   30710 schedule_one.go:830] "Plugin scored node for pod" pod="diff-b/new-0-k" plugin="TaintToleration" node="diff-n28" score=300
I1126 09:07:33.234681   30710 schedule_one.go:830] "Plugin scored node for pod" pod="diff-b/new-0-k" plugin="NodeResourcesFit" node="diff-n28" score=71
I1126 09:07:33.234684   30710 schedule_one.go:830] "Plugin scored node for pod" pod="diff-b/new-0-k" plugin="PodTopologySpread" node="diff-n28" score=200
I1126 09:07:33.235118   30710 schedule_one.go:898] "Calculated node's final score for pod" pod="diff-b/new-0-k" node="diff-n1" score=271
I1126 09:07:33.235123   30710 schedule_one.go:898] "Calculated node's final score for pod" pod="diff-b/new-0-k" node="diff-n28" score=571
I1126 09:07:33.242645   30710 schedule_one.go:337] "Successfully bound pod to node" pod="diff-b/new-0-k" node="diff-n28" evaluatedNodes=119 feasibleNodes=2
"""


def test_a_structured_line_gives_its_message_and_values() -> None:
    line = parse_line(CAPTURED.splitlines()[4])
    assert line is not None
    assert line.source == "schedule_one.go:830"
    assert line.message == "Plugin scored node for pod"
    assert line.values == {"pod": "diff-b/new-0-k", "plugin": "TaintToleration",
                           "node": "diff-n1", "score": 0}


def test_go_escapes_and_json_values_do_not_stop_the_parser() -> None:
    zone = parse_line(CAPTURED.splitlines()[1])
    assert zone is not None and zone.values["zone"] == ":\x00:zone-d"
    taint = parse_line(CAPTURED.splitlines()[3])
    assert taint is not None and taint.values["node"] == "diff-n47"
    assert parse_line(CAPTURED.splitlines()[0]) is None  # printf-style: no quoted message
    assert parse_line("I1126 09:07:33.235118   30710 schedule_one.go:898] \"Calcul") is None
    assert parse_line("") is None


def test_a_cycle_per_pod_with_weighted_plugin_scores_totals_and_the_binding() -> None:
    log = ScoreLog()
    log.feed(CAPTURED.splitlines())
    cycle = log.last_cycle("diff-b/new-0-k")
    assert cycle is not None
    assert cycle.totals == {"diff-n1": 271, "diff-n28": 571}
    assert cycle.plugins["diff-n28"] == {"TaintToleration": 300, "NodeResourcesFit": 71,
                                         "PodTopologySpread": 200}
    assert cycle.top() == {"diff-n28"}
    assert log.bindings["diff-b/new-0-k"] == Binding("diff-n28", 119, 2)


def test_a_later_cycle_of_the_same_pod_is_its_last() -> None:
    lines = CAPTURED.splitlines()
    again = [line.replace("score=571", "score=99") for line in lines]
    log = ScoreLog()
    log.feed(lines + again)
    assert len(log.cycles["diff-b/new-0-k"]) == 2
    cycle = log.last_cycle("diff-b/new-0-k")
    assert cycle is not None and cycle.totals["diff-n28"] == 99
    assert cycle.top() == {"diff-n1"}
    log.forget("diff-b/new-0-k")
    assert log.last_cycle("diff-b/new-0-k") is None
    assert "diff-b/new-0-k" not in log.bindings
