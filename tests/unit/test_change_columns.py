"""Change records as Arrow columns: the same records, and the same MERGE, without objects."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from cdc_console.core.records import ChangeRecord, RecordDict
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.sinks import delta as delta_module
from cdc_console.sinks.base import SinkError
from cdc_console.sinks.change_columns import ChangeColumns
from cdc_console.sinks.delta import DeltaSink
from cdc_console.sinks.netting import fold_columns, plan_table_batch
from cdc_console.spark.protocol import RECORD_SCHEMA, change_columns

LINES = TableId("shop", "lines")
OTHER = TableId("shop", "other")


def lines_schema(table_id: TableId = LINES) -> TableSchema:
    """A composite key, so key tuples of two parts are folded."""
    return TableSchema(
        table_id,
        (
            ColumnInfo("order_id", "int", "int(11)", nullable=False),
            ColumnInfo("line", "varchar", "varchar(8)", nullable=False),
            ColumnInfo("qty", "int", "int(11)"),
        ),
        ("order_id", "line"),
        "order_id",
    )


def record(
    op: str,
    order_id: int,
    line: str,
    qty: int | None,
    position: tuple[int, int, int, int],
    seq: int,
    split_id: str = "",
    table_id: TableId = LINES,
) -> ChangeRecord:
    return ChangeRecord(
        table_id.database,
        table_id.table,
        op,
        json.dumps([order_id, line]),
        json.dumps({"order_id": order_id, "line": line, "qty": qty}),
        *position,
        seq,
        1_700_000_000_000 + seq,
        split_id,
    )


def random_records(rng: random.Random, count: int) -> list[ChangeRecord]:
    """Few keys, so most are changed many times; positions with ties that only the event and
    row indexes, the snapshot-before-binlog tier or the sequence number settle; any order."""
    records = []
    for seq in range(count):
        position = (
            rng.randint(1, 2),
            rng.randint(1, 5) * 100,
            rng.randint(-1, 1),
            rng.randint(0, 2),
        )
        split_id = f"{LINES}:{rng.randint(0, 2)}" if rng.random() < 0.2 else ""
        op = "+I" if split_id else rng.choice(["+I", "-U", "+U", "-D"])
        qty = None if rng.random() < 0.1 else rng.randint(0, 9)
        records.append(
            record(op, rng.randint(1, 6), rng.choice("ab"), qty, position, seq, split_id)
        )
    rng.shuffle(records)
    return records


def columns(records: list[ChangeRecord]) -> ChangeColumns:
    return ChangeColumns(pa.Table.from_pylist([r.to_dict() for r in records], schema=RECORD_SCHEMA))


@pytest.mark.parametrize("seed", range(40))
def test_fold_gives_the_nets_of_the_records_in_the_same_order(seed: int) -> None:
    rng = random.Random(seed)
    records = random_records(rng, rng.randint(0, 300))
    schema = lines_schema()
    expected = plan_table_batch(schema, records, (), (), want_changes=False).nets
    folded = fold_columns(schema, columns(records))
    assert list(folded.items()) == list(expected.items())


def test_columns_are_a_sequence_of_the_same_records() -> None:
    records = random_records(random.Random(1), 50)
    changes = columns(records)
    assert len(changes) == 50 and bool(changes)
    assert list(changes) == records
    assert changes[3] == records[3]
    assert list(changes[10:12]) == records[10:12]
    assert not ChangeColumns(RECORD_SCHEMA.empty_table())


def test_by_table_keeps_each_tables_records_in_batch_order() -> None:
    rng = random.Random(2)
    records = random_records(rng, 40)
    mixed = [replace_table(r, OTHER) if i % 3 == 0 else r for i, r in enumerate(records)]
    groups = columns(mixed).by_table()
    assert sorted(groups) == [LINES, OTHER]
    assert list(groups[LINES]) == [r for r in mixed if r.table == "lines"]
    assert list(groups[OTHER]) == [r for r in mixed if r.table == "other"]


def replace_table(r: ChangeRecord, table_id: TableId) -> ChangeRecord:
    return ChangeRecord.from_dict({**r.to_dict(), "table": table_id.table})


def test_an_unknown_op_is_refused_as_a_record_would_be() -> None:
    bad: RecordDict = {**record("+I", 1, "a", 1, (1, 100, 0, 0), 0).to_dict(), "op": "+X"}
    table = pa.Table.from_pylist([bad], schema=RECORD_SCHEMA)
    with pytest.raises(ValueError, match="change op must be one of"):
        fold_columns(lines_schema(), ChangeColumns(table))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("key", "[1, ", "bad key in change record"),
        ("key", '{"order_id": 1}', "bad key in change record"),
        ("row", '{"order_id": 1}', "do not match the table's columns"),
    ],
)
def test_a_bad_key_or_row_names_the_record(field: str, value: str, message: str) -> None:
    good = [record("+I", n, "a", n, (1, 100 + n, 0, 0), n) for n in range(5)]
    bad = ChangeRecord.from_dict({**good[2].to_dict(), field: value})
    with pytest.raises(SinkError, match=message):
        fold_columns(lines_schema(), columns([*good[:2], bad, *good[3:]]))


def test_a_superseded_row_is_not_parsed() -> None:
    """Only the images that survive the fold are read (a documented difference: the records'
    way parses every upsert's image)."""
    first = record("+I", 1, "a", 1, (1, 100, 0, 0), 0)
    broken = ChangeRecord.from_dict({**first.to_dict(), "row": "not json"})
    last = record("+U", 1, "a", 2, (1, 200, 0, 0), 1)
    folded = fold_columns(lines_schema(), columns([broken, last]))
    assert folded == {(1, "a"): {"order_id": 1, "line": "a", "qty": 2}}


def test_the_mirror_merge_folds_columns_and_builds_no_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a changelog and a range replace the Delta sink takes the columns' way; its
    mirror equals the one records applied the objects' way build."""
    rng = random.Random(3)
    schema = lines_schema()
    by_columns = DeltaSink(tmp_path / "columns", changelog=False)
    by_records = DeltaSink(tmp_path / "records", changelog=False)
    built: list[int] = []
    records_of = ChangeColumns.records

    def counted(self: ChangeColumns) -> list[ChangeRecord]:
        built.append(len(self))
        return records_of(self)

    monkeypatch.setattr(ChangeColumns, "records", counted)
    for batch in range(6):
        records = random_records(rng, 200)
        by_columns.apply_batch(batch, {LINES: schema}, columns(records))
        by_records.apply_batch(batch, {LINES: schema}, records)
        assert mirror_rows(by_columns) == mirror_rows(by_records)
    assert built == []


def mirror_rows(sink: DeltaSink) -> list[dict[str, Any]]:
    return sorted(
        sink.read_mirror(LINES).to_pylist(), key=lambda row: (row["order_id"], row["line"])
    )


def test_the_driver_gets_columns_from_packed_and_plain_records() -> None:
    """``change_columns`` over what ``foreachBatch`` receives is the records, as objects and as a sequence."""
    from cdc_console.spark.protocol import ARROW_SCHEMA, pack_changes, to_batches

    records = random_records(random.Random(4), 30)
    rows = [r.to_dict() for r in records]
    packed = pa.Table.from_batches(list(to_batches(pack_changes(iter(rows)))), schema=ARROW_SCHEMA)
    plain = pa.Table.from_batches(list(to_batches(iter(rows))), schema=ARROW_SCHEMA)
    for table in (packed, plain):
        assert list(change_columns(table)) == records
        assert change_columns(table).records() == records


def test_the_fold_is_used_only_where_it_is_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A changelog needs every change in order: the records' way plans it."""
    calls: list[str] = []
    fold = delta_module.fold_columns

    def spy(schema: TableSchema, changes: ChangeColumns, *rest: Any) -> Any:
        calls.append("fold")
        return fold(schema, changes, *rest)

    monkeypatch.setattr(delta_module, "fold_columns", spy)
    records = random_records(random.Random(5), 20)
    DeltaSink(tmp_path / "with-log").apply_batch(0, {LINES: lines_schema()}, columns(records))
    assert calls == []
    DeltaSink(tmp_path / "no-log", changelog=False).apply_batch(
        0, {LINES: lines_schema()}, columns(records)
    )
    assert calls == ["fold"]


@pytest.mark.parametrize("seed", range(20))
def test_the_rows_keys_held_before_the_batch_are_their_first_changes_before_images(
    seed: int,
) -> None:
    """``befores``: a key whose first change in the batch is a ``-U`` or ``-D`` held that
    change's row image when the batch began; any other key is left out. Columns and records
    agree, and both with the batch read in order by hand."""
    rng = random.Random(seed)
    records = random_records(rng, rng.randint(0, 300))
    schema = lines_schema()
    expected: dict[tuple[object, ...], dict[str, object]] = {}
    seen: set[tuple[object, ...]] = set()
    for record in sorted(records, key=lambda r: r.sort_key):
        key = tuple(json.loads(record.key))
        if key not in seen and record.op in ("-U", "-D"):
            expected[key] = json.loads(record.row)
        seen.add(key)
    planned = plan_table_batch(schema, records, (), (), want_changes=False, want_befores=True)
    folded: dict[tuple[object, ...], dict[str, object]] = {}
    fold_columns(schema, columns(records), folded)
    assert planned.befores == expected
    assert folded == expected
