"""``cdc-console lake convert``: a mirror moved to merge-on-read and back keeps every row, the
batch it holds (so the next batch is applied once), and its readers; the old mirror of a move
back is kept readable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_console.cli import main
from cdc_console.config import LakeConfig
from cdc_console.sinks.delta import DeltaSink
from cdc_console.sinks.layout_convert import (
    CONVERTING,
    Layout,
    convert,
    finish_interrupted,
    layout_of,
)
from cdc_console.sinks.mirror_read import has_deletion_vectors, read_delta
from tests.unit.test_delta_sink import ORDERS, SCHEMAS, Feed, order

APP = "cdc-console"


def _names(rows: list[dict[str, Any]]) -> dict[int, str]:
    return {r["id"]: r["name"] for r in rows}


def _load(sink: DeltaSink, feed: Feed) -> dict[int, str]:
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k, f"n{k}")) for k in range(1, 301)])
    sink.apply_batch(1, SCHEMAS, [*feed.update(order(5, "n5"), order(5, "five"))])
    sink.apply_batch(2, SCHEMAS, [feed.rec("-D", order(k, f"n{k}")) for k in range(10, 40)])
    return _names(sink.read_mirror(ORDERS).to_pylist())


def test_a_merge_on_read_mirror_rebuilt_copy_on_write_keeps_rows_batch_and_history(
    tmp_path: Path,
) -> None:
    sink = DeltaSink(tmp_path / "lake", lake=LakeConfig(deletion_vectors=True))
    feed = Feed()
    before = _load(sink, feed)
    path = sink.mirror_path(ORDERS)
    old_version = DeltaTable(str(path)).version()
    assert has_deletion_vectors(DeltaTable(str(path)))

    done = convert(path, Layout.COPY_ON_WRITE, APP, ("id",))
    assert done.changed and done.rows == len(before) == 270
    table = DeltaTable(str(path))
    assert layout_of(table) == Layout.COPY_ON_WRITE
    # every Delta reader reads it again, delta-rs' pyarrow reader included
    assert _names(table.to_pyarrow_table().to_pylist()) == before
    assert table.transaction_version(APP) == 2
    assert table.metadata().configuration.get("delta.enableChangeDataFeed") == "true"
    assert done.set_aside is not None and done.set_aside.name.endswith(f"v{old_version}")
    kept = DeltaTable(str(done.set_aside))
    assert _names(read_delta(kept).to_pylist()) == before and kept.version() == old_version

    # the batch it holds is skipped again, the next is applied copy-on-write
    again = sink.apply_batch(2, SCHEMAS, [feed.rec("-D", order(50, "n50"))])[ORDERS]
    assert again["mirror_skipped"]
    sink.apply_batch(3, SCHEMAS, [*feed.update(order(7, "n7"), order(7, "seven"))])
    table = DeltaTable(str(path))
    assert not has_deletion_vectors(table)
    assert _names(table.to_pyarrow_table().to_pylist()) == {**before, 7: "seven"}
    assert convert(path, Layout.COPY_ON_WRITE, APP).changed is False


def test_a_copy_on_write_mirror_turned_merge_on_read_marks_its_next_changes(
    tmp_path: Path,
) -> None:
    sink = DeltaSink(tmp_path / "lake", lake=LakeConfig(deletion_vectors=False))
    feed = Feed()
    before = _load(sink, feed)
    path = sink.mirror_path(ORDERS)
    assert convert(path, Layout.MERGE_ON_READ, APP, dry_run=True).changed
    assert layout_of(DeltaTable(str(path))) == Layout.COPY_ON_WRITE  # a dry run writes nothing
    assert convert(path, Layout.MERGE_ON_READ, APP).changed
    sink.apply_batch(3, SCHEMAS, [*feed.update(order(7, "n7"), order(7, "seven"))])
    table = DeltaTable(str(path))
    log = path / "_delta_log" / f"{table.version():020}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    assert any("deletionVector" in a.get("add", {}) for a in actions)
    assert _names(read_delta(table).to_pylist()) == {**before, 7: "seven"}


def test_an_empty_mirror_and_an_interrupted_move_are_finished(tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path / "lake", lake=LakeConfig(deletion_vectors=True))
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(1))])
    sink.apply_batch(1, SCHEMAS, [feed.rec("-D", order(1))])
    path = sink.mirror_path(ORDERS)
    done = convert(path, Layout.COPY_ON_WRITE, APP)
    assert done.rows == 0 and DeltaTable(str(path)).transaction_version(APP) == 1

    # stopped after setting the old mirror aside, before the new one took its place
    convert(path, Layout.MERGE_ON_READ, APP)
    sink.apply_batch(2, SCHEMAS, [feed.rec("+I", order(2))])
    building = path.with_name(path.name + CONVERTING)
    path.rename(building)
    assert finish_interrupted(tmp_path / "lake") == [path]
    assert _names(read_delta(DeltaTable(str(path))).to_pylist()) == {2: "x"}


def test_cli_convert_both_ways(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lake = tmp_path / "lake"
    config = tmp_path / "pipeline.toml"
    config.write_text(
        f'[source]\ntables = ["shop.orders"]\n[sink]\npath = "{lake}"\n'
        f'[state]\npath = "{tmp_path / "state.sqlite"}"\n'
    )
    sink = DeltaSink(lake, lake=LakeConfig(deletion_vectors=True))
    feed = Feed()
    before = _load(sink, feed)
    argv = ["lake", "convert", "--config", str(config), "--table", "shop.orders"]
    assert main(argv) == 2  # --to is required
    assert "convert needs --to" in capsys.readouterr().err
    assert main([*argv, "--to", "copy-on-write", "--dry-run"]) == 0
    assert "shop.orders: would convert to copy-on-write (270 live rows)" in capsys.readouterr().out
    assert main([*argv, "--to", "copy-on-write"]) == 0
    out = capsys.readouterr().out
    assert "shop.orders: converted to copy-on-write (270 live rows); the old mirror is kept" in out
    assert main([*argv, "--to", "copy-on-write", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["table"], row["changed"], row["layout"]) == ("shop.orders", False, "copy-on-write")
    assert main([*argv, "--to", "merge-on-read"]) == 0
    assert "converted to merge-on-read" in capsys.readouterr().out
    assert _names(read_delta(DeltaTable(str(sink.mirror_path(ORDERS)))).to_pylist()) == before
