"""The object key: client-go's MetaNamespaceKeyFunc
(staging/src/k8s.io/client-go/tools/cache/store.go)."""

from __future__ import annotations

import pytest

from berthmaster.foundation.keys import key_of, object_key


@pytest.mark.parametrize(("namespace", "name", "expected"), [
    ("ns", "p", "ns/p"),
    ("", "node-1", "node-1"),
    (None, "node-1", "node-1"),
])
def test_object_key(namespace: str | None, name: str, expected: str) -> None:
    assert object_key(namespace, name) == expected


def test_key_of_reads_metadata_and_defaults_the_namespace() -> None:
    assert key_of({"metadata": {"namespace": "ns", "name": "p"}}) == "ns/p"
    assert key_of({"metadata": {"name": "n"}}) == "n"
    assert key_of({"metadata": {"name": "c"}}, default_namespace="default") == "default/c"
    assert key_of({}) == ""

