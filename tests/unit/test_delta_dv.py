"""Merge-on-read mirrors (``[lake] deletion_vectors``): a batch marks the old versions of its
changed rows in deletion vectors and appends the new ones. What we write is read back by
delta-rs' ``QueryBuilder`` (DataFusion over delta-kernel, an independent reader of the
protocol), and our own reader agrees with it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from cdc_console.config import LakeConfig
from cdc_console.sinks.delta import DeltaSink
from cdc_console.sinks.delta_log import active_files
from cdc_console.sinks.maintenance import LakeTable, vacuum
from cdc_console.sinks.mirror_read import has_deletion_vectors, read_delta
from tests.mirror_readers import read_mirror
from tests.unit.test_delta_sink import ORDERS, SCHEMAS, Feed, by_id, order


def dv_sink(root: Path, **lake: Any) -> DeltaSink:
    return DeltaSink(root / "delta", lake=LakeConfig(deletion_vectors=True, **lake))


def by_query(sink: DeltaSink) -> list[dict[str, Any]]:
    """The mirror as DataFusion reads it (deletion vectors applied by delta-kernel)."""
    table = DeltaTable(str(sink.mirror_path(ORDERS)))
    result = QueryBuilder().register("m", table).execute("SELECT * FROM m ORDER BY id").read_all()
    return pa.table(result).to_pylist()


def ours(sink: DeltaSink) -> list[dict[str, Any]]:
    table = read_delta(DeltaTable(str(sink.mirror_path(ORDERS))))
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def log_actions(sink: DeltaSink, version: int) -> list[dict[str, Any]]:
    path = sink.mirror_path(ORDERS) / "_delta_log" / f"{version:020}.json"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_batch_marks_old_rows_and_appends_new_ones(tmp_path: Path) -> None:
    sink = dv_sink(tmp_path)
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k, f"n{k}")) for k in range(1, 101)])
    mirror = DeltaTable(str(sink.mirror_path(ORDERS)))
    assert has_deletion_vectors(mirror)
    before = {p: f.size for p, f in active_files(sink.mirror_path(ORDERS)).items()}

    batch = [
        *feed.update(order(5, "n5"), order(5, "five")),
        feed.rec("-D", order(7, "n7")),
        feed.rec("+I", order(200, "new")),
    ]
    stats = sink.apply_batch(1, SCHEMAS, batch)[ORDERS]
    assert (stats["inserted"], stats["updated"], stats["deleted"]) == (1, 1, 1)
    expected = {**{(k,): order(k, f"n{k}") for k in range(1, 101)}, **by_id(order(5, "five"))}
    expected.pop((7,))
    expected[(200,)] = order(200, "new")
    mirror = DeltaTable(str(sink.mirror_path(ORDERS)))
    rows = by_query(sink)
    assert rows == ours(sink)
    assert len(rows) == 100
    assert {r["id"]: r["name"] for r in rows} == {k[0]: r["name"] for k, r in expected.items()}

    # the old file was not rewritten: it is still there, with a vector of two rows
    actions = log_actions(sink, mirror.version())
    (vector,) = [a["add"] for a in actions if "add" in a and "deletionVector" in a["add"]]
    assert vector["path"] in before and vector["deletionVector"]["cardinality"] == 2
    assert json.loads(vector["stats"])["numRecords"] == 100
    # its min/max/nullCount predate the deletions: wide bounds, as the protocol asks
    assert json.loads(vector["stats"])["tightBounds"] is False
    new = [a["add"] for a in actions if "add" in a and "deletionVector" not in a["add"]]
    assert [json.loads(a["stats"])["numRecords"] for a in new] == [2]
    (txn,) = [a["txn"] for a in actions if "txn" in a]
    assert (txn["appId"], txn["version"]) == ("cdc-console", 1)
    assert sink.applied_batch(ORDERS) == 1


def test_a_files_vector_accumulates_and_a_file_with_no_live_row_is_removed(
    tmp_path: Path,
) -> None:
    sink = dv_sink(tmp_path)
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k)) for k in range(1, 41)])
    for batch, keys in enumerate([range(1, 11), range(11, 31)], start=1):
        sink.apply_batch(batch, SCHEMAS, [feed.rec("-D", order(k)) for k in keys])
    files = active_files(sink.mirror_path(ORDERS))
    (first,) = [f for f in files.values() if f.deletion_vector is not None]
    assert first.deletion_vector is not None and first.deletion_vector.cardinality == 30
    assert first.deletion_vector.storage_type == "u"  # 30 rows: a file, not inline
    assert [r["id"] for r in by_query(sink)] == list(range(31, 41)) == [r["id"] for r in ours(sink)]
    sink.apply_batch(3, SCHEMAS, [feed.rec("-D", order(k)) for k in range(31, 41)])
    assert active_files(sink.mirror_path(ORDERS)) == {}
    assert by_query(sink) == [] == ours(sink)


def test_a_retried_batch_changes_nothing(tmp_path: Path) -> None:
    sink = dv_sink(tmp_path)
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(1)), feed.rec("+I", order(2))])
    batch = [*feed.update(order(1), order(1, "once"))]
    sink.apply_batch(1, SCHEMAS, batch)
    version = DeltaTable(str(sink.mirror_path(ORDERS))).version()
    stats = sink.apply_batch(1, SCHEMAS, batch)[ORDERS]
    assert stats["mirror_skipped"]
    assert DeltaTable(str(sink.mirror_path(ORDERS))).version() == version
    assert [r["name"] for r in ours(sink)] == ["once", "x"]


@pytest.mark.parametrize("through", ["load_cdf", "changelog"])
def test_the_change_feed_has_every_change_with_its_kind(tmp_path: Path, through: str) -> None:
    sink = dv_sink(tmp_path)
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k, f"n{k}")) for k in (1, 2, 3)])
    sink.apply_batch(
        1,
        SCHEMAS,
        [
            *feed.update(order(1, "n1"), order(1, "u1")),
            feed.rec("-D", order(2, "n2")),
            feed.rec("+I", order(4, "n4")),
        ],
    )
    if through == "changelog":
        log = sink.read_changelog(ORDERS).to_pylist()
        assert [(r["_op"], r["id"], r["name"]) for r in log[3:]] == [
            ("-U", 1, "n1"),
            ("+U", 1, "u1"),
            ("-D", 2, "n2"),
            ("+I", 4, "n4"),
        ]
        return
    table = DeltaTable(str(sink.mirror_path(ORDERS)))
    changes = pa.table(table.load_cdf(starting_version=table.version())).to_pylist()
    assert sorted((r["_change_type"], r["id"], r["name"]) for r in changes) == [
        ("delete", 2, "n2"),
        ("insert", 4, "n4"),
        ("update_postimage", 1, "u1"),
        ("update_preimage", 1, "n1"),
    ]


def test_random_batches_read_the_same_through_delta_kernel_ours_and_the_model(
    tmp_path: Path,
) -> None:
    """Random inserts, updates and deletes over many batches, with delta-rs' checkpoint,
    compaction and vacuum in between: after each batch the mirror read by DataFusion, Polars,
    our reader and the model agree (our log replay follows delta-rs' checkpoints and rewrites)."""
    import random

    rng = random.Random(2026)
    sink = dv_sink(tmp_path)
    feed = Feed()
    model: dict[int, dict[str, Any]] = {}
    for batch in range(12):
        records = []
        for _ in range(rng.randint(1, 40)):
            key = rng.randint(1, 300)
            if key in model and rng.random() < 0.3:
                records.append(feed.rec("-D", model.pop(key)))
            elif key in model:
                row = order(key, f"b{batch}", f"{rng.randint(0, 999)}.00")
                records.extend(feed.update(model[key], row))
                model[key] = row
            else:
                model[key] = order(key, f"i{batch}")
                records.append(feed.rec("+I", model[key]))
        sink.apply_batch(batch, SCHEMAS, records)
        table = DeltaTable(str(sink.mirror_path(ORDERS)))
        if batch == 4:
            table.create_checkpoint()
        if batch == 6:  # vacuum keeps the vector files the live files still reference
            table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
        if batch == 8:
            table.optimize.compact()
            table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
        expected = [model[k] for k in sorted(model)]
        assert ours(sink) == by_query(sink), batch
        read_mirror(sink.mirror_path(ORDERS))  # Polars' readers agree too
        assert [(r["id"], r["name"], str(r["amount"])) for r in ours(sink)] == [
            (r["id"], r["name"], r["amount"]) for r in expected
        ], batch


def test_compaction_rewrites_files_mostly_deleted_and_changes_no_data(tmp_path: Path) -> None:
    from cdc_console.sinks.delta_dv import rewrite_deleted

    sink = dv_sink(tmp_path)
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k)) for k in range(1, 41)])
    sink.apply_batch(1, SCHEMAS, [feed.rec("-D", order(k)) for k in range(1, 6)])
    table = DeltaTable(str(sink.mirror_path(ORDERS)))
    assert rewrite_deleted(table, 0.25, {}) == (0, 0)  # 5 of 40: below the share
    sink.apply_batch(2, SCHEMAS, [feed.rec("-D", order(k)) for k in range(6, 31)])
    table = DeltaTable(str(sink.mirror_path(ORDERS)))
    rows = ours(sink)
    assert rewrite_deleted(table, 0.25, {"cdc_console.maintenance": "optimize"}) == (1, 1)
    table = DeltaTable(str(sink.mirror_path(ORDERS)))
    assert ours(sink) == rows == by_query(sink)
    files = active_files(sink.mirror_path(ORDERS))
    assert all(f.deletion_vector is None for f in files.values())
    assert sum(f.num_records or 0 for f in files.values()) == 10
    assert pa.table(table.load_cdf(starting_version=table.version())).num_rows == 0


