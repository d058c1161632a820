"""``berthmaster scheduler``'s command line, accepting kube-scheduler's spellings too.

Design: a Deployment's ``extraArgs`` are often copied from a kube-scheduler manifest, so where
berthmaster has the same setting it takes kube-scheduler's flag as well (see docs/scheduler.md
for the table): ``-v N``/``--v=N`` levels, Go durations on the leader-election flags (plain
numbers stay seconds, as the chart passes them), ``--leader-elect-resource-name``/``-namespace``
/``-lock``, ``--kube-api-qps``/``--kube-api-burst``, and the secure-serving flags
(``--secure-port``, ``--bind-address``, ``--tls-*``, ``--authentication-*``/``--authorization-*``;
berthmaster.foundation.serving). Everything here is pure argument parsing; nothing is read or
connected.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from berthmaster.foundation.durations import parse_go_duration
from berthmaster.foundation.logs import add_log_format
from berthmaster.foundation.serving_options import add_secure_serving_arguments
from berthmaster.foundation.verbosity import add_verbosity


def seconds(text: str) -> float:
    """A leader-election period: plain seconds (``15``, ``2.5``) or a Go duration (``15s``)."""
    try:
        value = float(text)
    except ValueError:
        try:
            value = parse_go_duration(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def boolean(text: str) -> bool:
    """Go's ``strconv.ParseBool`` spellings, as kube-scheduler's ``--leader-elect=false``."""
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE",
                        help="a kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration "
                             "(profiles, plugins, pluginConfig), read as kube-scheduler 1.35 "
                             "reads it; default: kube-scheduler 1.35's default profile")
    parser.add_argument("--policy", metavar="FILE",
                        help="scheduler Policy file (kind: Policy, JSON or YAML), the OpenShift "
                             "v1 way to write a profile")
    parser.add_argument("--scheduler-name", default="berthmaster",
                        help="schedule pods whose spec.schedulerName is this "
                             "(default: %(default)s)")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config)")
    parser.add_argument("--leader-elect", nargs="?", const=True, default=True, type=boolean,
                        metavar="true|false",
                        help="elect a leader among replicas with a Lease (default: on)")
    parser.add_argument("--no-leader-elect", dest="leader_elect", action="store_false",
                        help="run without leader election (a single replica)")
    parser.add_argument("--leader-elect-lease-namespace", "--leader-elect-resource-namespace",
                        dest="leader_elect_lease_namespace", default="kube-system",
                        help="namespace of the Lease (default: %(default)s)")
    parser.add_argument("--leader-elect-lease-name", "--leader-elect-resource-name",
                        dest="leader_elect_lease_name", default="berthmaster",
                        help="name of the Lease (default: %(default)s)")
    parser.add_argument("--leader-elect-resource-lock", choices=["leases"], default="leases",
                        help="kube-scheduler's lock kind; only leases, as kube-scheduler 1.35")
    parser.add_argument("--leader-elect-lease-duration", type=seconds, default=15.0,
                        metavar="DURATION",
                        help="Go duration (15s) or seconds (default: 15s)")
    parser.add_argument("--leader-elect-renew-deadline", type=seconds, default=10.0,
                        metavar="DURATION",
                        help="Go duration (10s) or seconds (default: 10s)")
    parser.add_argument("--leader-elect-retry-period", type=seconds, default=2.0,
                        metavar="DURATION",
                        help="Go duration (2s) or seconds (default: 2s)")
    parser.add_argument("--leader-elect-identity", default=None,
                        help="this replica's identity in the Lease (default: hostname_uuid)")
    parser.add_argument("--metrics-bind-address", default="0.0.0.0:10260",
                        help="serve /metrics, /healthz and /readyz here over plain HTTP, "
                             "without authentication (empty to disable; --secure-port serves "
                             "them over HTTPS with it; default: %(default)s)")
    parser.add_argument("--kube-api-qps", type=float, default=50.0,
                        help="client requests per second (default: %(default)s, as kube-scheduler)")
    parser.add_argument("--kube-api-burst", type=int, default=100,
                        help="client burst (default: %(default)s, as kube-scheduler)")
    parser.add_argument("--bind-concurrency", type=int, default=64,
                        help="bindings in flight at once (default: %(default)s)")
    parser.add_argument("--volume-bind-timeout-seconds", type=float, default=600.0,
                        help="how long PreBind waits for the PV controller to bind a pod's "
                             "claims before the pod is retried (VolumeBinding's "
                             "bindTimeoutSeconds; default: %(default)s)")
    parser.add_argument("--percentage-of-nodes-to-score", type=int, default=0,
                        help="stop filtering after this share of nodes fit (0: adaptive, as "
                             "upstream)")
    parser.add_argument("--plugin-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="interrupt a call of an out-of-tree plugin in the scheduling "
                             "cycle after this long: its pod fails with the plugin's error and "
                             "is retried with backoff (0: never; docs/plugins.md)")
    add_log_format(parser)
    add_verbosity(parser)
    add_secure_serving_arguments(parser)


# With --config, kube-scheduler honours the leader-election flags alone (cmd/kube-scheduler/
# app/options/options.go, ApplyTo: "If the --config arg is specified, honor the leader
# election CLI args only"); these flags are the configuration file's settings instead.
_LEADER_FLAGS = {
    "--leader-elect": "leader_elect", "--no-leader-elect": "leader_elect",
    "--leader-elect-lease-duration": "leader_elect_lease_duration",
    "--leader-elect-renew-deadline": "leader_elect_renew_deadline",
    "--leader-elect-retry-period": "leader_elect_retry_period",
    "--leader-elect-lease-name": "leader_elect_lease_name",
    "--leader-elect-resource-name": "leader_elect_lease_name",
    "--leader-elect-lease-namespace": "leader_elect_lease_namespace",
    "--leader-elect-resource-namespace": "leader_elect_lease_namespace",
}
_CONFIG_FLAGS = ("--scheduler-name", "--percentage-of-nodes-to-score", "--kube-api-qps",
                 "--kube-api-burst", "--volume-bind-timeout-seconds")


def given(argv: Sequence[str]) -> set[str]:
    """The long flags written on a command line (``--flag value`` or ``--flag=value``)."""
    return {arg.split("=", 1)[0] for arg in argv if arg.startswith("--")}


def apply_config(args: argparse.Namespace, config: Any, written: set[str]) -> list[str]:
    """Put a KubeSchedulerConfiguration's settings into ``args`` with kube-scheduler's
    precedence: leader-election flags written on the command line win over the file; the
    file's client QPS/burst and percentage win over their flags, which are then reported
    back (the caller warns about each)."""
    election = config.leader_election
    from_file = {
        "leader_elect": election.leader_elect,
        "leader_elect_lease_duration": election.lease_duration,
        "leader_elect_renew_deadline": election.renew_deadline,
        "leader_elect_retry_period": election.retry_period,
        "leader_elect_lease_name": election.resource_name,
        "leader_elect_lease_namespace": election.resource_namespace,
    }
    kept = {dest for flag, dest in _LEADER_FLAGS.items() if flag in written}
    for dest, value in from_file.items():
        if dest not in kept:
            setattr(args, dest, value)
    args.kube_api_qps, args.kube_api_burst = config.qps, config.burst
    args.percentage_of_nodes_to_score = config.percentage_of_nodes_to_score
    args.scheduler_name = config.scheduler_names[0]
    # one binder serves every profile: the first profile's VolumeBindingArgs apply
    args.volume_bind_timeout_seconds = config.profiles[0].bind_timeout_seconds
    return [flag for flag in _CONFIG_FLAGS if flag in written]
