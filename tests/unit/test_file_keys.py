"""What a merge-on-read batch keeps between batches, and reads of only what it needs: a
file's key columns and footer, a vector's positions, the log's replay, the open table. Each is
kept only while what it was read from is unchanged; each test changes that behind its back."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from cdc_console.sinks import delta_tables
from cdc_console.sinks.deletion_vectors import inline_vector
from cdc_console.sinks.delta_log import active_files
from cdc_console.sinks.delta_tables import open_or_create
from cdc_console.sinks.file_keys import FileKeys
from cdc_console.sinks.lake_layout import ROW_GROUP_ROWS
from cdc_console.sinks.mirror_read import read_positions
from tests.unit.test_delta_dv import dv_sink
from tests.unit.test_delta_sink import ORDERS, SCHEMAS, Feed, order


def test_rows_at_positions_are_read_from_their_row_groups_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = 10 * 1000 + 7
    data = pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "name": pa.array([f"n{i}" for i in range(rows)], pa.string_view()),
        }
    )
    path = tmp_path / "f.parquet"
    pq.write_table(data, path, row_group_size=1000)
    asked: list[list[int]] = []
    original = pq.ParquetFile.read_row_groups

    def counting(self: pq.ParquetFile, groups: list[int], **kw: Any) -> pa.Table:
        asked.append(list(groups))
        return original(self, groups, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", counting)
    rng = random.Random(7)
    for _ in range(20):
        positions = rng.sample(range(rows), rng.randint(1, 12))
        got = read_positions(path, ["id", "name"], positions)
        assert got.column("id").to_pylist() == positions
        assert got.column("name").to_pylist() == [f"n{p}" for p in positions]
        assert got.schema.field("name").type == pa.string()  # view types come back plain
        assert asked[-1] == sorted({p // 1000 for p in positions})
    got = read_positions(path, ["id"], [rows - 1, 0, rows - 1])
    assert got.column("id").to_pylist() == [rows - 1, 0, rows - 1]


def test_the_cache_keeps_within_its_budget_and_answers_the_same(tmp_path: Path) -> None:
    paths = []
    for n in range(6):
        path = tmp_path / f"{n}.parquet"
        pq.write_table(pa.table({"id": pa.array(range(n * 100, n * 100 + 100))}), path)
        paths.append(path)
    keys = FileKeys(budget=250)
    for _ in range(3):
        for n, path in enumerate(paths):
            got = keys.key_columns(path, path.stat().st_size, ["id"])
            assert got.column("id").to_pylist() == list(range(n * 100, n * 100 + 100))
            assert keys._held <= 250
    vector = inline_vector([3, 1, 2])
    assert keys.positions(tmp_path, vector) == [1, 2, 3]
    keys.remember(tmp_path, inline_vector([9]), [9])
    assert keys.positions(tmp_path, inline_vector([9])) == [9]


def test_a_file_written_anew_under_the_same_name_is_read_anew(tmp_path: Path) -> None:
    """Files are immutable in a Delta table; the cache still keys them by size, so a test
    tool that rewrites one in place is not answered from memory."""
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3]}), path)
    keys = FileKeys()
    assert keys.key_columns(path, path.stat().st_size, ["id"]).num_rows == 3
    pq.write_table(pa.table({"id": list(range(50))}), path)
    assert keys.key_columns(path, path.stat().st_size, ["id"]).num_rows == 50


def _paths(table: Path) -> set[str]:
    return {f.path for f in active_files(table).values()}


def _delta_rs_paths(table: Path) -> set[str]:
    actions = DeltaTable(str(table)).get_add_actions(flatten=True)
    return set(pa.table(actions).column("path").to_pylist())


def test_the_log_replay_follows_commits_checkpoints_and_a_table_made_anew(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for n in range(3):
        write_deltalake(str(table), pa.table({"id": [n]}), mode="append")
        assert _paths(table) == _delta_rs_paths(table)
    DeltaTable(str(table)).create_checkpoint()
    write_deltalake(str(table), pa.table({"id": [9]}), mode="overwrite")
    assert _paths(table) == _delta_rs_paths(table)
    assert len(_paths(table)) == 1
    # set aside, then a new table at the same path that has gone further than the old one
    table.rename(tmp_path / "aside")
    for n in range(8):
        write_deltalake(str(table), pa.table({"id": [100 + n]}), mode="append")
    assert _paths(table) == _delta_rs_paths(table)
    assert len(_paths(table)) == 8
    # an older version is replayed as asked, not from the newer replay kept
    assert len(active_files(table, 2)) == 3


def test_a_mirror_set_aside_and_created_anew_is_opened_anew(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64())])
    path = tmp_path / "m"
    first = open_or_create(path, schema, {})
    for n in range(5):
        write_deltalake(first, pa.table({"id": [n]}, schema=schema), mode="append")
    assert open_or_create(path, schema, {}).version() == 5
    path.rename(tmp_path / "aside")
    second = open_or_create(path, schema, {})
    write_deltalake(second, pa.table({"id": [7]}, schema=schema), mode="append")
    again = open_or_create(path, schema, {})
    assert again.version() == 1
    assert pa.table(again.to_pyarrow_table()).column("id").to_pylist() == [7]
    # a commit by another process is seen
    write_deltalake(str(path), pa.table({"id": [8]}, schema=schema), mode="append")
    assert open_or_create(path, schema, {}).version() == 2
    assert path in delta_tables._kept


def test_a_batch_reads_the_row_groups_of_its_changed_keys_not_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The apply cost of one changed row, after the first batch has been read once: no file's
    key column read again; the change feed's pre-image taken from the update's before image,
    or, for a change without one, one row group decoded."""
    sink = dv_sink(tmp_path)
    feed = Feed()
    rows = 4 * ROW_GROUP_ROWS
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k)) for k in range(rows)])
    sink.apply_batch(1, SCHEMAS, [*feed.update(order(5), order(5, "warm"))])
    decoded: list[int] = []
    whole: list[Path] = []
    group_read = pq.ParquetFile.read_row_groups
    table_read = pq.read_table

    def row_groups(self: pq.ParquetFile, groups: list[int], **kw: Any) -> pa.Table:
        got = group_read(self, groups, **kw)
        decoded.append(got.num_rows)
        return got

    def read_table(source: Any, *args: Any, **kw: Any) -> pa.Table:
        whole.append(Path(str(source)))
        return table_read(source, *args, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", row_groups)
    monkeypatch.setattr(pq, "read_table", read_table)
    key = 3 * ROW_GROUP_ROWS + 11
    sink.apply_batch(2, SCHEMAS, [*feed.update(order(key), order(key, "changed"))])
    assert decoded == []
    # an insert of a key the mirror holds (a change replayed, say) has no before image
    sink.apply_batch(3, SCHEMAS, [feed.rec("+I", order(7, "again"))])
    assert decoded == [ROW_GROUP_ROWS]
    assert [p for p in whole if p.suffix == ".parquet" and "_delta_log" not in str(p)] == []
    mirror = {r["id"]: r["name"] for r in sink.read_mirror(ORDERS).to_pylist()}
    assert mirror[key] == "changed" and mirror[5] == "warm" and mirror[7] == "again"
    assert len(mirror) == rows
    changes = DeltaTable(str(sink.mirror_path(ORDERS))).load_cdf(starting_version=3)
    feed_rows = sorted(
        (r["_change_type"], r["id"], r["name"]) for r in pa.table(changes.read_all()).to_pylist()
    )
    assert feed_rows == [
        ("update_postimage", 5, "warm"),
        ("update_postimage", 7, "again"),
        ("update_postimage", key, "changed"),
        ("update_preimage", 5, "x"),
        ("update_preimage", 7, "x"),
        ("update_preimage", key, "x"),
    ]


def test_the_vectors_removes_name_are_scanned_once_and_agree_with_a_full_scan(
    tmp_path: Path,
) -> None:
    from cdc_console.sinks import delta_log
    from cdc_console.sinks.delta_log import referenced_vectors

    sink = dv_sink(tmp_path)
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k)) for k in range(100)])
    root = sink.mirror_path(ORDERS)
    seen = []
    for batch in range(1, 6):
        deletes = [feed.rec("-D", order(k)) for k in range(batch * 17, batch * 17 + 17)]
        sink.apply_batch(batch, SCHEMAS, deletes)
        kept = referenced_vectors(root)
        delta_log._removed.clear()
        assert referenced_vectors(root) == kept
        seen.append(kept)
    assert seen[-1] and all(p.exists() for p in seen[-1])
    assert seen[0] < seen[-1]  # each batch's vector file joins while a remove names it
