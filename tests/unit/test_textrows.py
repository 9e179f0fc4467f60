"""The text-protocol row walk: the compiled parser against the Python one, on crafted packets.

Both must give the same columns and stop with the same status at the same packet, wherever
the socket's reads happen to cut the stream. The server-side counterpart (real result sets,
every length prefix, compared with pymysql's cursor) is
``tests/integration/test_snapshot_arrow.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pymysql
import pytest

from cdc_console.mysql import rawrows
from cdc_console.mysql.rawrows import (
    BAD_SEQUENCE,
    END,
    MALFORMED,
    MAX_PACKET_LEN,
    NEED_MORE,
    SPECIAL,
    NativeRowColumns,
    PyRowColumns,
    RawValue,
    RowColumns,
)

Factory = Callable[[int], RowColumns]
IMPLEMENTATIONS = [
    pytest.param(NativeRowColumns, id="compiled"),
    pytest.param(PyRowColumns, id="python"),
]


def packet(seq: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq % 256]) + payload


def lenenc(value: RawValue) -> bytes:
    if value is None:
        return b"\xfb"
    n = len(value)
    if n < 251:
        return bytes([n]) + value
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little") + value
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little") + value
    return b"\xfe" + n.to_bytes(8, "little") + value


def row_payload(row: list[RawValue]) -> bytes:
    return b"".join(lenenc(v) for v in row)


EOF_PAYLOAD = b"\xfe\x00\x00\x02\x00"


def result_stream(rows: list[list[RawValue]], first_seq: int = 3) -> bytes:
    packets = [packet(first_seq + i, row_payload(row)) for i, row in enumerate(rows)]
    return b"".join(packets) + packet(first_seq + len(rows), EOF_PAYLOAD)


def random_rows(rng: random.Random, count: int, columns: int) -> list[list[RawValue]]:
    sizes = [0, 1, 7, 250, 251, 252, 300, 65_535, 65_536, 70_000]
    rows = []
    for _ in range(count):
        row: list[RawValue] = []
        for _ in range(columns):
            pick = rng.random()
            if pick < 0.15:
                row.append(None)
            elif pick < 0.25:
                row.append(rng.randbytes(rng.choice(sizes)))
            else:
                row.append(str(rng.randrange(10**12)).encode())
        rows.append(row)
    return rows


def walk(factory: Factory, stream: bytes, cuts: list[int], columns: int) -> tuple[Any, ...]:
    """Feed ``stream`` as the socket would deliver it, cut at ``cuts``; return what was read."""
    target = factory(columns)
    buf, pos, seq = b"", 0, 3
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    for piece in pieces:
        buf, pos = buf[pos:] + piece, 0
        pos, seq, status = target.feed(buf, pos, seq)
        if status != NEED_MORE:
            break
    return status, seq, len(buf) - pos, [a.to_pylist() for a in target.arrays()]


def test_the_compiled_parser_was_built() -> None:
    """The install compiles ``_textrows.c`` (``.ci/setup`` makes sure a C compiler is there);
    a silent fall back to the Python walk would triple the snapshot readers' CPU."""
    assert rawrows._textrows is not None, (
        "cdc_console/mysql/_textrows.c was not compiled: install gcc and the Python headers "
        "(python3-dev), then `pip install -e .` again"
    )
    assert rawrows.compiled()
    statuses = ("NEED_MORE", "END", "SPECIAL", "BAD_SEQUENCE", "MALFORMED")
    assert [getattr(rawrows._textrows, s) for s in statuses] == [
        getattr(rawrows, s) for s in statuses
    ]


def test_the_python_walk_can_be_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CDC_CONSOLE_PURE_PYTHON_ROWS", "1")
    assert isinstance(rawrows.row_columns(2), PyRowColumns)
    monkeypatch.delenv("CDC_CONSOLE_PURE_PYTHON_ROWS")
    assert isinstance(rawrows.row_columns(2), NativeRowColumns)


