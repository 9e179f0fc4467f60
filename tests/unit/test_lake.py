"""The lake: file layout, change data feed, compaction, vacuum and the job's upkeep."""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from cdc_console.cli import main
from cdc_console.config import LakeConfig, config_from_dict
from cdc_console.core.lifecycle import CommandStatus
from cdc_console.core.plan import BatchPlan
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.errors import ConfigError, ExitCode
from cdc_console.sinks.base import ReplaceRange, SinkSchemaError, TypedChunk
from cdc_console.sinks.delta import DeltaSink
from cdc_console.sinks.delta_log import active_files
from cdc_console.sinks.lake_layout import from_lake
from cdc_console.sinks.maintenance import (
    LakeTable,
    compaction_target,
    footprint,
    lake_tables,
    optimize,
    vacuum,
)
from cdc_console.sinks.mirror_read import read_delta
from cdc_console.spark.lake_upkeep import LakeUpkeep
from cdc_console.state.lake import lake_tables as recorded_tables
from cdc_console.state.store import StateStore
from cdc_console.values.arrow import arrow_schema, table_to_rows
from tests.unit.test_delta_sink import ORDERS, SCHEMAS, Feed, mirror, order

EVENTS = TableId("shop", "events")


def events_schema() -> TableSchema:
    """No DATETIME: the protocol an older reader can open (reader 1, writer 4 for the feed)."""
    return TableSchema(
        EVENTS,
        (
            ColumnInfo("id", "bigint", "bigint(20)", nullable=False, numeric_precision=19),
            ColumnInfo("body", "varchar", "varchar(50)"),
        ),
        ("id",),
        "id",
    )


SMALL = LakeConfig(target_file_size=64 * 1024)
COPY_ON_WRITE = LakeConfig(target_file_size=64 * 1024, deletion_vectors=False)


def typed_chunk(split_no: int, keys: range) -> TypedChunk:
    rows = [order(k, f"n{k}-" + "x" * 40) for k in keys]
    from cdc_console.values.arrow import rows_to_table

    return TypedChunk(
        f"shop.orders:{split_no}",
        (1, 500 + split_no, 0, 0),
        0,
        rows_to_table(SCHEMAS[ORDERS], rows),
    )


def file_ranges(path: Path) -> list[tuple[int, int, int]]:
    actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
    return sorted(
        zip(
            actions.column("min.id").to_pylist(),
            actions.column("max.id").to_pylist(),
            actions.column("num_records").to_pylist(),
            strict=True,
        )
    )


