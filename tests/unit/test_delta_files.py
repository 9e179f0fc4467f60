"""Delta data files written where a chunk is read, committed by the driver (``delta_files``)."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from cdc_console.config import LakeConfig
from cdc_console.core.records import ChangeRecord
from cdc_console.core.schema import ColumnInfo, TableSchema
from cdc_console.sinks.base import SinkSchemaError, TypedChunk, WrittenChunk
from cdc_console.sinks.delta import DeltaSink
from cdc_console.sinks.delta_files import (
    FILE_PREFIX,
    IN_FLIGHT_SECONDS,
    chunk_from_json,
    chunk_to_json,
    dictionary_columns,
    file_stats,
    write_chunk,
    write_files,
)
from cdc_console.sinks.lake_layout import stats_columns
from cdc_console.sinks.lake_target import LakeTarget
from cdc_console.sinks.maintenance import LakeTable, vacuum
from cdc_console.values.arrow import rows_to_table
from tests.unit.test_delta_sink import ORDERS, orders_schema

SCHEMA = orders_schema()
SCHEMAS = {ORDERS: SCHEMA}
SMALL = LakeConfig(target_file_size=64 * 1024)


def chunk(split_no: int, keys: range, pad: int = 10) -> TypedChunk:
    rows = [
        {
            "id": k,
            "name": f"n{k}-" + "x" * pad,
            "amount": f"{k}.25",
            "updated": "2024-02-29 12:00:00.000001",
        }
        for k in keys
    ]
    return TypedChunk(
        f"shop.orders:{split_no}",
        (3, 400 + split_no, -1, 0),
        1_700_000_000_000,
        rows_to_table(SCHEMA, rows),
    )


def written(tmp_path: Path, batch: int, *chunks: TypedChunk) -> list[WrittenChunk]:
    """What reader tasks send the driver: the chunks' files, already in the lake."""
    target = LakeTarget(tmp_path, changelog=True, lake=SMALL)
    return [chunk_from_json(chunk_to_json(write_chunk(target, SCHEMA, batch, c))) for c in chunks]


def test_stats_are_the_ones_delta_rs_writes_where_the_encoding_is_exact(tmp_path: Path) -> None:
    """Bounds a MERGE prunes files by must equal delta-rs' own; the rest get null counts only."""
    data = pa.table(
        {
            "id": pa.array([3, 1, None, 2], pa.int64()),
            "small": pa.array([5, None, -7, 0], pa.int32()),
            "tiny": pa.array([1, 2, None, -3], pa.int8()),
            "name": pa.array(["b", "a", None, "ünï"]),
            "day": pa.array([dt.date(2020, 1, 2), None, dt.date(1999, 1, 1), None]),
            "flag": pa.array([True, None, False, True]),
            "whole": pa.array(
                [Decimal(12), None, Decimal(-999999999999999999), Decimal(1)], pa.decimal128(18, 0)
            ),
            "money": pa.array(
                [Decimal("1.50"), Decimal("-2.25"), None, None], pa.decimal128(12, 2)
            ),
            "at": pa.array(
                [dt.datetime(2020, 1, 1, 0, 0, 0, 123456), None, None, None], pa.timestamp("us")
            ),
            "none": pa.array([None, None, None, None], pa.int64()),
        }
    )
    write_deltalake(str(tmp_path / "ref"), data)
    (line,) = [
        json.loads(text)["add"]
        for log in sorted((tmp_path / "ref" / "_delta_log").glob("*.json"))
        for text in log.read_text().splitlines()
        if '"add"' in text
    ]
    theirs = json.loads(line["stats"])
    ours = json.loads(file_stats(data, stats_columns(data.schema)))
    assert ours["numRecords"] == theirs["numRecords"] == 4
    exact = ["id", "small", "tiny", "name", "day", "flag", "whole"]
    assert sorted(ours["minValues"]) == sorted(exact)
    for name in exact:
        assert ours["minValues"][name] == theirs["minValues"][name], name
        assert ours["maxValues"][name] == theirs["maxValues"][name], name
    for name, count in ours["nullCount"].items():
        assert count == theirs["nullCount"].get(name, count), name
    assert ours["nullCount"]["none"] == 4 and ours["nullCount"]["money"] == 2


