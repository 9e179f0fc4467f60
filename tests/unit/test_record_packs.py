"""Change records travel through Spark packed, and come out unchanged and in order."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cdc_console.core.records import ChangeRecord, RecordDict
from cdc_console.spark import protocol
from cdc_console.spark.protocol import (
    ARROW_SCHEMA,
    CONTROL_OP,
    FILES_OP,
    PACK_OP,
    change_columns,
    pack_changes,
    record_count,
    to_batches,
)


def _change(n: int, op: str = "+I") -> RecordDict:
    return {
        "database": "shop",
        "table": "orders",
        "op": op,
        "key": f'{{"id":{n}}}',
        "row": f'{{"id":{n},"note":"é {n}"}}' if op != "-D" else "",
        "file_index": 1,
        "pos": 1000 + n,
        "event_index": n % 3,
        "row_index": n % 2,
        "seq": n,
        "ts_ms": 1_700_000_000_000 + n,
        "split_id": "",
    }


def _special(op: str, n: int) -> RecordDict:
    return {**_change(n), "op": op, "row": "", "payload": f"payload {n}".encode()}


def _through_spark(rows: list[RecordDict]) -> pa.Table:
    """What ``foreachBatch`` receives: the task's output, packed, as one Arrow table."""
    return pa.Table.from_batches(list(to_batches(pack_changes(iter(rows)))), schema=ARROW_SCHEMA)


def _plain(table: pa.Table) -> pa.Table:
    ops = table["op"].to_pylist()
    keep = [op not in (CONTROL_OP, FILES_OP) for op in ops]
    return table.filter(pa.array(keep))


def test_changes_come_out_equal_and_in_order_around_other_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(protocol, "PACK_RECORDS", 4)
    changes = [_change(n, op) for n, op in enumerate(["+I", "-U", "+U", "-D"] * 4)]
    rows = [
        *changes[:3],
        _special(FILES_OP, 100),
        *changes[3:13],
        _special(CONTROL_OP, 101),
        *changes[13:],
    ]

    table = _through_spark(rows)

    ops = table["op"].to_pylist()
    assert ops == [
        PACK_OP,  # 3
        FILES_OP,
        PACK_OP,  # 4
        PACK_OP,  # 4
        PACK_OP,  # 2
        CONTROL_OP,
        PACK_OP,  # 3
    ]
    assert table.num_rows == 7
    assert record_count(table) == len(changes) + 2
    assert change_columns(_plain(table)).records() == [ChangeRecord.from_dict(c) for c in changes]
    assert table.filter(pa.array([op == FILES_OP for op in ops]))["payload"].to_pylist() == [
        b"payload 100"
    ]


def test_a_table_without_packs_reads_as_before() -> None:
    changes = [_change(n) for n in range(3)]
    table = pa.Table.from_batches(list(to_batches(iter(changes))), schema=ARROW_SCHEMA)
    assert record_count(table) == 3
    assert change_columns(table).records() == [ChangeRecord.from_dict(c) for c in changes]


def test_plain_records_between_packs_keep_their_place() -> None:
    """A staged batch of an older version holds its records plain; packs and plain rows read
    back in their order, and a null split id reads as a binlog change's empty one."""
    changes = [_change(n, op) for n, op in enumerate(["+I", "-U", "+U", "-D", "+I", "+I"])]
    plain = {**changes[5], "split_id": None}
    rows = [*to_batches(iter(changes[:1])), *to_batches(protocol.pack_changes(iter(changes[1:5])))]
    rows.append(pa.RecordBatch.from_pylist([plain], schema=ARROW_SCHEMA))
    table = pa.Table.from_batches(rows, schema=ARROW_SCHEMA)
    assert table["op"].to_pylist() == ["+I", PACK_OP, "+I"]
    got = change_columns(table).records()
    assert got == [ChangeRecord.from_dict(c) for c in changes]
    assert not got[-1].is_snapshot


def test_a_task_with_only_a_control_record_has_no_pack() -> None:
    table = _through_spark([_special(CONTROL_OP, 1)])
    assert table["op"].to_pylist() == [CONTROL_OP]
    assert record_count(table) == 1
