"""Startup checks that a component may do its work: its APIs are served, its verbs allowed.

Design: a component states what it needs as data — :class:`Needs` holds the custom resources
that must be served and the :class:`Access` (verb on a resource) it must be allowed — and
:func:`check` asks the API server once, before anything starts: discovery
(``GET /apis/GROUP/VERSION``) for each custom resource, and a ``SelfSubjectAccessReview`` per
access (every authenticated user may create one: the ``system:basic-user`` role). What is
missing becomes one :class:`~berthmaster.foundation.errors.ConfigurationError` line naming the
missing
pieces, who lacks them (``SelfSubjectReview``) and what to do; the command exits 2. An API
server that fails to answer these requests is a
:class:`~berthmaster.foundation.errors.ConnectivityError`
(exit 3). The wording of the fixes is the caller's (``crd_fix`` / ``rbac_fix``), so each
component points at its own manifests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from berthmaster.foundation.errors import ConfigurationError, ConnectivityError
from berthmaster.foundation.kube import KubeClient, KubeError, group_path

AUTHORIZATION = group_path("authorization.k8s.io", "v1")
AUTHENTICATION = group_path("authentication.k8s.io", "v1")


@dataclass(frozen=True)
class Resource:
    """A custom resource that must be served: ``plural.group`` at ``version``."""

    group: str
    version: str
    plural: str

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}/{self.version}"


@dataclass(frozen=True)
class Access:
    """A verb on a resource (``pods/binding``: resource ``pods``, subresource ``binding``)."""

    verb: str
    resource: str
    group: str = ""
    namespace: str | None = None  # None: in every namespace (cluster-wide)
    name: str = ""  # one object (RBAC's resourceNames), or any

    def __str__(self) -> str:
        kind = f"{self.resource}.{self.group}" if self.group else self.resource
        kind += f" {self.name}" if self.name else ""
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"{self.verb} {kind}{where}"

    def review(self) -> dict[str, object]:
        resource, _, sub = self.resource.partition("/")
        attributes: dict[str, object] = {"verb": self.verb, "group": self.group,
                                         "resource": resource}
        if sub:
            attributes["subresource"] = sub
        if self.namespace:
            attributes["namespace"] = self.namespace
        if self.name:
            attributes["name"] = self.name
        return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attributes}}


@dataclass(frozen=True)
class Needs:
    """What one part of a component (a capability) needs; ``name`` says which part."""

    name: str
    resources: tuple[Resource, ...] = ()
    access: tuple[Access, ...] = field(default=())


@dataclass(frozen=True)
class Missing:
    resources: tuple[tuple[str, Resource], ...] = ()  # (needed by, resource)
    access: tuple[tuple[str, Access], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.resources or self.access)


def crd_line(missing: Sequence[tuple[str, Resource]], fix: str) -> str:
    """One line naming the custom resources not served, what needs them, and the fix."""
    listed = ", ".join(f"{resource} ({needed_by})" for needed_by, resource in missing)
    noun = "resource is" if len(missing) == 1 else "resources are"
    return f"the API server does not serve what is needed: the custom {noun} missing: " \
           f"{listed}; {fix}"


def rbac_line(user: str, missing: Sequence[tuple[str, Access]], fix: str) -> str:
    listed = ", ".join(f"{access} ({needed_by})" for needed_by, access in missing)
    return f"{user} may not {listed}; {fix}"


async def _ask(kube: KubeClient, what: str, method: str, path: str,
               body: dict[str, object] | None = None) -> dict[str, Any] | None:
    """One request; None when the API server answered 404, ConnectivityError when it could
    not answer."""
    try:
        return await kube.request(method, path, body=body, timeout=30.0)
    except KubeError as error:
        if error.not_found:
            return None
        if error.status == 0 or error.status >= 500 or error.status == 429:
            raise ConnectivityError(
                f"the API server at {kube.host} did not answer {what} ({error}); check that "
                "it is running and healthy") from error
        raise ConfigurationError(
            f"the API server at {kube.host} refused {what} ({error}); check the "
            "credentials and their RBAC") from error


async def served(kube: KubeClient, resources: Iterable[Resource]) -> list[Resource]:
    """The resources the API server does not serve (one discovery request per group
    version)."""
    plurals: dict[tuple[str, str], set[str] | None] = {}
    absent = []
    for resource in resources:
        key = (resource.group, resource.version)
        if key not in plurals:
            found = await _ask(kube, f"discovery of {resource.group}/{resource.version}", "GET",
                               group_path(resource.group, resource.version))
            listed = (found or {}).get("resources") or []
            plurals[key] = None if found is None else {
                str(r.get("name")) for r in listed if isinstance(r, dict)}
        names = plurals[key]
        if names is None or resource.plural not in names:
            absent.append(resource)
    return absent


async def denied(kube: KubeClient, accesses: Iterable[Access]) -> list[Access]:
    """The accesses a SelfSubjectAccessReview says this client is not allowed."""
    refused = []
    for access in accesses:
        answer = await _ask(kube, "a SelfSubjectAccessReview", "POST",
                            f"{AUTHORIZATION}/selfsubjectaccessreviews", access.review())
        status = (answer or {}).get("status") or {}
        if not (isinstance(status, dict) and status.get("allowed")):
            refused.append(access)
    return refused


async def whoami(kube: KubeClient) -> str:
    """The user the API server sees (``kubectl auth whoami``), or a neutral phrase."""
    try:
        answer = await kube.request("POST", f"{AUTHENTICATION}/selfsubjectreviews", body={
            "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, timeout=30.0)
    except KubeError:
        return "these credentials"
    user = ((answer.get("status") or {}).get("userInfo") or {}).get("username")
    return f"the user {user}" if user else "these credentials"


async def find_missing(kube: KubeClient, needs: Sequence[Needs]) -> Missing:
    """Everything the parts need that is not served or not allowed (pure reading)."""
    resources = [(n.name, r) for n in needs for r in n.resources]
    absent = set(await served(kube, {r for _, r in resources}))
    accesses = [(n.name, a) for n in needs for a in n.access]
    refused = set(await denied(kube, {a for _, a in accesses}))
    return Missing(
        resources=tuple(dict.fromkeys((name, r) for name, r in resources if r in absent)),
        access=tuple(dict.fromkeys((name, a) for name, a in accesses if a in refused)))


async def check(kube: KubeClient, needs: Sequence[Needs], crd_fix: str, rbac_fix: str) -> None:
    """Raise one ConfigurationError line when a custom resource is missing or a verb is
    refused (custom resources first: RBAC on an absent resource says little)."""
    missing = await find_missing(kube, needs)
    if missing.resources:
        raise ConfigurationError(crd_line(missing.resources, crd_fix))
    if missing.access:
        raise ConfigurationError(rbac_line(await whoami(kube), missing.access, rbac_fix))
