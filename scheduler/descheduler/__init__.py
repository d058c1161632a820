"""The descheduler program (``berthmaster deschedule``): DeschedulerPolicy files (v1alpha1
strategies, v1alpha2 profiles), strategies that pick pods to move, and the evictor that moves
them safely through the Eviction API. One pass per run, in the Job or CronJob that
:mod:`berthmaster.operator.deschedulers` (plural: the operator's capability that manages
``Descheduler`` resources) creates; it imports nothing from the operator."""
