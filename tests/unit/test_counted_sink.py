"""A counted mirror (a table without a unique key) holds each distinct row once with how many
copies the source has: duplicates netted, one copy deleted at a time, range replaces absolute,
retries idempotent, and a random workload equal to a multiset model."""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_console.core.records import ChangeRecord
from cdc_console.core.schema import COUNT_COLUMN, ColumnInfo, TableId, TableSchema
from cdc_console.sinks.base import ReplaceRange
from cdc_console.sinks.changelog_json import ChangelogJsonSink, replay_counts
from cdc_console.sinks.delta import DeltaSink
from cdc_console.sinks.mirror_read import read_delta

LOGS = TableId("app", "logs")
SCHEMA = TableSchema(
    LOGS,
    (
        ColumnInfo("ts", "int", "int(11)", nullable=False),
        ColumnInfo("msg", "varchar", "varchar(20)"),
    ),
    (),
    "ts",
    counted=True,
)
SCHEMAS = {LOGS: SCHEMA}


class Feed:
    def __init__(self) -> None:
        self.pos = itertools.count(1000, 10)
        self.seq = itertools.count()

    def rec(
        self, op: str, ts: int, msg: str | None, split_id: str = "", pos: int = 0
    ) -> ChangeRecord:
        row = {"ts": ts, "msg": msg}
        return ChangeRecord(
            database=LOGS.database,
            table=LOGS.table,
            op=op,
            key=json.dumps([ts, msg]),
            row=json.dumps(row),
            file_index=1,
            pos=pos or next(self.pos),
            event_index=0,
            row_index=0,
            seq=next(self.seq),
            ts_ms=1,
            split_id=split_id,
        )


def mirror(sink: DeltaSink) -> dict[tuple[Any, ...], int]:
    rows = read_delta(DeltaTable(str(sink.mirror_path(LOGS)))).to_pylist()
    assert all(r[COUNT_COLUMN] > 0 for r in rows)
    found = {(r["ts"], r["msg"]): r[COUNT_COLUMN] for r in rows}
    assert len(found) == len(rows), "a distinct row appears once"
    return found


@pytest.fixture
def sink(tmp_path: Path) -> DeltaSink:
    return DeltaSink(tmp_path / "lake")


def test_duplicates_are_counted_and_deleted_one_copy_at_a_time(sink: DeltaSink) -> None:
    feed = Feed()
    sink.apply_batch(
        0,
        SCHEMAS,
        [feed.rec("+I", *row) for row in [(1, "a"), (1, "a"), (1, None), *[(2, None)] * 3]],
    )
    assert mirror(sink) == {(1, "a"): 2, (1, None): 1, (2, None): 3}
    position = next(feed.pos)
    sink.apply_batch(
        1,
        SCHEMAS,
        [
            feed.rec("-D", 2, None),
            feed.rec("-U", 1, "a", pos=position),
            feed.rec("+U", 1, "b", pos=position),
            feed.rec("-D", 1, None),
        ],
    )
    assert mirror(sink) == {(1, "a"): 1, (1, "b"): 1, (2, None): 2}
    changelog = sink.read_changelog(LOGS)
    assert changelog.column("_op").to_pylist()[-4:] == ["-U", "+U", "-D", "-D"]  # by position
    assert COUNT_COLUMN not in changelog.column_names


def test_a_retried_batch_is_not_counted_twice(sink: DeltaSink) -> None:
    feed = Feed()
    batch = [feed.rec("+I", 5, "x"), feed.rec("+I", 5, "x")]
    sink.apply_batch(0, SCHEMAS, batch)
    sink.apply_batch(0, SCHEMAS, batch)
    assert mirror(sink) == {(5, "x"): 2}


def test_a_range_replace_sets_counts_absolutely_at_its_high_watermark(sink: DeltaSink) -> None:
    feed = Feed()
    sink.apply_batch(
        0,
        SCHEMAS,
        [*(feed.rec("+I", 1, "a") for _ in range(3)), feed.rec("+I", 9, "z")],
    )
    hw = 5000
    batch = [
        feed.rec("+I", 1, "a", pos=4000),  # before HW, in range: the split's rows supersede it
        feed.rec("+I", 1, "a", split_id="app.logs:0", pos=hw),
        feed.rec("+I", 1, "a", split_id="app.logs:0", pos=hw),
        feed.rec("+I", 2, "b", split_id="app.logs:0", pos=hw),
        feed.rec("-D", 1, "a", pos=6000),  # after HW: applies on top
        feed.rec("+I", 9, "z", pos=6100),  # out of range: adds to the mirror's
    ]
    replace = ReplaceRange(LOGS, "app.logs:0", lambda row: row["ts"] < 5, ts_ms=1)
    stats = sink.apply_batch(1, SCHEMAS, batch, [replace])[LOGS]
    assert mirror(sink) == {(1, "a"): 1, (2, "b"): 1, (9, "z"): 2}
    assert stats["range_deleted"] == 4  # three copies in the mirror, one from the batch
    ops = sink.read_changelog(LOGS).column("_op").to_pylist()
    assert ops[-10:] == ["+I", "-D", "-D", "-D", "-D", "+I", "+I", "+I", "-D", "+I"]


def test_a_random_workload_matches_a_multiset_model(sink: DeltaSink) -> None:
    rng = random.Random(31)
    feed = Feed()
    model: Counter[tuple[int, str | None]] = Counter()
    values = [(t, m) for t in range(4) for m in ("a", None)]
    for batch_id in range(12):
        batch = []
        for _ in range(rng.randrange(1, 30)):
            row = rng.choice(values)
            present = [v for v, n in model.items() if n > 0]
            if present and rng.random() < 0.45:
                gone = rng.choice(present)
                if rng.random() < 0.5:
                    model[gone] -= 1
                    batch.append(feed.rec("-D", *gone))
                else:
                    position = next(feed.pos)
                    model[gone] -= 1
                    model[row] += 1
                    batch.append(feed.rec("-U", *gone, pos=position))
                    batch.append(feed.rec("+U", *row, pos=position))
            else:
                model[row] += 1
                batch.append(feed.rec("+I", *row))
        sink.apply_batch(batch_id, SCHEMAS, batch)
        assert mirror(sink) == {v: n for v, n in model.items() if n > 0}


def test_the_json_changelog_of_a_counted_table_replays_to_the_delta_mirror(
    sink: DeltaSink, tmp_path: Path
) -> None:
    json_sink = ChangelogJsonSink(tmp_path / "json")
    feed = Feed()
    first = [feed.rec("+I", *row) for row in [(1, "a"), (1, "a"), (3, None), (7, "q")]]
    replace = ReplaceRange(LOGS, "app.logs:0", lambda row: row["ts"] < 5, ts_ms=1)
    second = [
        feed.rec("+I", 1, "a", split_id="app.logs:0", pos=5000),
        feed.rec("+I", 4, None, split_id="app.logs:0", pos=5000),
        feed.rec("-D", 7, "q", pos=6000),
    ]
    for target in (sink, json_sink):
        target.apply_batch(0, SCHEMAS, first)
        target.apply_batch(1, SCHEMAS, second, [replace])
    replayed = replay_counts(json_sink.read_lines(LOGS), SCHEMA.key_columns)
    assert {key: count for key, (_, count) in replayed.items()} == mirror(sink)
    assert mirror(sink) == {(1, "a"): 1, (4, None): 1}
