"""Machines and MachineSets (``machine.openshift.io/v1beta1``): lifecycle hooks, drain, providers.

Layout: pure decision modules (:mod:`.hooks`, :mod:`.conditions`, :mod:`.lifecycle`,
:mod:`.drain`, :mod:`.machineset`, :mod:`.nodes`, :mod:`.events`, ``providers.kwok`` builders)
hold every rule and message and are unit-tested without a cluster; :mod:`.controller` applies
their answers through :class:`berthmaster.foundation.kube.KubeClient`; :mod:`.workqueue` runs
reconciles;
:mod:`.handlers` wires kopf's watches to the queues.
"""
