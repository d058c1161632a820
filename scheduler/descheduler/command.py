"""``berthmaster deschedule``: one descheduler pass over the cluster, then a summary.

Exit codes: 0 the pass ran (whether or not anything was evicted), 1 a strategy failed, 2 the
policy file is invalid (every problem is printed) or the kubeconfig is unusable, 3 the API server
could not be reached or read, or the policy balances by actual usage and the metrics API
(``metrics.k8s.io``) is not served: one ``MetricsAPIUnavailable`` line, and nothing is evicted;
2 also for a bad ``--feature-gates`` (features.py).
A Prometheus query that cannot be run (usage_prometheus) fails the strategy that balances by
it, as upstream, and the others run.
``--dry-run`` evicts nothing and prints each pod it would have evicted and why.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from berthmaster.foundation import logs
from berthmaster.foundation.documents import DocumentError
from berthmaster.foundation.errors import PolicyError
from berthmaster.foundation.kube import KubeClient, KubeError, user_agent
from berthmaster.foundation.verbosity import add_verbosity
from berthmaster.scheduler.descheduler import metrics
from berthmaster.scheduler.descheduler.cycle import (
    list_cluster,
    prepare_for_pass,
    run_pass,
)
from berthmaster.scheduler.descheduler.features import (
    EVICTIONS_IN_BACKGROUND,
    parse_feature_gates,
)
from berthmaster.scheduler.descheduler.policy import load_policy_file
from berthmaster.scheduler.descheduler.summary import (
    EXIT_API_ERROR,
    EXIT_INVALID_POLICY,
    exit_code,
    render,
)
from berthmaster.scheduler.descheduler.usage_metrics import (
    REASON_UNAVAILABLE,
    MetricsUnavailable,
    read_actual_usage,
)
from berthmaster.scheduler.descheduler.usage_prometheus import (
    PrometheusUnavailable,
    read_prometheus_usage,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy-config-file", required=True, metavar="FILE",
                        help="DeschedulerPolicy file (descheduler/v1alpha1 or v1alpha2)")
    parser.add_argument("--dry-run", action="store_true",
                        help="evict nothing; print what would be evicted")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, "
                                             "~/.kube/config, then in-cluster)")
    # The descheduler's own --v and --logging-format (sigs.k8s.io/descheduler
    # cmd/descheduler/app/options: component-base's logs options).
    logs.add_log_format(parser)
    add_verbosity(parser)
    parser.add_argument("--feature-gates", default="", metavar="KEY=BOOL,...",
                        help="alpha features, as the descheduler's flag: EvictionsInBackground "
                             "(default false)")


async def deschedule(policy_file: str, dry_run: bool, kubeconfig: str | None,
                     feature_gates: str = "") -> int:
    try:
        gates = parse_feature_gates(feature_gates)
    except ValueError as error:
        print(f"berthmaster deschedule: --feature-gates: {error}", file=sys.stderr)
        return EXIT_INVALID_POLICY
    try:
        policy = load_policy_file(policy_file)
    except PolicyError as error:
        print(error, file=sys.stderr)
        return EXIT_INVALID_POLICY
    except DocumentError as error:
        print(f"berthmaster deschedule: --policy-config-file: {error}", file=sys.stderr)
        return EXIT_INVALID_POLICY
    # a kubeconfig or in-cluster problem (exit 2) or an unreachable API server (exit 3) ends the
    # command with one line: berthmaster.cli prints the CommandError
    kube = await KubeClient.connect(kubeconfig, agent=user_agent("berthmaster-descheduler"))
    async with kube:
        try:
            objects = await list_cluster(kube)
        except KubeError as error:
            print(f"cannot list the cluster: {error}", file=sys.stderr)
            return EXIT_API_ERROR
        state = prepare_for_pass(objects, policy)
        if policy.uses_actual_usage:
            try:
                state.actual_usage = await read_actual_usage(kube)
            except MetricsUnavailable as error:
                print(f"{REASON_UNAVAILABLE}: {error}; nothing was evicted", file=sys.stderr,
                      flush=True)
                return EXIT_API_ERROR
        if policy.prometheus is not None:
            for query in policy.prometheus_queries:
                # as upstream, a query that fails fails its strategy only (the others run)
                try:
                    state.prometheus_usage[query] = await read_prometheus_usage(
                        kube, policy.prometheus, query)
                except PrometheusUnavailable as error:
                    state.prometheus_errors[query] = str(error)
        print(f"descheduler pass ({policy.api_version}): {len(state.nodes)} of "
              f"{len(state.all_nodes)} nodes, {len(objects.pods)} pods"
              + (" [dry run]" if dry_run else ""), flush=True)
        tallies = await run_pass(state, policy, kube, dry_run,
                                 say=lambda line: print(line, flush=True),
                                 background=gates[EVICTIONS_IN_BACKGROUND])
    print(render(tallies, dry_run), flush=True)
    metrics.write_termination_message()  # the operator adds these to its /metrics
    return exit_code(tallies)


def run(args: argparse.Namespace) -> int:
    logs.configure("deschedule", args.log_format, args.verbosity)
    return asyncio.run(deschedule(args.policy_config_file, args.dry_run, args.kubeconfig,
                                  args.feature_gates))