@pytest.mark.parametrize("seed", range(6))
def test_both_walks_read_the_same_columns_wherever_the_reads_cut(seed: int) -> None:
    rng = random.Random(seed)
    columns = rng.randrange(1, 6)
    rows = random_rows(rng, rng.choice([300, 3_000]), columns)
    stream = result_stream(rows)
    cuts = sorted(rng.sample(range(1, len(stream)), 40))
    expected = [[row[c] for row in rows] for c in range(columns)]
    seq_after = (3 + len(rows) + 1) % 256
    for factory in (NativeRowColumns, PyRowColumns):
        assert walk(factory, stream, cuts, columns) == (END, seq_after, 0, expected)


@pytest.mark.parametrize("factory", IMPLEMENTATIONS)
@pytest.mark.parametrize("null_rows", [[0], [3, 700], [511, 512], [4095]], ids=str)
def test_only_the_rows_the_server_sent_as_null_are_null(
    factory: Factory, null_rows: list[int]
) -> None:
    """Thousands of rows with a few NULLs: every other row is valid, however far from the last
    NULL (the compiled walk's bitmap grows with the NULLs, so this is where it could go wrong)."""
    rows: list[list[RawValue]] = [
        [str(i).encode(), None if i in null_rows else b"v"] for i in range(5_000)
    ]
    target = factory(2)
    stream = result_stream(rows)
    assert target.feed(stream, 0, 3)[2] == END
    ids, values = target.arrays()
    assert values.null_count == len(null_rows) and ids.null_count == 0
    assert [i for i, v in enumerate(values.to_pylist()) if v is None] == null_rows
    values.validate(full=True)


@pytest.mark.parametrize("factory", IMPLEMENTATIONS)
def test_arrays_are_large_binary_with_nulls_where_the_server_sent_null(factory: Factory) -> None:
    target = factory(2)
    stream = result_stream([[b"a", None], [None, b""], [b"", b"\x00\xff"]])
    assert target.feed(stream, 0, 3) == (len(stream), 7, END)
    arrays = target.arrays()
    assert [str(a.type) for a in arrays] == ["large_binary", "large_binary"]
    assert [a.null_count for a in arrays] == [1, 1]
    assert [a.to_pylist() for a in arrays] == [[b"a", None, b""], [None, b"", b"\x00\xff"]]
    for array in arrays:
        array.validate(full=True)


@pytest.mark.parametrize("factory", IMPLEMENTATIONS)
def test_an_empty_result_gives_empty_arrays(factory: Factory) -> None:
    target = factory(3)
    assert target.feed(packet(3, EOF_PAYLOAD), 0, 3) == (9, 4, END)
    assert [len(a) for a in target.arrays()] == [0, 0, 0]


@pytest.mark.parametrize("factory", IMPLEMENTATIONS)
def test_a_wrong_sequence_number_stops_at_its_packet(factory: Factory) -> None:
    good = packet(3, row_payload([b"1"]))
    stream = good + packet(9, row_payload([b"2"]))
    assert factory(1).feed(stream, 0, 3) == (len(good), 4, BAD_SEQUENCE)


@pytest.mark.parametrize("factory", IMPLEMENTATIONS)
@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"\x05ab", id="value-past-the-packet"),
        pytest.param(b"\x01a\x01b\x00", id="bytes-left-over"),
        pytest.param(b"\x01a", id="too-few-values"),
        pytest.param(b"\xfc\x01", id="cut-length-prefix"),
        pytest.param(b"\xfd\x01\x00", id="cut-3-byte-prefix"),
        pytest.param(b"\xfe" + (1).to_bytes(8, "little") + b"a" + b"\x01b", id="8-byte-prefix"),
        pytest.param(b"\x01a\xff", id="0xff-prefix"),
        pytest.param(b"", id="empty-packet"),
    ],
)
def test_a_malformed_row_stops_at_its_packet(factory: Factory, payload: bytes) -> None:
    good = packet(3, row_payload([b"1", b"2"]))
    stream = good + packet(4, payload) + packet(5, EOF_PAYLOAD)
    if payload.startswith(b"\xfe") and len(payload) >= 9:
        # a row whose first value has an 8-byte length is a row, not EOF: here a valid one
        assert factory(2).feed(stream, 0, 3)[2] == END
        return
    assert factory(2).feed(stream, 0, 3) == (len(good), 4, MALFORMED)


