"""Which providers exist and which run: entry points in ``berthmaster.machine_providers``.

Every installed distribution may register provider classes in the entry-point group
:data:`GROUP`, each entry named by the providerSpec ``kind`` it implements::

    [project.entry-points."berthmaster.machine_providers"]
    KwokMachineProviderSpec = "berthmaster.operator.machines.providers.kwok:KwokProvider"

Loading a class imports its module only: a provider keeps its heavy dependencies (boto3 for
AWS) to the moment it is constructed, so listing the providers never needs them.

Which run: ``$BERTHMASTER_MACHINE_PROVIDERS`` (the chart's ``operator.machineProviders``) names
them, comma-separated, by short ``name`` or by kind; unset, the providers whose class says
``enabled_by_default`` (kwok; never a cloud provider: on a cluster where OpenShift's own
machine controllers run, their Machines must stay theirs). "" runs none.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Protocol, cast

from berthmaster.foundation.kube import KubeClient
from berthmaster.operator.machines.providers import Provider

GROUP = "berthmaster.machine_providers"
PROVIDERS_VARIABLE = "BERTHMASTER_MACHINE_PROVIDERS"


class ProviderClass(Protocol):
    """What a registered entry point names: a provider class (see the package docstring)."""

    kind: str
    name: str
    enabled_by_default: bool

    def __call__(self, kube: KubeClient) -> Provider: ...

    def template_capacity(self, provider_spec: Mapping[str, Any]) -> dict[str, str] | None: ...


def load(points: Iterable[EntryPoint] | None = None) -> dict[str, ProviderClass]:
    """The installed provider classes by providerSpec kind; a broken entry point is an error
    naming its distribution and what to do."""
    found: dict[str, ProviderClass] = {}
    for point in entry_points(group=GROUP) if points is None else points:
        try:
            cls = cast(ProviderClass, point.load())
        except ModuleNotFoundError as error:
            dist = point.dist.name if point.dist is not None else None
            if not left_out_of_this_build(dist, point.module, error.name):
                raise _broken(point, error) from error
            continue
        except Exception as error:
            raise _broken(point, error) from error
        if getattr(cls, "kind", None) != point.name:
            raise RuntimeError(f"machine provider {point.value} is registered as {point.name} "
                               f"in entry-point group {GROUP} but implements kind "
                               f"{getattr(cls, 'kind', None)!r}; register it by its kind")
        found[point.name] = cls
    return found


def left_out_of_this_build(dist: str | None, module: str, missing: str | None) -> bool:
    """Whether an entry point of distribution ``dist`` to ``module`` failed only because its
    own module (``missing``, or a package above it) is left out of this build of berthmaster:
    the image ships no ``berthmaster.tooling`` (.dockerignore), so the kubelet provider, which
    runs kubelets on the local control plane's host, is not there to load."""
    missing = missing or ""
    return (dist == "berthmaster" and module.startswith("berthmaster.tooling.")
            and (module == missing or module.startswith(f"{missing}.")))


def _broken(point: EntryPoint, error: Exception) -> RuntimeError:
    dist = point.dist.name if point.dist is not None else "an installed package"
    return RuntimeError(f"machine provider {point.name} ({point.value}, registered by "
                        f"{dist} in entry-point group {GROUP}) does not load: {error}; "
                        "reinstall or uninstall that package")


@functools.cache
def installed() -> dict[str, ProviderClass]:
    """:func:`load` once per process (the installed packages do not change under it)."""
    return load()


def selected(classes: Mapping[str, ProviderClass], setting: str | None) -> list[ProviderClass]:
    """The classes ``setting`` (the variable's value; None when unset) selects."""
    if setting is None:
        return [cls for cls in classes.values() if cls.enabled_by_default]
    by_name = {**{cls.name: cls for cls in classes.values()}, **classes}
    names = [n.strip() for n in setting.split(",") if n.strip()]
    unknown = [n for n in names if n not in by_name]
    if unknown:
        known = ", ".join(sorted(cls.name for cls in classes.values()))
        raise ValueError(f"${PROVIDERS_VARIABLE}: unknown machine provider(s) "
                         f"{', '.join(unknown)}; use a comma-separated list of: {known} "
                         f"(Helm value operator.machineProviders); a provider from another "
                         f"package must be installed in the operator's image")
    chosen = {by_name[n].kind: by_name[n] for n in names}
    return list(chosen.values())


def enabled_providers(kube: KubeClient, setting: str | None,
                      classes: Mapping[str, ProviderClass] | None = None) -> dict[str, Provider]:
    """The running providers by providerSpec kind."""
    return {cls.kind: cls(kube) for cls in selected(installed() if classes is None else classes,
                                                   setting)}


def enabled_kinds(setting: str | None) -> frozenset[str]:
    """The providerSpec kinds of the providers ``setting`` runs (for the Machines'
    neighbours, such as the MachineHealthCheck controller, that build no provider)."""
    return frozenset(cls.kind for cls in selected(installed(), setting))


def template_capacity(provider_spec: Mapping[str, Any],
                      classes: Mapping[str, ProviderClass] | None = None) -> dict[str, str] | None:
    """What one instance of ``provider_spec`` offers (cpu, memory, GPUs), from its provider;
    None when no installed provider knows (the autoscaler then needs annotations)."""
    kind = provider_spec.get("kind")
    cls = (installed() if classes is None else classes).get(str(kind))
    return None if cls is None else cls.template_capacity(provider_spec)