def test_small_files_are_packed_by_rows_and_packing_settles(tmp_path: Path) -> None:
    """A merge-on-read mirror's small files (the snapshot's chunks, each batch's new rows) are
    packed into files of at most ``pack_rows`` live rows, with no change to the data or the
    change feed; a file of half that or more is left alone, so a second run does nothing."""
    from cdc_console.sinks.delta_dv import rewrite_deleted

    sink = dv_sink(tmp_path)
    feed = Feed()
    for batch in range(7):
        keys = range(batch * 30, batch * 30 + 30)
        sink.apply_batch(batch, SCHEMAS, [feed.rec("+I", order(k)) for k in keys])
    sink.apply_batch(7, SCHEMAS, [*feed.update(order(3), order(3, "three"))])
    rows = ours(sink)
    table = DeltaTable(str(sink.mirror_path(ORDERS)))
    assert len(active_files(sink.mirror_path(ORDERS))) == 8
    assert rewrite_deleted(table, 0.25, {}, pack_rows=100) == (8, 3)
    table = DeltaTable(str(sink.mirror_path(ORDERS)))
    assert ours(sink) == rows == by_query(sink)
    packed = sorted(f.num_records or 0 for f in active_files(sink.mirror_path(ORDERS)).values())
    assert packed == [10, 100, 100]
    assert pa.table(table.load_cdf(starting_version=table.version())).num_rows == 0
    # the two full files stay; a lone small one has nothing to be packed with
    assert rewrite_deleted(table, 0.25, {}, pack_rows=100) == (0, 0)


