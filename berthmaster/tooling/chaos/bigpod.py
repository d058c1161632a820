"""Pods as large as kube-apiserver accepts: a request body of exactly its limit.

Two limits bound one object, and they count different bytes:

- the request body: kube-apiserver refuses a body over ``MaxRequestBodyBytes``, 3 MiB
  (k8s.io/apiserver pkg/server/config.go; endpoints/handlers/rest.go ``limitedReadBody``
  answers 413 past it), counted in the bytes sent (JSON here);
- the stored object: kube-apiserver's etcd client sends at most 2 MiB in one message
  (etcd client/v3 options.go ``defaultMaxCallSendMsgSize``; k8s.io/apiserver
  pkg/storage/storagebackend/factory/etcd3.go sets no other), and the object goes there as
  protobuf, about as long as its JSON for plain text, but a character JSON escapes
  (``\\u0001``: six bytes) is one byte there.

So a pod of 3 MiB of plain JSON cannot be stored whatever etcd takes, while a 3 MiB body
whose text is partly escaped is: :func:`as_large_as` fills one container's environment with
:data:`PLAIN` bytes of plain text (over etcd's default 1.5 MiB request limit, so the dev
cluster's ``--max-request-bytes`` matters) and escaped control characters for the rest, to the
byte. The API server writes the same escapes back on every watch line (encoding/json), so the
line is as long as the request: the watch readers' bound (``kube.MAX_LINE_BYTES``, 16 MiB)
leaves room for an object stored at the 2 MiB cap entirely of escaped characters (12 MiB).
"""

from __future__ import annotations

import copy
from typing import Any

import orjson

from berthmaster.tooling.devcluster.cluster import APISERVER_MAX_REQUEST_BODY_BYTES

Obj = dict[str, Any]
PLAIN = 1_600_000  # stored byte for byte: more than etcd's default 1.5 MiB request limit
ESCAPED = "\x01"  # one byte stored, six in JSON (\u0001), on the request and on the watch
ETCD_CLIENT_SEND_BYTES = 2 * 1024 * 1024  # etcd client/v3 options.go defaultMaxCallSendMsgSize


def body_size(obj: Obj) -> int:
    """The bytes of ``obj`` as the client sends it (compact JSON, berthmaster.foundation.kube)."""
    return len(orjson.dumps(obj))


def as_large_as(pod: Obj, body_bytes: int = APISERVER_MAX_REQUEST_BODY_BYTES,
                plain: int = PLAIN) -> Obj:
    """A copy of ``pod`` whose first container's environment makes its JSON exactly
    ``body_bytes`` long: ``plain`` bytes of plain text, escaped characters for the rest."""
    sized = copy.deepcopy(pod)
    env = [{"name": "PLAIN", "value": "x" * plain}, {"name": "ESCAPED", "value": ""}]
    sized["spec"]["containers"][0]["env"] = env
    room = body_bytes - body_size(sized)
    if room < 0:
        name = (pod.get("metadata") or {}).get("name")
        raise ValueError(f"pod {name}: {body_bytes} bytes is less than the pod with {plain} "
                         f"plain bytes of env ({body_bytes - room}); ask for fewer plain bytes")
    escaped, rest = divmod(room, len(orjson.dumps(ESCAPED)) - 2)
    env[1]["value"] = ESCAPED * escaped
    env[0]["value"] += "x" * rest
    return sized


def stored_estimate(pod: Obj) -> int:
    """About how many bytes the object is in etcd: its JSON with each escape counted as the
    one byte it stands for (protobuf's field framing is smaller than JSON's)."""
    text = orjson.dumps(pod)
    return len(text) - 5 * text.count(b"\\u00")
