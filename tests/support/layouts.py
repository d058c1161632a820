"""Hypothesis strategies for the cluster layouts several property tests draw."""

from __future__ import annotations

from hypothesis import strategies as st


def zoned_nodes(zones: int, most: int) -> st.SearchStrategy[tuple[list[int], list[bool]]]:
    """(each node's zone index below ``zones``, whether each node is tainted): 2..``most``
    nodes."""
    return st.lists(st.integers(0, zones - 1), min_size=2, max_size=most).flatmap(
        lambda placed: st.tuples(st.just(placed),
                                 st.lists(st.booleans(), min_size=len(placed),
                                          max_size=len(placed))))
