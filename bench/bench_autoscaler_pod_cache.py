"""Benchmark: the autoscaler's pod watch cache, whole pods against trimmed ones.

Builds ``--pods`` pods shaped as the API server sends them for a Deployment's pod (managedFields,
the last-applied annotation, env, probes, a projected token volume, a full status) and prints
the bytes they keep allocated (tracemalloc) decoded whole and after
:func:`berthmaster.operator.autoscaler.trim.trim_pod`, the informer transform of the autoscaler's
pod cache (operator/autoscaler/watches.py). No API server.

    PYTHONSAFEPATH=1 .venv/bin/python bench/bench_autoscaler_pod_cache.py    # 20,000 pods
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc
from collections.abc import Callable
from typing import Any

import orjson

from berthmaster.operator.autoscaler.trim import trim_pod

JSON = dict[str, Any]


def api_pod(i: int) -> bytes:
    name = f"web-7d9f8c6b5-{i:05d}"
    pod: JSON = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": f"team-{i % 50}", "uid": f"uid-{i:08d}",
            "resourceVersion": str(100000 + i), "creationTimestamp": "2026-11-26T10:00:00Z",
            "generateName": "web-7d9f8c6b5-",
            "labels": {"app": "web", "pod-template-hash": "7d9f8c6b5", "tier": "frontend"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-26T09:00:00Z",
                            "prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": "web-7d9f8c6b5", "uid": "rs-uid", "controller": True,
                                 "blockOwnerDeletion": True}],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update",
                 "apiVersion": "v1", "time": "2026-11-26T10:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}, "f:tier": {}}},
                              "f:spec": {"f:containers": {'k:{"name":"web"}': {
                                  "f:image": {}, "f:env": {}, "f:resources": {}}}}}},
                {"manager": "kubelet", "operation": "Update", "subresource": "status",
                 "apiVersion": "v1", "time": "2026-11-26T10:00:05Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {},
                                           "f:podIP": {}, "f:startTime": {}}}}],
        },
        "spec": {
            "nodeName": f"node-{i % 2000}", "schedulerName": "default-scheduler",
            "serviceAccountName": "default", "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "priority": 0, "enableServiceLinks": True,
            "containers": [{
                "name": "web", "image": "registry.example.com/web:1.2.3",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": f"SETTING_{k}", "value": f"value-{k}-{i}"} for k in range(12)],
                "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                              "limits": {"cpu": "1", "memory": "512Mi"}},
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080},
                                  "periodSeconds": 10},
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
                "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log",
                "imagePullPolicy": "IfNotPresent"}],
            "volumes": [{"name": "kube-api-access", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}],
        },
        "status": {
            "phase": "Running", "podIP": f"10.0.{i // 250 % 250}.{i % 250}",
            "hostIP": "192.168.0.1", "startTime": "2026-11-26T10:00:01Z", "qosClass": "Burstable",
            "conditions": [{"type": t, "status": "True",
                            "lastTransitionTime": "2026-11-26T10:00:05Z"}
                           for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "containerStatuses": [{"name": "web", "ready": True, "restartCount": 0,
                                   "image": "registry.example.com/web:1.2.3",
                                   "imageID": "registry.example.com/web@sha256:" + "a" * 64,
                                   "containerID": "containerd://" + "b" * 64,
                                   "state": {"running": {"startedAt": "2026-11-26T10:00:04Z"}}}],
        },
    }
    return orjson.dumps(pod)


def held(lines: list[bytes], transform: Callable[[JSON], JSON]) -> int:
    gc.collect()
    tracemalloc.start()
    kept = [transform(orjson.loads(line)) for line in lines]
    gc.collect()
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=20_000)
    args = parser.parse_args()
    lines = [api_pod(i) for i in range(args.pods)]
    whole = held(lines, lambda pod: pod)
    trimmed = held(lines, trim_pod)
    print(f"{args.pods} pods, {sum(map(len, lines)) / args.pods:.0f} JSON bytes each")
    print(f"whole:   {whole / 2**20:8.1f} MiB  ({whole / args.pods:6.0f} B/pod)")
    print(f"trimmed: {trimmed / 2**20:8.1f} MiB  ({trimmed / args.pods:6.0f} B/pod)  "
          f"{trimmed / whole:.0%} of whole")


if __name__ == "__main__":
    main()