def test_written_chunks_commit_once_in_key_order_with_their_changelog(tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path, changelog=True, lake=SMALL)
    parts = written(tmp_path, 7, chunk(1, range(2000, 4000), 40), chunk(0, range(0, 2000), 40))
    assert parts[0].mirror and parts[0].changelog
    assert all(f.path.startswith(FILE_PREFIX + "b000000007-s1-") for f in parts[0].mirror)

    stats = sink.apply_batch(7, SCHEMAS, [], appends={ORDERS: parts})[ORDERS]
    assert (stats["inserted"], stats["changelog_rows"]) == (4000, 4000)
    mirror = DeltaTable(str(sink.mirror_path(ORDERS)))
    assert mirror.transaction_version(sink.app_id) == 7
    actions = pa.table(mirror.get_add_actions(flatten=True))
    ranges = sorted(
        zip(actions.column("min.id").to_pylist(), actions.column("max.id").to_pylist(), strict=True)
    )
    assert len(ranges) >= 2 and all(a[1] < b[0] for a, b in itertools.pairwise(ranges))
    rows = sink.read_mirror(ORDERS)
    assert sorted(rows.column("id").to_pylist()) == list(range(4000))
    assert rows.column("amount").to_pylist()[0] == Decimal("0.25")
    log = sink.read_changelog(ORDERS)
    assert log.column("_op").to_pylist() == ["+I"] * 4000
    assert log.column("_pos").to_pylist() == [400] * 2000 + [401] * 2000

    # Spark replays the batch: its readers write new files, the commit is not made twice.
    again = written(tmp_path, 7, chunk(0, range(0, 2000)), chunk(1, range(2000, 4000)))
    retried = sink.apply_batch(7, SCHEMAS, [], appends={ORDERS: again})[ORDERS]
    assert retried["mirror_skipped"] and retried["changelog_skipped"]
    assert sink.read_mirror(ORDERS).num_rows == 4000

    # Binlog changes MERGE into the written files, pruned by their key statistics.
    row = {"id": 3999, "name": "new", "amount": "1.00", "updated": "2024-03-01 00:00:00.000000"}
    change = ChangeRecord("shop", "orders", "+I", "[3999]", json.dumps(row), 3, 900, 0, 0, 0, 0)
    sink.apply_batch(8, SCHEMAS, [change])
    rows = sink.read_mirror(ORDERS)
    assert rows.num_rows == 4000
    assert rows.filter(pa.compute.equal(rows["id"], 3999)).column("name").to_pylist() == ["new"]


def test_files_of_another_shape_are_refused_before_anything_is_committed(tmp_path: Path) -> None:
    (part,) = written(tmp_path, 1, chunk(0, range(10)))
    wider = TableSchema(
        ORDERS, (*SCHEMA.columns, ColumnInfo("note", "varchar", "varchar(9)")), ("id",), "id"
    )
    sink = DeltaSink(tmp_path, changelog=True, lake=SMALL)
    with pytest.raises(SinkSchemaError, match=r"files of shop\.orders:0 have columns"):
        sink.apply_batch(1, {ORDERS: wider}, [], appends={ORDERS: [part]})
    assert not DeltaTable.is_deltatable(str(sink.mirror_path(ORDERS)))


def test_vacuum_spares_files_a_commit_may_still_name_and_deletes_old_orphans(
    tmp_path: Path,
) -> None:
    sink = DeltaSink(tmp_path, changelog=False, lake=SMALL)
    target = LakeTarget(tmp_path, changelog=False, lake=SMALL)
    first = write_chunk(target, SCHEMA, 1, chunk(0, range(100)))
    sink.apply_batch(1, SCHEMAS, [], appends={ORDERS: [first]})
    # Batch 2's reader has written its files; the driver has not committed them yet.
    pending = write_chunk(target, SCHEMA, 2, chunk(1, range(100, 200)))
    # An attempt of batch 2 that crashed long ago left a file nobody will commit.
    stale = write_chunk(target, SCHEMA, 2, chunk(1, range(100, 200)))
    path = sink.mirror_path(ORDERS)
    old = time.time() - IN_FLIGHT_SECONDS - 60
    os.utime(path / stale.mirror[0].path, (old, old))

    now = LakeConfig(target_file_size=SMALL.target_file_size, vacuum_retention_hours=0)
    result = vacuum(LakeTable("shop.orders", "mirror", path), now)
    assert result.files_removed == 1
    assert not (path / stale.mirror[0].path).exists()
    assert (path / pending.mirror[0].path).exists()
    sink.apply_batch(2, SCHEMAS, [], appends={ORDERS: [pending]})
    assert sorted(sink.read_mirror(ORDERS).column("id").to_pylist()) == list(range(200))


