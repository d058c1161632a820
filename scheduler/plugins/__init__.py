"""Predicates and priorities, one module per rule, and the registry that names them.

Each module declares ``NAME`` (the Policy file's name), its aliases (kube-scheduler's plugin
names), ``REASON`` strings exactly as kube-scheduler prints them, small pure helpers, and a
``Predicate``/``Priority`` class whose ``prefilter``/``scores`` do the pod-only work once per
decision and return a tiny per-node check.
"""
