"""kubernetes_asyncio without its generated API and model modules until something asks for one.

berthmaster takes two things from kubernetes_asyncio (see ``kube``): ``config`` (kubeconfig and
in-cluster loading, exec and OIDC credential plugins, token refresh) and
``client.Configuration``/``client.ApiClient`` (the TLS context and the connection pool).
Requests go out as raw JSON. But the package ``__init__`` files of ``kubernetes_asyncio``,
``kubernetes_asyncio.client`` and ``kubernetes_asyncio.client.models`` import every generated
API class and model, some 900 modules. In every scheduler and descheduler process that costs
about 0.6 s of start-up and 40 MiB of resident memory, none of it used. The cost is known
upstream (tomplus/kubernetes_asyncio#293: the generator imports every model from the package
``__init__``).

:func:`load` registers those three packages before anything imports them. Each is a module with
its real ``__path__`` whose ``__init__`` has not run yet, so its submodules import as usual. The
names berthmaster and the config loader use are bound from their own submodules. Each package
also gets a module ``__getattr__`` (PEP 562) that runs the real ``__init__`` the first time any
other name is asked for. So every other user gets the whole package as before, and pays then
what was skipped at start: kopf asks for ``client.V1ObjectMeta``, a test or a REPL for
``client.CoreV1Api``. When kubernetes_asyncio is already imported, :func:`load` changes nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

PACKAGE = "kubernetes_asyncio"


def _deferred(name: str) -> ModuleType:
    """Package ``name`` registered with its ``__init__`` not run; the first name it does not
    have yet runs it (then that name comes from the full package)."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name} is not an importable package")
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader
    state = {"loaded": False}

    def __getattr__(attr: str) -> Any:
        if not state["loaded"]:
            state["loaded"] = True
            loader.exec_module(module)
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[name] = module
    return module


def load() -> None:
    """Make ``kubernetes_asyncio.client`` (Configuration, ApiClient) and
    ``kubernetes_asyncio.config`` importable without the generated modules (see above)."""
    if PACKAGE in sys.modules:
        return
    try:
        top = _deferred(PACKAGE)
        client = _deferred(f"{PACKAGE}.client")
        setattr(top, "client", client)  # noqa: B010 (a module's attribute, bound by hand)
        setattr(client, "models", _deferred(f"{PACKAGE}.client.models"))  # noqa: B010
        # the client's own submodules, each bound on the package as it is imported; rest before
        # api_client, which takes it with ``from kubernetes_asyncio.client import rest``
        loaded = {sub: importlib.import_module(f"{PACKAGE}.client.{sub}")
                  for sub in ("exceptions", "configuration", "rest", "api_client")}
        setattr(client, "Configuration", loaded["configuration"].Configuration)  # noqa: B010
        setattr(client, "ApiClient", loaded["api_client"].ApiClient)  # noqa: B010
        importlib.import_module(f"{PACKAGE}.config")
    except Exception:
        # whatever went wrong (another kubernetes_asyncio layout), leave the ordinary import
        # to do it, and to report what fails
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
            del sys.modules[name]
