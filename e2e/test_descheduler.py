"""A Descheduler resource run by the operator on kind: the seed's sample policy, once, as a Job
in kube-system running the same image (`berthmaster deschedule`), with the status updated."""

from __future__ import annotations

import uuid

import yaml

from e2e.conftest import ROOT, Kind, wait_for

OWNER_LABEL = "berthmaster.io/descheduler"


def test_descheduler_runs_the_documented_policy_as_a_job(kind: Kind) -> None:
    document = yaml.safe_load((ROOT / "deploy" / "samples" / "descheduler-once.yaml").read_text())
    name = f"e2e-{uuid.uuid4().hex[:6]}"
    document["metadata"]["name"] = name
    document["spec"]["dryRun"] = True  # the cluster is shared with the other tests
    kind.apply(yaml.safe_dump(document))
    try:
        jobs = wait_for(lambda: kind.items("jobs", "-n", "kube-system", "-l",
                                           f"{OWNER_LABEL}={name}"), "the descheduler Job")
        job = jobs[0]["metadata"]["name"]
        kind.run("wait", "--for=condition=Complete", f"job/{job}", "-n", "kube-system",
                 "--timeout=180s")
        pod = kind.items("pods", "-n", "kube-system", "-l", f"job-name={job}")[0]
        container = pod["spec"]["containers"][0]
        assert container["command"][:2] == ["berthmaster", "deschedule"]
        assert pod["metadata"]["annotations"]["scheduler.alpha.kubernetes.io/critical-pod"] == (
            "true")
        status = wait_for(lambda: kind.get("descheduler", name).get("status"),
                          "the Descheduler status")
        assert status
    finally:
        kind.run("delete", "descheduler", name, "--wait=false", check=False)
