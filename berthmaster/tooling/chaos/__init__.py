"""The fault campaign (``bench/chaos.py``): every component under churn and injected failures.

``invariants`` holds what must never happen, as pure functions over API objects (unit-tested in
tests/unit/chaos); ``checker`` watches the cluster and applies them; ``faults`` and ``workload``
act on the cluster; ``campaign`` starts everything, runs the schedule and prints the figures.
"""
