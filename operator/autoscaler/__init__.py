"""Cluster autoscaling: ClusterAutoscaler + MachineAutoscaler resources grow MachineSets for
unschedulable pods and shrink unneeded nodes, within limits.

Pure decision modules hold every rule: ``config`` (the resource, defaults), ``template`` (a
MachineSet's template node), ``groups`` (MachineSets as node groups), ``limits`` (cluster
totals and headroom), ``simulation`` (what-if placement over the scheduler's engine),
``scaleup`` + ``expanders`` (which MachineSet grows), ``drainability`` + ``scaledown`` (which
nodes go). ``loop`` runs one 10 s iteration against the API server (``events``, ``metrics``)
and ``handlers`` registers it, and the MachineAutoscaler handlers, with kopf.
"""
