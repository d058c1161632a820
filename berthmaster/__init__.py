"""berthmaster: OpenShift's scheduling and machine-lifecycle features for any Kubernetes cluster.

The distribution holds three packages: ``berthmaster`` (this one: the CLI, the Kubernetes API
access layer and the local control plane used for demos and tests), ``berthmaster.scheduler``
(placement: the engine, the running scheduler, the descheduler) and ``berthmaster.operator``
(the kopf operator: Machines, Deschedulers, autoscaling). Dependencies point operator ->
scheduler -> berthmaster, never back.
"""

from importlib import metadata

try:
    __version__ = metadata.version("berthmaster")
except metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