def test_vacuum_deletes_young_files_of_batches_the_table_has_committed(tmp_path: Path) -> None:
    """With the pipeline's app id, a reader's file that no version holds is deleted as soon as
    its batch is committed to the table, young or not: a crashed attempt's, and a snapshot
    file a later MERGE rewrote after a checkpoint forgot its tombstone (a zero retention).
    Files of a batch not yet committed stay, whatever their age decides for the others."""
    now = LakeConfig(
        target_file_size=SMALL.target_file_size, vacuum_retention_hours=0, deletion_vectors=False
    )  # copy-on-write: a MERGE rewrites the snapshot's file
    sink = DeltaSink(tmp_path, changelog=False, lake=now, app_id="cdc-console:test")
    target = LakeTarget(tmp_path, changelog=False, lake=now)
    crashed = write_chunk(target, SCHEMA, 1, chunk(0, range(100)))
    first = write_chunk(target, SCHEMA, 1, chunk(0, range(100)))
    sink.apply_batch(1, SCHEMAS, [], appends={ORDERS: [first]})
    pending = write_chunk(target, SCHEMA, 2, chunk(1, range(100, 200)))
    path = sink.mirror_path(ORDERS)
    table = LakeTable("shop.orders", "mirror", path)

    assert vacuum(table, now).files_removed == 0  # no app id: an hour of age decides
    assert vacuum(table, now, app_id=sink.app_id).files_removed == 1
    assert not (path / crashed.mirror[0].path).exists()
    assert (path / first.mirror[0].path).exists()
    assert (path / pending.mirror[0].path).exists()

    sink.apply_batch(2, SCHEMAS, [], appends={ORDERS: [pending]})
    row = {"id": 5, "name": "new", "amount": "1.00", "updated": "2024-03-01 00:00:00.000000"}
    change = ChangeRecord("shop", "orders", "+U", "[5]", json.dumps(row), 3, 900, 0, 0, 0, 0)
    sink.apply_batch(3, SCHEMAS, [change])
    live = {Path(uri).name for uri in DeltaTable(str(path)).file_uris()}
    assert Path(first.mirror[0].path).name not in live  # the MERGE rewrote it
    DeltaTable(str(path)).create_checkpoint()
    assert vacuum(table, now, app_id=sink.app_id).files_removed >= 1
    assert not (path / first.mirror[0].path).exists()
    assert (path / pending.mirror[0].path).exists()
    rows = sink.read_mirror(ORDERS)
    assert sorted(rows.column("id").to_pylist()) == list(range(200))
    assert rows.filter(pa.compute.equal(rows["id"], 5)).column("name").to_pylist() == ["new"]


def test_writing_files_needs_no_delta_rs_on_the_executors() -> None:
    """Spark's Python workers import the writer; delta-rs stays on the driver."""
    code = "import sys, cdc_console.sinks.delta_files; print('deltalake' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_only_columns_that_repeat_are_dictionary_encoded(tmp_path: Path) -> None:
    """A status repeats, a key and an amount do not: the writer's dictionary attempt is spent
    only where it pays, and every value reads back as written."""
    import pyarrow.parquet as pq

    n = 5_000
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "status": pa.array([("new", "paid", "shipped")[i % 3] for i in range(n)]),
            "amount": pa.array([Decimal(i) / 100 for i in range(n)], pa.decimal128(12, 2)),
            "note": pa.array([None] * n, pa.string()),
        }
    )
    assert dictionary_columns(data) == ["status", "note"]
    assert dictionary_columns(data.rename_columns(["id", "a.b", "amount", "note"])) is True
    (written,) = write_files(tmp_path, data, 64 << 20, "part")
    parquet = pq.ParquetFile(tmp_path / written.path)
    encodings = {
        parquet.schema_arrow.names[i]: parquet.metadata.row_group(0).column(i).encodings
        for i in range(data.num_columns)
    }
    assert any("DICTIONARY" in e for e in encodings["status"])
    assert not any("DICTIONARY" in e for e in encodings["id"] + encodings["amount"])
    assert parquet.read().equals(data)