@pytest.mark.parametrize("factory", IMPLEMENTATIONS)
def test_an_error_packet_and_a_long_row_are_left_to_the_caller(factory: Factory) -> None:
    error = packet(3, b"\xff\x15\x04#HY000boom")
    assert factory(1).feed(error, 0, 3) == (0, 3, SPECIAL)
    long_head = MAX_PACKET_LEN.to_bytes(3, "little") + bytes([3])
    assert factory(1).feed(long_head, 0, 3) == (0, 3, SPECIAL)


@pytest.mark.parametrize("factory", IMPLEMENTATIONS)
def test_add_row_takes_a_joined_payload_and_refuses_a_short_one(factory: Factory) -> None:
    target = factory(2)
    target.add_row(row_payload([b"x" * 300, None]))
    with pytest.raises(ValueError, match="do not fill"):
        target.add_row(b"\x01a")
    if factory is NativeRowColumns:  # the compiled walk appends a row only once it is whole
        assert [a.to_pylist() for a in target.arrays()] == [[b"x" * 300], [None]]


class FakeSocketFile:
    """What ``_read_rows`` reads from: the connection's socket file, in short reads."""

    def __init__(self, stream: bytes, step: int) -> None:
        self.stream, self.step, self.at = stream, step, 0

    def read1(self, size: int = -1) -> bytes:
        piece = self.stream[self.at : self.at + min(size, self.step)]
        self.at += len(piece)
        return piece


class FakeConnection:
    """The few pymysql connection attributes ``_read_rows`` touches; no server is involved."""

    def __init__(self, stream: bytes, step: int = 4093) -> None:
        self._rfile = FakeSocketFile(stream, step)
        self._next_seq_id = 3
        self._current_timeout = self._read_timeout = None
        self.encoding = "utf8"
        self.closed = False

    def _force_close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("factory", IMPLEMENTATIONS)
def test_a_row_of_16_mib_or_more_is_joined_from_its_packets(factory: Factory) -> None:
    big = b"\x07" * (MAX_PACKET_LEN + 10)
    payload = row_payload([b"1", big])
    first, rest = payload[:MAX_PACKET_LEN], payload[MAX_PACKET_LEN:]
    stream = (
        packet(3, row_payload([b"0", None]))
        + packet(4, first)
        + packet(5, rest)
        + packet(6, row_payload([b"2", b"z"]))
        + packet(7, EOF_PAYLOAD)
    )
    conn: Any = FakeConnection(stream, step=1 << 20)
    target = factory(2)
    rawrows._read_rows(conn, target)
    ids, values = (a.to_pylist() for a in target.arrays())
    assert ids == [b"0", b"1", b"2"] and values[0] is None and values[2] == b"z"
    assert values[1] == big and conn._next_seq_id == 8 and not conn.closed


@pytest.mark.parametrize("factory", IMPLEMENTATIONS)
def test_an_error_mid_result_is_raised_as_pymysql_raises_it(factory: Factory) -> None:
    error = b"\xff" + (1317).to_bytes(2, "little") + b"#70100Query execution was interrupted"
    stream = packet(3, row_payload([b"1"])) + packet(4, error)
    conn: Any = FakeConnection(stream, step=5)
    with pytest.raises(pymysql.err.OperationalError, match="interrupted") as raised:
        rawrows._read_rows(conn, factory(1))
    assert raised.value.args[0] == 1317 and conn._next_seq_id == 5


@pytest.mark.parametrize("factory", IMPLEMENTATIONS)
@pytest.mark.parametrize(
    ("stream", "error", "message"),
    [
        pytest.param(
            packet(3, b"\x01a"), pymysql.err.OperationalError, "Lost connection", id="cut-off"
        ),
        pytest.param(
            packet(4, b"\x01a"), pymysql.err.InternalError, "got 4 expected 3", id="sequence"
        ),
        pytest.param(
            packet(3, b"\x01a\x01b"), pymysql.err.InternalError, "one value per", id="malformed"
        ),
    ],
)
def test_a_broken_stream_closes_the_connection_with_a_clear_error(
    factory: Factory, stream: bytes, error: type[Exception], message: str
) -> None:
    conn: Any = FakeConnection(stream)
    with pytest.raises(error, match=message):
        rawrows._read_rows(conn, factory(1))
    assert conn.closed
