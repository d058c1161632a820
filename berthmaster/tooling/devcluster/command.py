"""``berthmaster dev build|up|status|env|down``: the local control plane from the command line.

Thin: parses arguments, calls :mod:`build` and :mod:`cluster`, and turns their errors into one
readable line (plus a log tail) and exit code 1 instead of a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from berthmaster.tooling.devcluster import build, images
from berthmaster.tooling.devcluster.cluster import (
    KWOK_MODES,
    ClusterError,
    ControlPlane,
    Options,
    describe,
)
from berthmaster.tooling.devcluster.kubelet import NodeError, NodeHost
from berthmaster.tooling.devcluster.kwok_incluster import kwok_manifests, stage_documents


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", default="berthmaster", help="cluster name (default: berthmaster)")
    sub = parser.add_subparsers(dest="dev_command", metavar="ACTION", required=True)
    sub.add_parser("build", help="build (or reuse) the binaries from the Go module proxy")
    up = sub.add_parser("up", help="start the control plane (idempotent)")
    up.add_argument("--port", type=int, default=None,
                    help="kube-apiserver port (default: a free one)")
    up.add_argument("--json", action="store_true", help="print the cluster description as JSON")
    up.add_argument("--kubelets", type=int, default=0, metavar="N",
                    help="real nodes: 1 runs containerd, kubelet and kube-proxy on this host "
                    "(root; Docker for the node images) beside the kwok nodes (default 0)")
    up.add_argument("--kwok", choices=KWOK_MODES, default="host",
                    help="where kwok runs: a host process (default), a pod in the cluster "
                    "from a local image (needs --kubelets 1), or nowhere")
    up.add_argument("--load", action="append", default=[], metavar="IMAGE",
                    help="Docker image to load into the real node (repeatable)")
    load = sub.add_parser("load", help="copy Docker images into the real node's containerd "
                          "(as `kind load docker-image` does)")
    load.add_argument("image_names", nargs="+", metavar="IMAGE")
    manifest = sub.add_parser("kwok-manifest", help="print the objects that run kwok in a "
                              "cluster from a local image (for kind)")
    manifest.add_argument("--image", default=images.KWOK_IMAGE)
    sub.add_parser("status", help="show which components run and where")
    sub.add_parser("env", help="print the KUBECONFIG line (eval \"$(berthmaster dev env)\")")
    sub.add_parser("down", help="stop every process and remove the cluster's state")
    image = sub.add_parser("image", help="build berthmaster's image (and the node images) "
                           "with Docker, with or without registry access")
    image.add_argument("--tag", default="berthmaster:dev", help="image name (berthmaster:dev)")
    image.add_argument("--node-images", action="store_true",
                       help="also build the images the real nodes use: pause, kwok, "
                       "local-path-provisioner and its helper")


def run(args: argparse.Namespace) -> int:
    say = (lambda line: print(line, file=sys.stderr)) if getattr(args, "json", False) else print
    try:
        options = (Options(args.kubelets, args.kwok) if args.dev_command == "up" else None)
        plane = ControlPlane(args.name, apiserver_port=getattr(args, "port", None), say=say,
                             options=options, images_to_load=tuple(getattr(args, "load", ())))
        if args.dev_command == "build":
            build.build_all()
        elif args.dev_command == "up":
            cluster = plane.up()
            if args.json:
                print(json.dumps(describe(cluster), indent=2))
            else:
                print(f"Cluster {cluster.name!r} is up at {cluster.server}"
                      + (f" (started in {cluster.started_in:.1f}s)" if cluster.started_in else ""))
                print(f"  {cluster.env_line()}")
        elif args.dev_command == "status":
            rows = plane.status()
            if not rows:
                print(f"No cluster {args.name!r} (start one with: berthmaster dev up)")
                return 1
            _table([("COMPONENT", "STATE", "PID", "ENDPOINT"), *rows])
            recorded = plane.load()
            if recorded is not None:
                print(f"kubeconfig: {recorded.kubeconfig}")
            return 0 if all(row[1] == "running" for row in rows) else 1
        elif args.dev_command == "env":
            recorded = plane.load()
            if recorded is None:
                print(f"No cluster {args.name!r} (start one with: berthmaster dev up)",
                      file=sys.stderr)
                return 1
            print(recorded.env_line())
        elif args.dev_command == "down":
            plane.down()
        elif args.dev_command == "load":
            recorded = plane.load()
            if recorded is None or not recorded.options.kubelets:
                print(f"No cluster {args.name!r} with a real node (start one with: berthmaster "
                      "dev up --kubelets 1)", file=sys.stderr)
                return 1
            NodeHost(plane.node_layout, print).load_images(args.image_names)
            print(f"Loaded {', '.join(args.image_names)} into node {plane.node_layout.name}")
        elif args.dev_command == "kwok-manifest":
            print(yaml.safe_dump_all(kwok_manifests(args.image, stage_documents())), end="")
        elif args.dev_command == "image":
            report = images.build_image(args.tag, print)
            if args.node_images:
                images.pause_image(print)
                images.kwok_image(print)
                images.local_path_image(print)
                images.local_path_helper_image(print)
            print(f"Image {report.name}: {report.size_bytes / 2**20:.0f} MiB on {report.base}, "
                  f"built in {report.build_seconds:.0f}s")
    except (build.BuildError, ClusterError, images.ImageError, NodeError,
            FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = zip(row, widths, strict=True)
        print("  ".join(cell.ljust(width) for cell, width in cells).rstrip())
