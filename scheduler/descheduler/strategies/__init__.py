"""The strategies (upstream's plugins), one module each, and the registry naming them.

Every module has the same shape, as upstream's plugins do: ``NAME``; ``EXTENSION_POINT``
(``deschedule``: judge pods one by one, or ``balance``: move pods between nodes); ``ARGS`` (the
v1alpha2 argument names); a frozen ``Params`` dataclass with the defaults; ``from_v1alpha1``
(the v1alpha1 ``params`` mapped onto the v1alpha2 args); ``parse`` (args to ``Params``,
recording every problem); and ``decide(params, ctx)``, the pure decision: a generator of
:class:`~berthmaster.scheduler.descheduler.context.Candidate` pods told back whether each went.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any, Protocol, cast

from berthmaster.foundation.problems import Problems
from berthmaster.scheduler.descheduler.context import CandidateStream, StrategyContext
from berthmaster.scheduler.descheduler.strategies import (
    duplicates,
    failed_pods,
    high_node_utilization,
    inter_pod_anti_affinity,
    low_node_utilization,
    node_affinity,
    node_taints,
    pod_lifetime,
    too_many_restarts,
    topology_spread,
)


class Strategy(Protocol):
    NAME: str
    EXTENSION_POINT: str
    ARGS: tuple[str, ...]

    def from_v1alpha1(
        self, params: Mapping[str, Any], where: str, problems: Problems
    ) -> dict[str, Any]: ...

    def parse(self, args: Mapping[str, Any], where: str, problems: Problems) -> Any: ...

    def decide(self, params: Any, ctx: StrategyContext) -> CandidateStream: ...


_MODULES: tuple[ModuleType, ...] = (
    failed_pods, node_taints, node_affinity, inter_pod_anti_affinity, pod_lifetime,
    too_many_restarts, duplicates, low_node_utilization, high_node_utilization, topology_spread,
)
REGISTRY: dict[str, Strategy] = {m.NAME: cast(Strategy, m) for m in _MODULES}
