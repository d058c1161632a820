"""``berthmaster policy``: commands on scheduler Policy files.

``berthmaster policy convert FILE [-o yaml|json]`` prints the KubeSchedulerConfiguration
(``kubescheduler.config.k8s.io/v1``) equivalent to a Policy file (scheduler/policy_convert.py
has the translation), for ``berthmaster scheduler --config`` or kube-scheduler itself. What
kube-scheduler 1.35 cannot express goes to stderr, one line per part of the Policy, and the
exit status says how the conversion went: 0 exact, 1 something not expressed (the output is
still the closest profile), 2 the file is not a valid Policy (every problem listed).
"""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from berthmaster.foundation.documents import read_text
from berthmaster.foundation.errors import PolicyError
from berthmaster.scheduler.config import DEFAULT_SCHEDULER_NAME
from berthmaster.scheduler.policy_convert import convert_policy_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="policy_command", metavar="SUBCOMMAND")
    convert = sub.add_parser(
        "convert", help="print the KubeSchedulerConfiguration equivalent to a Policy file",
        description="Print the kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration "
        "equivalent to a kind: Policy file, as kube-scheduler v1.22 translated a Policy. "
        "What 1.35 cannot express is listed on stderr; exit 0 exact, 1 not all expressed, "
        "2 invalid Policy.")
    convert.add_argument("file", metavar="FILE", help="the Policy file (JSON or YAML)")
    convert.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    convert.add_argument("--scheduler-name", default=DEFAULT_SCHEDULER_NAME,
                         help="the profile's schedulerName (default %(default)s)")


def run(args: argparse.Namespace) -> int:
    if args.policy_command != "convert":
        print("berthmaster policy: say what to do: berthmaster policy convert FILE",
              file=sys.stderr)
        return 2
    try:
        conversion = convert_policy_text(read_text(args.file), args.file, args.scheduler_name)
    except (PolicyError, ValueError) as error:  # an invalid Policy; a missing or binary file
        print(f"berthmaster policy convert: {error}", file=sys.stderr)
        return 2
    if args.output == "json":
        sys.stdout.write(json.dumps(conversion.config, indent=2) + "\n")
    else:
        sys.stdout.write(yaml.safe_dump(conversion.config, sort_keys=False))
    for line in conversion.unexpressed:
        print(f"berthmaster policy convert: {line}", file=sys.stderr)
    return 0 if conversion.exact else 1
