"""How a watch stream is cut into lines (berthmaster.foundation.kube.LineSplitter, no API server).

A watch line is one whole object; the API server takes requests of up to 3 MiB, so lines of
several MiB must pass however the stream is chunked, as kopf's ``_iter_lines`` lets them
(kopf/_cogs/clients/api.py), up to client-go's 16 MiB frame bound
(apimachinery pkg/runtime/serializer/streaming/streaming.go).
"""

from __future__ import annotations

import pytest

from berthmaster.foundation.kube import MAX_LINE_BYTES, LineSplitter, WatchLineTooLong, split_lines
from berthmaster.tooling.chaos.bigpod import ETCD_CLIENT_SEND_BYTES

MiB = 1024 * 1024
BIG = b"x" * (5 * MiB)


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


CASES: list[tuple[str, list[bytes], list[bytes]]] = [
    ("one chunk, two lines", [b'{"a":1}\n{"b":2}\n'], [b'{"a":1}', b'{"b":2}']),
    ("a line split across chunks", [b'{"a"', b':1}\n{"b":', b"2}\n"], [b'{"a":1}', b'{"b":2}']),
    ("a newline alone in its chunk", [b'{"a":1}', b"\n", b'{"b":2}', b"\n"],
     [b'{"a":1}', b'{"b":2}']),
    ("one byte at a time", [bytes([c]) for c in b'{"a":1}\n{"b":2}\n'],
     [b'{"a":1}', b'{"b":2}']),
    ("empty lines are dropped", [b"\n\n{\"a\":1}\n\n", b"\r\n \n"], [b'{"a":1}']),
    ("a final line without a newline", [b'{"a":1}\n{"b"', b":2}"], [b'{"a":1}', b'{"b":2}']),
    ("no data at all", [], []),
    ("empty chunks", [b"", b'{"a":1}\n', b""], [b'{"a":1}']),
    ("a 5 MiB line in 64 KiB chunks", chunked(b"[" + BIG + b"]\n{}\n", 64 * 1024),
     [b"[" + BIG + b"]", b"{}"]),
    ("a 5 MiB line in one chunk, between small ones", [b"{}\n[" + BIG + b"]\n{}\n"],
     [b"{}", b"[" + BIG + b"]", b"{}"]),
    ("a 5 MiB final line without a newline", chunked(b"{}\n[" + BIG + b"]", MiB),
     [b"{}", b"[" + BIG + b"]"]),
]


@pytest.mark.parametrize(("chunks", "lines"), [(c, ls) for _, c, ls in CASES],
                         ids=[name for name, _, _ in CASES])
def test_split_lines(chunks: list[bytes], lines: list[bytes]) -> None:
    assert list(split_lines(chunks)) == lines


def test_lines_come_as_soon_as_they_end() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert splitter.feed(b":2") == []
    assert splitter.feed(b"}\n") == [b'{"b":2}']
    assert splitter.end() is None


@pytest.mark.parametrize("chunks", [
    [b"x" * 11 + b"\n"],  # whole in one chunk
    [b"x" * 6, b"x" * 5 + b"\n"],  # complete, over the bound, once its end arrives
    [b"x" * 6, b"x" * 6],  # the partial line alone passes the bound
], ids=["one chunk", "ends over the bound", "partial over the bound"])
def test_a_line_over_the_bound_is_refused(chunks: list[bytes]) -> None:
    with pytest.raises(WatchLineTooLong):
        list(split_lines(chunks, max_line=10))


def test_the_bound_is_client_gos_and_a_value_error() -> None:
    assert MAX_LINE_BYTES == 16 << 20
    assert issubclass(WatchLineTooLong, ValueError)  # informers relist on a ValueError
    assert list(split_lines([b"x" * 10 + b"\n"], max_line=10)) == [b"x" * 10]


def test_the_bound_leaves_room_for_the_longest_line_a_stored_object_makes() -> None:
    """The API server stores at most what its etcd client sends in one message, 2 MiB (etcd
    client/v3 options.go ``defaultMaxCallSendMsgSize``), and writes the object back as JSON
    (apimachinery pkg/runtime/serializer/json/json.go, encoding/json), where one stored byte
    becomes at most six (a control character as ``\\u0001``; ``<``, ``>`` and ``&`` as
    ``\\u003c``...): a 12 MiB line and its event envelope, under the bound, read whole."""
    worst = 6 * ETCD_CLIENT_SEND_BYTES + 64 * 1024
    assert worst < MAX_LINE_BYTES
    line = b'{"type":"ADDED","object":{"v":"' + b"\\u0001" * (worst // 6) + b'"}}'
    assert list(split_lines(chunked(line + b"\n{}\n", MiB))) == [line, b"{}"]
