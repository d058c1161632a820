"""Behaviour that must match kubernetes-sigs/descheduler exactly (issue 12, items 13-18).

v1alpha1 policies follow release v0.30.1 (the last that read them); v1alpha2 follows upstream's
current main. Each test names the upstream file and function the behaviour comes from.
"""

from __future__ import annotations

import textwrap
from datetime import timedelta
from typing import Any

import pytest

from berthmaster.scheduler.descheduler.context import ClusterState
from berthmaster.scheduler.descheduler.fields import PolicyError, Problems
from berthmaster.scheduler.descheduler.policy import parse_policy_text
from berthmaster.scheduler.descheduler.strategies import failed_pods, pod_lifetime
from tests.unit.descheduler.builders import NOW, make_node, make_pod, plan


def params(module: Any, **args: Any) -> Any:
    problems = Problems()
    parsed = module.parse(args, module.NAME, problems)
    assert not problems, problems.items
    return parsed


def v1alpha1(strategies: str) -> str:
    return textwrap.dedent('''
        apiVersion: descheduler/v1alpha1
        kind: DeschedulerPolicy
        strategies:
    ''') + textwrap.indent(textwrap.dedent(strategies), "  ")


# ----------------------------------------------------------------------- item 13

def failed_pod(name: str, age: timedelta) -> dict[str, Any]:
    pod = make_pod(name, "n1", phase="Failed", age=age)
    pod["status"]["containerStatuses"] = [{"name": "c", "state": {"terminated": {
        "reason": "Error", "exitCode": 1}}}]
    return pod


@pytest.mark.parametrize("document", [
    v1alpha1("RemoveFailedPods:\n  enabled: true\n"),
    textwrap.dedent('''
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerPolicy
        profiles:
        - name: p
          plugins: {deschedule: {enabled: [RemoveFailedPods]}}
    '''),
])
def test_remove_failed_pods_min_pod_lifetime_defaults_to_an_hour(document: str) -> None:
    """Upstream removefailedpods/defaults.go SetDefaults_RemoveFailedPodsArgs sets
    MinPodLifetimeSeconds to 3600 when unset; v0.30.1 runs it on v1alpha1 policies too
    (pkg/descheduler/policyconfig.go setDefaults after v1alpha1.V1alpha1ToInternal)."""
    policy = parse_policy_text(document)
    chosen = policy.strategies[0].params
    assert chosen.min_pod_lifetime_seconds == 3600
    pods = [failed_pod("young", timedelta(minutes=30)), failed_pod("old", timedelta(hours=2))]
    got, _ = plan(failed_pods, chosen, [make_node("n1")], pods)
    assert got == ["old"]