def test_packing_is_spread_over_passes_of_a_bounded_size(tmp_path: Path) -> None:
    from cdc_console.sinks.delta_dv import rewrite_deleted

    sink = dv_sink(tmp_path)
    feed = Feed()
    for batch in range(6):
        keys = range(batch * 30, batch * 30 + 30)
        sink.apply_batch(batch, SCHEMAS, [feed.rec("+I", order(k)) for k in keys])
    rows = ours(sink)
    passes = []
    while True:
        table = DeltaTable(str(sink.mirror_path(ORDERS)))
        done = rewrite_deleted(table, 0.25, {}, pack_rows=200, pass_rows=70)
        if done == (0, 0):
            break
        passes.append(done)
    # 30-row files, at most 70 rows a pass but never fewer than two files
    assert passes[0] == (2, 1)
    assert ours(sink) == rows == by_query(sink)
    live = sorted(f.num_records or 0 for f in active_files(sink.mirror_path(ORDERS)).values())
    assert sum(live) == 180 and all(n >= 100 for n in live[1:])


def test_a_crash_before_the_commit_loses_and_doubles_nothing_and_vacuum_takes_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files and vectors are written before the commit: a crash between leaves them referenced
    by no version; the retried batch applies once, and vacuum removes what the crash left."""
    from cdc_console.sinks import delta_dv

    sink = dv_sink(tmp_path, vacuum_retention_hours=0)
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k)) for k in range(1, 41)])
    batch = [feed.rec("-D", order(k)) for k in range(1, 31)]
    batch += [*feed.update(order(35), order(35, "updated")), feed.rec("+I", order(99))]

    def crash(*args: Any, **kwargs: Any) -> None:
        raise OSError("killed before the commit")

    with monkeypatch.context() as patch:
        patch.setattr(delta_dv, "put_if_absent", crash)
        with pytest.raises(OSError):
            sink.apply_batch(1, SCHEMAS, batch)
    root = sink.mirror_path(ORDERS)
    left = {p.name for p in root.iterdir() if p.is_file()}
    assert any(n.startswith("deletion_vector_") for n in left)  # the crash's vector file
    assert len(ours(sink)) == 40 == len(by_query(sink))
    sink.apply_batch(1, SCHEMAS, batch)
    rows = ours(sink)
    assert [r["id"] for r in rows] == [*range(31, 41), 99] and rows == by_query(sink)
    assert sink.apply_batch(1, SCHEMAS, batch)[ORDERS]["mirror_skipped"]
    lake = LakeConfig(vacuum_retention_hours=0)
    vacuum(LakeTable("shop.orders", "mirror", root), lake, app_id="cdc-console")
    live = {f.path for f in active_files(root).values()}
    vectors = {
        f.deletion_vector.file_path(root).name
        for f in active_files(root).values()
        if f.deletion_vector is not None and f.deletion_vector.storage_type == "u"
    }
    on_disk = {p.name for p in root.iterdir() if p.is_file()}
    assert on_disk == live | vectors, on_disk - (live | vectors)
    assert ours(sink) == rows


def test_a_commit_another_writer_took_first_is_laid_again_on_the_new_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdc_console.sinks import delta_dv

    sink = dv_sink(tmp_path)
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k)) for k in range(1, 11)])
    real = delta_dv.merge_by_deletion_vectors
    raced: list[int] = []

    def racing(table: DeltaTable, *args: Any) -> Any:
        if not raced:  # an operator's compaction commits just before the batch
            raced.append(table.version())
            DeltaTable(str(sink.mirror_path(ORDERS))).optimize.compact()
        return real(table, *args)

    monkeypatch.setattr("cdc_console.sinks.delta_merge.merge_by_deletion_vectors", racing)
    monkeypatch.setattr(delta_dv, "merge_by_deletion_vectors", racing)
    sink.apply_batch(1, SCHEMAS, [*feed.update(order(3), order(3, "three"))])
    assert raced
    assert {r["id"]: r["name"] for r in ours(sink)}[3] == "three"
    assert ours(sink) == by_query(sink) and len(ours(sink)) == 10


def test_files_with_view_types_are_read_as_plain_types(tmp_path: Path) -> None:
    """delta-rs writes some files with ``string_view``, which pyarrow cannot take rows of; the
    merge-on-read writer found that on a re-dumped mirror."""
    import pyarrow.parquet as pq

    from cdc_console.sinks.mirror_read import read_file

    path = tmp_path / "viewed.parquet"
    pq.write_table(pa.table({"s": pa.array(["a", "b"], pa.string_view())}), path)
    data = read_file(path, ["s"])
    assert data.schema.field("s").type == pa.string()
    assert data.take(pa.array([1], pa.uint64())).column("s").to_pylist() == ["b"]


def test_vacuum_removes_vectors_only_versions_past_the_retention_name(tmp_path: Path) -> None:
    """A file's vector is replaced by a larger one each batch; the replaced vector files belong
    to older versions only, and go with them (retention 0); the live one stays."""
    sink = dv_sink(tmp_path)
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k)) for k in range(1, 200)])
    for batch, keys in enumerate([range(1, 30), range(30, 60), range(60, 90)], start=1):
        sink.apply_batch(batch, SCHEMAS, [feed.rec("-D", order(k)) for k in keys])
    root = sink.mirror_path(ORDERS)
    vector_files = {p.name for p in root.glob("deletion_vector_*.bin")}
    assert len(vector_files) == 3
    rows = ours(sink)
    keep = vacuum(LakeTable("shop.orders", "mirror", root), LakeConfig(), app_id="cdc-console")
    assert keep.files_removed == 0  # an hour's retention: older versions may still be read
    vacuum(
        LakeTable("shop.orders", "mirror", root),
        LakeConfig(vacuum_retention_hours=0),
        app_id="cdc-console",
    )
    (live,) = [f.deletion_vector for f in active_files(root).values() if f.deletion_vector]
    assert {p.name for p in root.glob("deletion_vector_*.bin")} == {live.file_path(root).name}
    assert ours(sink) == rows == by_query(sink)


def test_a_mirror_whose_log_cannot_be_replayed_is_refused_and_the_others_applied(
    tmp_path: Path,
) -> None:
    """A commit missing from one mirror's log (deleted behind the pipeline's back) is that
    table's fault: the job's isolated apply refuses it and applies the other table."""
    from cdc_console.sinks.base import REFUSED
    from tests.unit.test_delta_sink import ITEMS

    sink = dv_sink(tmp_path)
    feed = Feed()
    item = {"Order Id": 1, "Line": "a", "qty": 1}
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k)) for k in range(1, 5)])
    sink.apply_batch(1, SCHEMAS, [feed.rec("+I", order(9))])
    sink.apply_batch(2, SCHEMAS, [feed.rec("+I", order(10))])
    log = sink.mirror_path(ORDERS) / "_delta_log"
    version = DeltaTable(str(sink.mirror_path(ORDERS))).version()
    (log / f"{version - 1:020}.json").unlink()
    stats = sink.apply_batch(
        3,
        SCHEMAS,
        [*feed.update(order(1), order(1, "changed")), feed.rec("+I", item, table=ITEMS)],
        isolate=True,
    )
    assert "commit" in str(stats[ORDERS][REFUSED])
    assert stats[ITEMS]["inserted"] == 1


def test_a_commit_another_writer_beat_is_tried_again_not_parked(tmp_path: Path) -> None:
    from deltalake.exceptions import CommitFailedError, DeltaError, SchemaMismatchError

    sink = dv_sink(tmp_path)
    assert not sink.is_table_fault(CommitFailedError("version 7 already exists"))
    assert sink.is_table_fault(DeltaError("Kernel error: gap in the log"))
    assert sink.is_table_fault(SchemaMismatchError("column types differ"))
    assert not sink.is_table_fault(OSError("No space left on device"))