def replay_cdf(path: Path, schema: TableSchema) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Apply the change feed in commit order to an empty table: what a downstream consumer of
    ``readChangeFeed`` would build. Fails on a change seen twice (an insert of a present key)."""
    feed = pa.table(DeltaTable(str(path)).load_cdf(starting_version=0))
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    names = list(schema.column_names)
    changes = feed.column("_change_type").to_pylist()
    # delta-rs returns string_view columns; the codecs take the mirror's own types
    rows = table_to_rows(schema, feed.select(names).cast(arrow_schema(schema)))
    versions = feed.column("_commit_version").to_pylist()
    # Within one commit, deletes and pre-images come before inserts and post-images.
    rank = {"delete": 0, "update_preimage": 0, "insert": 1, "update_postimage": 1}
    for _, kind, row in sorted(
        zip(versions, changes, rows, strict=True), key=lambda x: (x[0], rank[x[1]])
    ):
        key = tuple(row[c] for c in schema.key_columns)
        if kind in ("delete", "update_preimage"):
            assert state.pop(key) == row, f"{kind} of {key} does not match the state"
        else:
            assert key not in state, f"{kind} of {key}, which is already present: a change twice"
            state[key] = row
    return state


# --- config ---------------------------------------------------------------------------------


def test_lake_config_sizes_durations_and_errors() -> None:
    def lake(**values: Any) -> LakeConfig:
        return config_from_dict({"source": {"tables": ["a.b"]}, "lake": values}).lake

    assert lake() == LakeConfig()
    parsed = lake(target_file_size="8MiB", optimize_every="15m", vacuum_every="off")
    assert (parsed.target_file_size, parsed.optimize_every, parsed.vacuum_every) == (
        8 << 20,
        900.0,
        0.0,
    )
    assert lake(optimize_every=90).optimize_every == 90.0
    assert lake(vacuum_every="6h").vacuum_every == 6 * 3600
    assert lake().snapshot_writes == "executors"
    assert lake(snapshot_writes="driver").snapshot_writes == "driver"
    for bad, text in (
        ({"snapshot_writes": "workers"}, "lake.snapshot_writes 'workers' is not one of"),
        ({"target_file_size": "1 parsec"}, "not a size"),
        ({"target_file_size": 10}, "outside 64KiB..1GiB"),
        ({"optimize_every": "soon"}, "not a duration"),
        ({"vacuum_retention_hours": -1}, "negative"),
        ({"checkpoint_interval": 0}, "at least 1"),
        ({"optimize": "1h"}, "unknown key lake.optimize"),
    ):
        with pytest.raises(ConfigError, match=text):
            lake(**bad)


# --- layout and properties ------------------------------------------------------------------


def test_new_mirror_gets_layout_retention_and_change_feed_properties(tmp_path: Path) -> None:
    lake = LakeConfig(target_file_size=2 << 20, vacuum_retention_hours=24, checkpoint_interval=50)
    sink = DeltaSink(tmp_path, lake=lake)
    feed = Feed()
    sink.apply_batch(1, SCHEMAS, [feed.rec("+I", order(1))])
    config = DeltaTable(str(sink.mirror_path(ORDERS))).metadata().configuration
    assert config["delta.enableChangeDataFeed"] == "true"
    assert config["delta.targetFileSize"] == str(2 << 20)
    assert config["delta.checkpointInterval"] == "50"
    assert config["delta.deletedFileRetentionDuration"] == "interval 86400 seconds"
    log_config = DeltaTable(str(sink.changelog_path(ORDERS))).metadata().configuration
    assert "delta.enableChangeDataFeed" not in log_config  # the changelog is a log already

    protocol = DeltaTable(str(sink.mirror_path(ORDERS))).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (3, 7)
    assert sorted(protocol.reader_features or []) == ["deletionVectors", "timestampNtz"]
    # copy-on-write, for readers of protocol 1: a mirror without DATETIME needs no feature
    events = DeltaSink(tmp_path / "old-readers", lake=LakeConfig(deletion_vectors=False))
    events.apply_batch(1, {EVENTS: events_schema()}, [_event_rec(1)])
    protocol = DeltaTable(str(events.mirror_path(EVENTS))).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 4)


def _event_rec(key: int, op: str = "+I") -> Any:
    from cdc_console.core.records import ChangeRecord

    return ChangeRecord(
        database="shop",
        table="events",
        op=op,
        key=json.dumps([key]),
        row=json.dumps({"id": key, "body": f"b{key}"}),
        file_index=1,
        pos=100 + key,
        event_index=0,
        row_index=0,
        seq=key,
        ts_ms=0,
        split_id="",
    )


def test_feature_off_creates_mirrors_without_change_feed(tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path, lake=LakeConfig(change_data_feed=False))
    sink.apply_batch(1, {EVENTS: events_schema()}, [_event_rec(1)])
    config = DeltaTable(str(sink.mirror_path(EVENTS))).metadata().configuration
    assert "delta.enableChangeDataFeed" not in config


def test_first_snapshot_files_follow_key_order_even_when_chunks_arrive_interleaved(
    tmp_path: Path,
) -> None:
    sink = DeltaSink(tmp_path, changelog=False, lake=SMALL)
    # Two readers' chunks, as the batch carries them: 0, 2, 4, ... then 1, 3, 5, ...
    chunks = [typed_chunk(n, range(n * 2000, (n + 1) * 2000)) for n in range(8)]
    interleaved = chunks[0::2] + chunks[1::2]
    sink.apply_batch(1, SCHEMAS, [], appends={ORDERS: interleaved})
    ranges = file_ranges(sink.mirror_path(ORDERS))
    assert len(ranges) > 4, "the target file size cuts the append into several files"
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges)), ranges
    assert sum(r[2] for r in ranges) == 16000


def test_merge_rewrites_only_files_holding_changed_keys(tmp_path: Path) -> None:
    """Copy-on-write (merge-on-read rewrites none: ``test_delta_dv``)."""
    sink = DeltaSink(tmp_path, changelog=False, lake=COPY_ON_WRITE)
    chunks = [typed_chunk(n, range(n * 2000, (n + 1) * 2000)) for n in range(10)]
    sink.apply_batch(1, SCHEMAS, [], appends={ORDERS: chunks})
    files = file_ranges(sink.mirror_path(ORDERS))
    largest = max(r[2] for r in files)
    feed = Feed()
    changed = [5, 7_001, 19_999]
    records = [
        r for k in changed for r in feed.update(order(k, f"n{k}"), order(k, "changed", "9.99"))
    ]
    stats = sink.apply_batch(2, SCHEMAS, records, commit_info={"cdc_console.position": "b.1:9"})
    assert stats[ORDERS]["updated"] == 3
    assert stats[ORDERS]["files_removed"] == 3
    assert 0 < stats[ORDERS]["rows_copied"] <= 3 * largest
    assert stats[ORDERS]["rows_copied"] < 20_000 / 3, "far less than the table"
    last = DeltaTable(str(sink.mirror_path(ORDERS))).history(1)[0]
    assert last["cdc_console.position"] == "b.1:9"
    assert last["cdc_console.batch"].startswith("2 shop.orders merge")
    assert mirror(sink)[(7_001,)]["name"] == "changed"


# --- change data feed -----------------------------------------------------------------------


def test_change_feed_replays_to_the_mirror_with_no_change_twice(tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path, lake=SMALL)
    feed = Feed()
    sink.apply_batch(1, SCHEMAS, [], appends={ORDERS: [typed_chunk(0, range(100))]})
    snapshot = DeltaTable(str(sink.mirror_path(ORDERS))).version()

    # the changes' before images are the rows as the source held them, as a binlog has them
    def held(k: int) -> dict[str, Any]:
        return order(k, f"n{k}-" + "x" * 40)

    sink.apply_batch(
        2,
        SCHEMAS,
        [
            *feed.update(held(1), order(1, "one")),
            feed.rec("-D", held(2)),
            feed.rec("+I", order(500, "new")),
            # a primary-key change: the row moves from 3 to 700
            *[feed.rec("-U", held(3)), feed.rec("+U", order(700, "moved"))],
        ],
    )
    batch3 = [*feed.update(order(1, "one"), order(1, "uno")), feed.rec("-D", order(500, "new"))]
    sink.apply_batch(3, SCHEMAS, batch3)
    sink.apply_batch(3, SCHEMAS, batch3)  # a retried batch commits nothing: nothing twice
    optimize(LakeTable("shop.orders", "mirror", sink.mirror_path(ORDERS)), SMALL)
    assert replay_cdf(sink.mirror_path(ORDERS), SCHEMAS[ORDERS]) == mirror(sink)
    feed_rows = pa.table(DeltaTable(str(sink.mirror_path(ORDERS))).load_cdf(starting_version=0))
    kinds = [
        kind
        for kind, version in zip(
            feed_rows.column("_change_type").to_pylist(),
            feed_rows.column("_commit_version").to_pylist(),
            strict=True,
        )
        if version > snapshot
    ]
    assert sorted(kinds) == sorted(
        ["update_preimage", "update_postimage"] * 2
        + ["delete", "delete", "delete", "insert", "insert"]
    )


# --- maintenance ----------------------------------------------------------------------------


def _many_small_batches(sink: DeltaSink, batches: int, start: int = 2) -> None:
    feed = Feed()
    for n in range(batches):
        key = 10_000 + n
        sink.apply_batch(start + n, SCHEMAS, [feed.rec("+I", order(key, f"k{key}"))])


def test_optimize_compacts_small_files_and_changes_no_data(tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path, lake=COPY_ON_WRITE)
    sink.apply_batch(1, SCHEMAS, [], appends={ORDERS: [typed_chunk(0, range(50))]})
    _many_small_batches(sink, 12)
    table = LakeTable("shop.orders", "mirror", sink.mirror_path(ORDERS))
    before = footprint(table, SMALL.target_file_size)
    rows_before = mirror(sink)
    assert before.files >= 13 and before.small_files == before.files

    planned = optimize(table, SMALL, dry_run=True)
    assert planned.dry_run and planned.files_removed == before.files
    assert footprint(table, SMALL.target_file_size).version == before.version

    done = optimize(table, SMALL)
    assert done.files_removed == before.files and done.files_added <= 2
    after = footprint(table, SMALL.target_file_size)
    assert after.files <= 2 and after.rows == before.rows
    assert mirror(sink) == rows_before
    assert "compacted 13 small file(s)" in done.describe()


def test_optimize_of_a_merge_on_read_mirror_packs_files_and_drops_vectors(
    tmp_path: Path,
) -> None:
    """Small files are packed as on copy-on-write; a file whose vector marks most of its rows
    is rewritten; no row changes and the change feed gets nothing."""
    sink = DeltaSink(tmp_path, lake=SMALL)
    sink.apply_batch(1, SCHEMAS, [], appends={ORDERS: [typed_chunk(0, range(50))]})
    _many_small_batches(sink, 12)
    feed = Feed()
    sink.apply_batch(40, SCHEMAS, [feed.rec("-D", order(k)) for k in range(0, 40)])
    table = LakeTable("shop.orders", "mirror", sink.mirror_path(ORDERS))
    before = footprint(table, SMALL.target_file_size)
    rows_before = mirror(sink)
    version = DeltaTable(str(table.path)).version()
    done = optimize(table, SMALL)
    after = footprint(table, SMALL.target_file_size)
    assert done.files_removed >= before.files - 1 and after.files <= 2
    assert after.rows == before.rows == len(rows_before) == 22
    assert mirror(sink) == rows_before
    assert not [f for f in active_files(table.path).values() if f.deletion_vector is not None]
    changes = DeltaTable(str(table.path)).load_cdf(starting_version=version + 1)
    assert pa.table(changes).num_rows == 0


def test_vacuum_keeps_what_a_reader_inside_the_retention_needs(tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path, changelog=False, lake=SMALL)
    sink.apply_batch(1, SCHEMAS, [], appends={ORDERS: [typed_chunk(0, range(50))]})
    _many_small_batches(sink, 5)
    path = sink.mirror_path(ORDERS)
    table = LakeTable("shop.orders", "mirror", path)
    old = DeltaTable(str(path), version=2)  # a reader that opened an older version
    old_rows = read_delta(old).num_rows
    optimize(table, SMALL)
    (path / "part-orphan-left-by-a-crash.parquet").write_bytes(b"junk")

    kept = vacuum(table, LakeConfig(target_file_size=SMALL.target_file_size))  # an hour
    assert kept.files_removed == 0
    assert read_delta(old).num_rows == old_rows  # the reader goes on
    assert read_delta(DeltaTable(str(path), version=2)).num_rows == old_rows

    now = LakeConfig(target_file_size=SMALL.target_file_size, vacuum_retention_hours=0)
    planned = vacuum(table, now, dry_run=True)
    assert planned.files_removed >= 7 and planned.bytes_removed > 0
    assert (path / "part-orphan-left-by-a-crash.parquet").exists()
    vacuum(table, now)
    assert not (path / "part-orphan-left-by-a-crash.parquet").exists()
    with pytest.raises(Exception, match=r"(?i)not found|no such file|object at location"):
        read_delta(DeltaTable(str(path), version=2))
    after = footprint(table, SMALL.target_file_size)
    assert after.rows == 55
    data_on_disk = sum(
        f.stat().st_size for f in path.rglob("*.parquet") if "_delta_log" not in f.parts
    )
    assert data_on_disk == after.live_bytes


def test_lake_tables_finds_mirrors_and_changelogs(tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path)
    sink.apply_batch(1, SCHEMAS, [Feed().rec("+I", order(1))])
    (tmp_path / "shop" / "not-a-table").mkdir()
    found = [(t.name, t.kind) for t in lake_tables(tmp_path)]
    assert found == [("shop.orders", "changelog"), ("shop.orders", "mirror")]
    assert lake_tables(tmp_path / "missing") == []


# --- the job's upkeep -----------------------------------------------------------------------


def _pipeline(tmp_path: Path, **lake: Any) -> Any:
    return config_from_dict(
        {
            "source": {"tables": ["shop.orders"]},
            "sink": {"path": str(tmp_path / "lake")},
            "state": {"path": str(tmp_path / "state.sqlite")},
            "lake": {"target_file_size": 65536, **lake},
        }
    )


def test_upkeep_measures_optimizes_on_schedule_and_never_waits_for_a_batch(
    tmp_path: Path,
) -> None:
    config = _pipeline(tmp_path, optimize_every=60, vacuum_every="off")
    sink = DeltaSink(config.sink.path, lake=config.lake)
    sink.apply_batch(1, SCHEMAS, [], appends={ORDERS: [typed_chunk(0, range(50))]})
    _many_small_batches(sink, 6)
    store = StateStore(config.state_path)
    now = [1000.0]
    lock = threading.Lock()
    upkeep = LakeUpkeep(config, store, lock, clock=lambda: now[0])

    with lock:  # a batch is being applied
        assert upkeep.tick() is None
    assert recorded_tables(store) == []

    upkeep.tick()
    upkeep.tick()
    measured = {(t.name, t.kind): t for t in recorded_tables(store)}
    assert measured["shop.orders", "mirror"].files == 7
    assert measured["shop.orders", "changelog"].rows == 56
    now[0] += 30  # not yet due: measured again, nothing compacted
    for _ in range(3):
        assert upkeep.tick() is None
    now[0] += 31
    upkeep.tick(), upkeep.tick()  # the re-measurements come first
    result = upkeep.tick()
    assert result is not None and result.action == "optimize"
    assert result.table.kind == "changelog" or result.table.kind == "mirror"
    results = [result, upkeep.tick()]
    assert {r.table.kind for r in results if r} == {"mirror", "changelog"}
    state = {(t.name, t.kind): t for t in recorded_tables(store)}
    assert state["shop.orders", "mirror"].files == 1
    assert "compacted 7 small file(s)" in (state["shop.orders", "mirror"].last_result or "")
    assert upkeep.tick() is None  # both done: nothing due until the next minute
    events = [e.message for e in store.events()]
    assert any("compacted" in e for e in events)


def test_upkeep_applies_queued_commands_and_refuses_unknown_tables(tmp_path: Path) -> None:
    config = _pipeline(tmp_path, optimize_every="off", vacuum_every="off")
    sink = DeltaSink(config.sink.path, lake=config.lake)
    _many_small_batches(sink, 3)
    store = StateStore(config.state_path)
    upkeep = LakeUpkeep(config, store, threading.Lock())
    vacuum_all = store.queue_command("vacuum", None, {})
    missing = store.queue_command("optimize", "shop.gone", {})
    compact = store.queue_command("optimize", "shop.orders", {})
    for _ in range(8):
        upkeep.tick()
    answers = {c.id: c for c in store.commands()}
    assert answers[missing].status == CommandStatus.FAILED and "no table shop.gone" in str(
        answers[missing].reason
    )
    assert answers[vacuum_all].status == CommandStatus.APPLIED
    assert "over 2 table(s)" in str(answers[vacuum_all].reason)
    assert answers[compact].status == CommandStatus.APPLIED
    assert "compacted 3 small file(s)" in str(answers[compact].reason)


def test_changelog_json_sink_refuses_lake_commands(tmp_path: Path) -> None:
    config = config_from_dict(
        {
            "source": {"tables": ["shop.orders"]},
            "sink": {"kind": "changelog-json", "path": str(tmp_path / "out")},
            "state": {"path": str(tmp_path / "state.sqlite")},
        }
    )
    store = StateStore(config.state_path)
    command = store.queue_command("optimize", None, {})
    LakeUpkeep(config, store, threading.Lock()).tick()
    found = store.command(command)
    assert found is not None and found.status == CommandStatus.FAILED
    assert "changelog-json" in str(found.reason)


# --- the CLI --------------------------------------------------------------------------------


def test_cli_lake_status_optimize_and_vacuum_without_a_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _pipeline(tmp_path, vacuum_retention_hours=0)
    path = tmp_path / "pipeline.toml"
    path.write_text(
        f'[source]\ntables = ["shop.orders"]\n[sink]\npath = "{config.sink.path}"\n'
        f'[state]\npath = "{config.state_path}"\n'
        "[lake]\ntarget_file_size = 65536\nvacuum_retention_hours = 0\n"
    )
    sink = DeltaSink(config.sink.path, lake=config.lake)
    _many_small_batches(sink, 4)
    StateStore(config.state_path).close()

    assert main(["lake", "status", "--config", str(path), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    mirror_row = next(t for t in status["tables"] if t["kind"] == "mirror")
    assert (mirror_row["table"], mirror_row["files"], mirror_row["rows"]) == ("shop.orders", 4, 4)

    assert main(["lake", "optimize", "--config", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "shop.orders: would compact 4 small file(s)" in out
    assert footprint(LakeTable("shop.orders", "mirror", sink.mirror_path(ORDERS)), 65536).files == 4

    assert main(["lake", "optimize", "--config", str(path), "--table", "shop.orders"]) == 0
    assert "shop.orders: compacted 4 small file(s)" in capsys.readouterr().out
    assert main(["lake", "vacuum", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^shop.orders: deleted [1-9]\d* unreferenced file", out, re.M), out
    assert main(["lake", "status", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "shop.orders (changelog)" in out and "target file size 64.0 KiB" in out
    recorded = {(t.name, t.kind): t for t in recorded_tables(StateStore(config.state_path))}
    assert recorded["shop.orders", "mirror"].vacuumed_at is not None
    assert recorded["shop.orders", "mirror"].files == 1

    # A binlog window the job applies in the background writes no file before its commit.
    store = StateStore(config.state_path)
    store.create_batch(6, BatchPlan(6).to_dict(), [])
    store.mark_staged(6, str(tmp_path / "batch-6.parquet"), 1, plan_past=True)
    store.close()
    assert main(["lake", "vacuum", "--config", str(path)]) == 0
    capsys.readouterr()

    # A crash left a batch staged: its readers' files may not be committed yet.
    store = StateStore(config.state_path)
    store.create_batch(7, BatchPlan(7).to_dict(), [])
    store.mark_staged(7, str(tmp_path / "batch-7.parquet"), 1)
    store.close()
    assert main(["lake", "vacuum", "--config", str(path)]) == ExitCode.OPERATOR_ACTION
    err = capsys.readouterr().err
    assert "batch(es) 7 are staged" in err and "start the job once" in err
    assert main(["lake", "vacuum", "--config", str(path), "--dry-run"]) == 0
    capsys.readouterr()

    assert main(["lake", "optimize", "--config", str(path), "--table", "shop.nope"]) == 2
    assert "no Delta table shop.nope" in capsys.readouterr().err
    assert not os.environ.get("CDC_SOURCE_PASSWORD_SHOULD_NOT_BE_NEEDED")


def test_compaction_packs_only_below_half_a_full_file_so_rows_per_file_never_grow() -> None:
    target = 256 << 10
    # snapshot files (57 KB, 6.2k rows), MERGE outputs (same rows, compressed half as well),
    # per-batch insert files (a few rows) and a MERGE remainder
    sizes = [57_000] * 100 + [112_000] * 60 + [1_500] * 40 + [20_000]
    rows = [6_200] * 160 + [8] * 40 + [1_100]
    packed = compaction_target(sizes, rows, target)
    assert packed == 28_500
    assert all(size >= 2 * packed for size, r in zip(sizes, rows, strict=True) if r == 6_200)
    assert all(size < packed for size, r in zip(sizes, rows, strict=True) if r < 6_200)
    # a young table of nothing but small files is packed to a quarter target
    assert compaction_target([1_500] * 30, [8] * 30, target) == target // 4
    assert compaction_target([], [], target) == target // 4


def test_datetime_as_utc_keeps_older_readers_and_the_wall_clock(tmp_path: Path) -> None:
    """``[lake] datetime = "timestamp"``: protocol 1/4, same digits, same pipeline values."""
    lake = LakeConfig(target_file_size=SMALL.target_file_size, datetime="timestamp")
    sink = DeltaSink(tmp_path, lake=lake)
    feed = Feed()
    updated = "2024-02-29 23:59:59.123456"
    sink.apply_batch(1, SCHEMAS, [], appends={ORDERS: [typed_chunk(0, range(10))]})
    sink.apply_batch(2, SCHEMAS, feed.update(order(7), order(7, "seven", updated=updated)))
    replaces = [ReplaceRange(ORDERS, "shop.orders:0", lambda key: key["id"] < 5, (1, 1, 0, 0))]
    sink.apply_batch(3, SCHEMAS, [feed.rec("+I", order(1), split_id="shop.orders:0")], replaces)

    path = sink.mirror_path(ORDERS)
    protocol = DeltaTable(str(path)).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 4)
    stored = read_delta(DeltaTable(str(path)))
    assert stored.schema.field("updated").type == pa.timestamp("us", tz="UTC")
    seven = stored.filter(pa.compute.equal(stored["id"], 7)).column("updated")[0].as_py()
    assert seven.isoformat() == "2024-02-29T23:59:59.123456+00:00"  # the digits, read as UTC
    canonical = table_to_rows(SCHEMAS[ORDERS], from_lake(stored, arrow_schema(SCHEMAS[ORDERS])))
    by_key = {r["id"]: r for r in canonical}
    assert sorted(by_key) == [1, *range(5, 10)]  # the replace deleted 0, 2, 3, 4
    assert by_key[1] == order(1)
    assert by_key[7] == order(7, "seven", updated=updated)

    with pytest.raises(SinkSchemaError, match="re-dump"):
        DeltaSink(tmp_path).apply_batch(4, SCHEMAS, [feed.rec("+I", order(99))])
    with pytest.raises(ConfigError, match="timestamp_ntz"):
        config_from_dict({"source": {"tables": ["a.b"]}, "lake": {"datetime": "date"}})