def test_remove_failed_pods_age_is_from_creation_not_start() -> None:
    """Upstream removefailedpods/failedpods.go validateCanEvict: the age is
    metav1.Now() - pod.GetCreationTimestamp(); status.startTime plays no part."""
    pod = failed_pod("restarted-late", timedelta(hours=2))
    pod["status"]["startTime"] = (NOW - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    got, _ = plan(failed_pods, params(failed_pods, minPodLifetimeSeconds=3600),
                  [make_node("n1")], [pod])
    assert got == ["restarted-late"]


# ----------------------------------------------------------------------- item 14

V0301_STATES = ["Running", "Pending", "Unknown", "NodeAffinity", "NodeLost", "Shutdown",
                "UnexpectedAdmissionError", "PodInitializing", "ContainerCreating",
                "ImagePullBackOff", "CrashLoopBackOff", "CreateContainerConfigError",
                "ErrImagePull", "CreateContainerError", "InvalidImageName"]


@pytest.mark.parametrize("state", V0301_STATES)
def test_pod_lifetime_accepts_every_v0_30_1_state_in_v1alpha1(state: str) -> None:
    """Upstream v0.30.1 podlifetime/validation.go ValidatePodLifeTimeArgs: the 15 states of
    podLifeTimeAllowedStates (phases, pod reasons, container waiting reasons)."""
    policy = parse_policy_text(v1alpha1(f'''
        PodLifeTime:
          enabled: true
          params:
            podLifeTime: {{maxPodLifeTimeSeconds: 60, states: [{state}]}}
    '''))
    assert policy.strategies[0].params.states == (state,)


def test_pod_lifetime_v1alpha1_rejects_states_v0_30_1_did_not_know() -> None:
    """v0.30.1 ValidatePodLifeTimeArgs refuses a state outside its set (OOMKilled came later)."""
    with pytest.raises(PolicyError, match="states must be one of"):
        parse_policy_text(v1alpha1('''
            PodLifeTime:
              enabled: true
              params:
                podLifeTime: {maxPodLifeTimeSeconds: 60, states: [OOMKilled]}
        '''))


def waiting(name: str, reason: str, age: timedelta = timedelta(hours=2)) -> dict[str, Any]:
    pod = make_pod(name, "n1", age=age)
    pod["status"]["containerStatuses"] = [{"name": "c", "state": {"waiting": {"reason": reason}}}]
    return pod


def test_pod_lifetime_matches_pod_reason_and_container_waiting_reasons() -> None:
    """Upstream podlifetime/pod_lifetime.go New: a state matches the pod's phase, its
    status.reason, or a container's waiting reason (init containers only when
    includingInitContainers is set, in upstream's current main)."""
    evicted_node = make_pod("lost", "n1", age=timedelta(hours=2))
    evicted_node["status"]["reason"] = "NodeLost"
    init_only = make_pod("init", "n1", age=timedelta(hours=2))
    init_only["status"]["initContainerStatuses"] = [
        {"name": "i", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]
    pods = [waiting("looping", "CrashLoopBackOff"), waiting("pulling", "ImagePullBackOff"),
            evicted_node, init_only, make_pod("running", "n1", age=timedelta(hours=3))]
    got, _ = plan(pod_lifetime, params(pod_lifetime, maxPodLifeTimeSeconds=60, states=[
        "CrashLoopBackOff", "NodeLost"]), [make_node("n1")], pods)
    assert sorted(got) == ["looping", "lost"]
    got, _ = plan(pod_lifetime, params(pod_lifetime, maxPodLifeTimeSeconds=60, states=[
        "CrashLoopBackOff"], includingInitContainers=True), [make_node("n1")], pods)
    assert sorted(got) == ["init", "looping"]


# ----------------------------------------------------------------------- item 17

ZONED = [make_node("a1", labels={"zone": "a"}), make_node("b1", labels={"zone": "b"}),
         make_node("c1", labels={"zone": "c", "gpu": "true"}), make_node("bare"),
         make_node("n5", labels={"zone": "a", "rank": "5"})]


@pytest.mark.parametrize(("selector", "selected"), [
    ("zone in (a,b)", ["a1", "b1", "n5"]),
    ("zone in (a, b),!rank", ["a1", "b1"]),
    ("zone notin (a)", ["b1", "c1", "bare"]),   # notin matches a node without the key
    ("!zone", ["bare"]),
    ("zone!=b", ["a1", "c1", "bare", "n5"]),    # != too
    ("zone==c,gpu", ["c1"]),
    ("rank>4", ["n5"]),
    ("rank<4", []),
    ("", ["a1", "b1", "c1", "bare", "n5"]),
])
def test_policy_node_selector_takes_the_full_label_selector_syntax(
    selector: str, selected: list[str]
) -> None:
    """Upstream pkg/descheduler/descheduler.go runs on nodeutil.ReadyNodes(..., nodeSelector),
    which parses the string with k8s.io/apimachinery/pkg/labels Parse (selector.go Parser):
    set-based requirements, '!key', '!=' and integer '>'/'<' included."""
    policy = parse_policy_text(v1alpha1("RemoveDuplicates:\n  enabled: true\n")
                               + f"nodeSelector: {selector!r}\n")
    state = ClusterState(ZONED, [], node_selector=policy.node_selector)
    assert [n["metadata"]["name"] for n in state.nodes] == selected


@pytest.mark.parametrize(("selector", "message"), [
    ("zone in a", "found 'a' expected: '('"),
    ("zone in ()x", "found 'x', expected: ',' or 'end of string'"),
    ("rank>high", "for 'Gt', 'Lt' operators, the value must be an integer"),
    ("zone=a,,b", "found ',', expected: identifier after ','"),
    ("-zone", "name part must consist of alphanumeric characters"),
    ("zone=a b", "found 'b', expected: ',' or 'end of string'"),
])
def test_a_node_selector_that_does_not_parse_is_refused_at_load(selector: str,
                                                                  message: str) -> None:
    """labels.Parse (apimachinery selector.go Parser.parse / parseValues / NewRequirement)
    rejects these; upstream fails the policy instead of selecting nothing."""
    with pytest.raises(PolicyError) as error:
        parse_policy_text(v1alpha1("RemoveDuplicates:\n  enabled: true\n")
                          + f"nodeSelector: {selector!r}\n")
    assert "nodeSelector: " in str(error.value) and message in str(error.value)
