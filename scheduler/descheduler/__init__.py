"""The descheduler: DeschedulerPolicy files (v1alpha1 strategies, v1alpha2 profiles), strategies
that pick pods to move, and the evictor that moves them safely through the Eviction API."""
