"""AdmissionReview (admission.k8s.io/v1) in and out, and upstream's refusal wording.

A webhook answers with ``allowed: false`` and a Status whose message the API server shows the
user after ``admission webhook "<name>" denied the request:``. The message is written as the
built-in plugins write theirs (k8s.io/apimachinery/pkg/api/errors ``NewForbidden`` and
k8s.io/apiserver/pkg/admission ``NewForbidden``): ``pods "web-1" is forbidden: <reason>``, with
``deployments.apps`` for a grouped resource, so the words after the prefix are upstream's.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

API_VERSION = "admission.k8s.io/v1"


class ReviewError(ValueError):
    """The body is not an AdmissionReview request this webhook can read."""


@dataclass(frozen=True)
class UserInfo:
    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Request:
    uid: str
    group: str
    resource: str
    subresource: str
    operation: str
    namespace: str
    name: str
    object: Mapping[str, Any] = field(default_factory=dict)
    user: UserInfo = field(default_factory=UserInfo)

    @property
    def is_pod(self) -> bool:
        return (self.group, self.resource, self.subresource) == ("", "pods", "")


def read_request(body: Any) -> Request:
    """The request of an AdmissionReview body; :class:`ReviewError` when it is none."""
    if not isinstance(body, Mapping) or not isinstance(body.get("request"), Mapping):
        raise ReviewError("expected an admission.k8s.io/v1 AdmissionReview with a request")
    request = body["request"]
    resource = request.get("resource") or {}
    user = request.get("userInfo") or {}
    obj = request.get("object")
    return Request(
        uid=str(request.get("uid") or ""),
        group=str(resource.get("group") or ""),
        resource=str(resource.get("resource") or ""),
        subresource=str(request.get("subResource") or ""),
        operation=str(request.get("operation") or ""),
        namespace=str(request.get("namespace") or ""),
        name=str(request.get("name") or ""),
        object=obj if isinstance(obj, Mapping) else {},
        user=UserInfo(
            username=str(user.get("username") or ""), uid=str(user.get("uid") or ""),
            groups=tuple(user.get("groups") or ()),
            extra=tuple(sorted((k, tuple(v or ())) for k, v in (user.get("extra") or {}).items())),
        ),
    )


def qualified_resource(group: str, resource: str) -> str:
    return f"{resource}.{group}" if group else resource


def forbidden_message(group: str, resource: str, name: str, reason: str) -> str:
    """``<resource>[.<group>] "<name>" is forbidden: <reason>`` (no name: no quotes)."""
    if name:
        return f'{qualified_resource(group, resource)} "{name}" is forbidden: {reason}'
    return f"{qualified_resource(group, resource)} is forbidden: {reason}"


def object_name(request: Request) -> str:
    """The name admission.NewForbidden shows: the object's name, its generateName, else
    ``Unknown``."""
    metadata = request.object.get("metadata") or {}
    return str(metadata.get("name") or metadata.get("generateName") or request.name
               or "Unknown")


def allow(uid: str, patch: Sequence[Mapping[str, Any]] = (),
          warnings: Sequence[str] = ()) -> dict[str, Any]:
    """An admitting answer; ``warnings`` reach the user as kubectl's ``Warning:`` lines."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if warnings:
        response["warnings"] = list(warnings)
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(list(patch))).decode()
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def deny(uid: str, message: str, code: int = 403) -> dict[str, Any]:
    reason = {400: "BadRequest", 403: "Forbidden", 404: "NotFound",
              413: "RequestEntityTooLarge", 422: "Invalid"}.get(code, "InternalError")
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": False,
                         "status": {"status": "Failure", "code": code, "reason": reason,
                                    "message": message}}}
