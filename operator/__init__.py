"""berthmaster's operator (kopf): Machine lifecycle hooks, Descheduler runs, cluster autoscaling.

Each capability is a subpackage whose ``handlers`` module registers kopf handlers when
imported; the handlers stay thin and call pure ``decide_*``/``build_*`` functions that live
beside them. ``berthmaster operator`` (``command.py``) imports the capabilities and runs kopf.
"""
