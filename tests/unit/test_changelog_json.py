"""ChangelogJsonSink: Flink's changelog-json lines, atomic per-batch files, and replay."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from cdc_console.core.records import ChangeRecord
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.sinks.base import ReplaceRange, SinkError
from cdc_console.sinks.changelog_json import (
    ChangelogJsonSink,
    ReplayError,
    changelog_line,
    replay_changelog,
)
from cdc_console.sinks.delta import DeltaSink
from cdc_console.values.arrow import table_to_rows

# The seed document's demo table (001): orders with a DATETIME(3) column.
ORDERS = TableId("mydb", "orders")
SCHEMA = TableSchema(
    ORDERS,
    (
        ColumnInfo("order_id", "int", "int(11)", nullable=False),
        ColumnInfo("order_date", "date", "date"),
        ColumnInfo("order_time", "datetime", "datetime(3)", datetime_precision=3),
        ColumnInfo("quantity", "int", "int(11)"),
        ColumnInfo("product_id", "int", "int(11)"),
        ColumnInfo("purchaser", "varchar", "varchar(50)"),
    ),
    ("order_id",),
    "order_id",
)
SCHEMAS = {ORDERS: SCHEMA}
KEY = ["order_id"]

# Verbatim from seeds/001 ("Full data output" and "Update the value of 1005").
SEED_INSERT = (
    '{"data":{"order_id":1010,"order_date":"2021-09-17","order_time":"2021-09-22 10:52:12.189",'
    '"quantity":53,"product_id":502,"purchaser":"flink"},"op":"+I"}'
)
SEED_UPDATE = [
    '{"data":{"order_id":1005,"order_date":"2021-09-17","order_time":"2021-09-22 02:51:58.813",'
    '"quantity":69,"product_id":503,"purchaser":"flink"},"op":"-U"}',
    '{"data":{"order_id":1005,"order_date":"2021-09-17","order_time":"2021-09-22 02:55:43.627",'
    '"quantity":80,"product_id":503,"purchaser":"flink"},"op":"+U"}',
]


def order(key: int, quantity: int = 1, time: str = "2021-09-22 10:52:12.189") -> dict[str, Any]:
    return {
        "order_id": key,
        "order_date": "2021-09-17",
        "order_time": time,
        "quantity": quantity,
        "product_id": 500,
        "purchaser": "flink",
    }


class Feed:
    def __init__(self) -> None:
        self.pos = itertools.count(4, 7)
        self.seq = itertools.count()

    def rec(
        self, op: str, row: dict[str, Any], pos: int | None = None, split_id: str = ""
    ) -> ChangeRecord:
        return ChangeRecord(
            database="mydb",
            table="orders",
            op=op,
            key=json.dumps([row["order_id"]]),
            row=json.dumps(row),
            file_index=2,
            pos=next(self.pos) if pos is None else pos,
            event_index=0,
            row_index=0,
            seq=next(self.seq),
            ts_ms=1_632_279_132_189,
            split_id=split_id,
        )


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_lines_match_the_seed_document(tmp_path: Path) -> None:
    sink = ChangelogJsonSink(tmp_path)
    feed = Feed()
    seed_row = json.loads(SEED_INSERT)["data"]
    before, after = (json.loads(line)["data"] for line in SEED_UPDATE)
    stats = sink.apply_batch(
        7,
        SCHEMAS,
        [
            feed.rec("+I", seed_row),
            feed.rec("+I", before),
            feed.rec("-U", before, pos=100),
            feed.rec("+U", after, pos=100),
        ],
    )
    path = tmp_path / "mydb" / "orders" / "batch-000000000007.jsonl"
    assert stats[ORDERS] == {"lines": 4, "range_deleted": 0, "path": str(path)}
    lines = lines_of(path)
    assert lines[0] == SEED_INSERT
    assert lines[2:] == SEED_UPDATE
    assert path.read_text(encoding="utf-8").endswith("}\n")
    assert changelog_line("-D", seed_row) == SEED_INSERT.replace('"+I"', '"-D"')


def test_non_ascii_stays_readable() -> None:
    assert changelog_line("+I", {"name": "Zoë 🎉"}) == '{"data":{"name":"Zoë 🎉"},"op":"+I"}'
    with pytest.raises(ValueError, match="op"):
        changelog_line("U", {})


def test_lines_follow_binlog_order_not_list_order(tmp_path: Path) -> None:
    sink = ChangelogJsonSink(tmp_path)
    feed = Feed()
    first = feed.rec("+I", order(1))
    second = feed.rec("-D", order(1))
    sink.apply_batch(0, SCHEMAS, [second, first])
    assert [json.loads(line)["op"] for line in sink.read_lines(ORDERS)] == ["+I", "-D"]


def test_retried_batch_overwrites_and_never_duplicates(tmp_path: Path) -> None:
    sink = ChangelogJsonSink(tmp_path)
    feed = Feed()
    batch = [feed.rec("+I", order(k)) for k in range(3)]
    sink.apply_batch(0, SCHEMAS, batch)
    sink.apply_batch(0, SCHEMAS, batch)
    assert len(list(sink.read_lines(ORDERS))) == 3
    assert [p.name for p in (tmp_path / "mydb" / "orders").iterdir()] == [
        "batch-000000000000.jsonl"
    ]  # no temporary file left behind
    state = sink.replay(ORDERS, KEY, strict=True)
    assert state == {(k,): order(k) for k in range(3)}


def test_batch_files_sort_numerically(tmp_path: Path) -> None:
    sink = ChangelogJsonSink(tmp_path)
    feed = Feed()
    for batch_id in (10, 9, 1_000_000):
        sink.apply_batch(batch_id, SCHEMAS, [feed.rec("+I", order(batch_id))])
    assert [b for b, _ in sink.batch_files(ORDERS)] == [9, 10, 1_000_000]
    assert [b for b, _ in sink.batch_files(ORDERS, before=10)] == [9]


def test_replay_folds_changes_into_final_state() -> None:
    lines = [
        changelog_line("+I", order(1)),
        changelog_line("+I", order(2)),
        changelog_line("-U", order(1)),
        changelog_line("+U", order(1, quantity=5)),
        changelog_line("-D", order(2)),
        changelog_line("-U", order(1, quantity=5)),  # primary-key change 1 -> 3
        changelog_line("+U", order(3, quantity=5)),
        "",
    ]
    expected = {(3,): order(3, quantity=5)}
    assert replay_changelog(lines, KEY) == expected
    assert replay_changelog(lines, KEY, strict=True) == expected


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([changelog_line("+I", order(1))] * 2, "present"),
        ([changelog_line("-D", order(1))], "absent"),
        (
            [changelog_line("+I", order(1)), changelog_line("-U", order(1, quantity=9))],
            "differs",
        ),
        (['{"data":{"order_id":1},"op":"!"}'], "unknown op"),
        (["not json"], "not a changelog-json"),
        (['{"data":{},"op":"+I"}'], "not a changelog-json"),
    ],
)
def test_strict_replay_catches_changes_applied_twice(lines: list[str], message: str) -> None:
    with pytest.raises(ReplayError, match=message):
        replay_changelog(lines, KEY, strict=True)


def test_lenient_replay_tolerates_duplicates() -> None:
    lines = [changelog_line("+I", order(1))] * 2 + [changelog_line("-D", order(7))]
    assert replay_changelog(lines, KEY) == {(1,): order(1)}


def test_unknown_table_raises(tmp_path: Path) -> None:
    with pytest.raises(SinkError, match="no schema"):
        ChangelogJsonSink(tmp_path).apply_batch(0, {}, [Feed().rec("+I", order(1))])


def test_replace_range_writes_deletes_from_replayed_state(tmp_path: Path) -> None:
    sink = ChangelogJsonSink(tmp_path)
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k)) for k in range(1, 7)])
    sink.apply_batch(1, SCHEMAS, [feed.rec("-D", order(2))])
    replace = ReplaceRange(ORDERS, "mydb.orders:0", lambda key: 2 <= key["order_id"] <= 5)
    batch = [
        feed.rec("+I", order(3, quantity=3), pos=1000, split_id="mydb.orders:0"),
        feed.rec("+I", order(5, quantity=5), pos=1000, split_id="mydb.orders:0"),
    ]
    stats = sink.apply_batch(2, SCHEMAS, batch, [replace])[ORDERS]
    assert stats["range_deleted"] == 1  # key 4; key 2 is already gone
    retry = sink.apply_batch(2, SCHEMAS, batch, [replace])[ORDERS]
    assert retry == stats
    ops = [
        (json.loads(line)["op"], json.loads(line)["data"]["order_id"])
        for line in sink.read_lines(ORDERS)
    ]
    assert ops[-3:] == [("-D", 4), ("+I", 3), ("+I", 5)]
    # The redumped rows re-insert present keys, so the log is not strictly foldable here.
    assert sink.replay(ORDERS, KEY) == {
        (1,): order(1),
        (3,): order(3, quantity=3),
        (5,): order(5, quantity=5),
        (6,): order(6),
    }


def test_both_sinks_agree_with_the_source_under_random_load(tmp_path: Path) -> None:
    """Replaying the changelog and reading the Delta mirror both give the source table, with no
    change applied twice, through PK changes, deletes, reinserts and retried batches."""
    rng = random.Random(11)
    feed = Feed()
    json_sink = ChangelogJsonSink(tmp_path / "json")
    delta_sink = DeltaSink(tmp_path / "delta")
    source: dict[int, dict[str, Any]] = {}
    for batch_id in range(10):
        records: list[ChangeRecord] = []
        for _ in range(rng.randint(1, 30)):
            action = rng.random()
            if not source or action < 0.4:
                key = rng.randint(1, 50)
                if key not in source:
                    source[key] = order(
                        key,
                        rng.randint(1, 99),
                        f"2021-09-{rng.randint(10, 28)} 10:00:00.{rng.randint(0, 999):03d}",
                    )
                    records.append(feed.rec("+I", source[key]))
            elif action < 0.75:
                key = rng.choice(sorted(source))
                position = next(feed.pos)
                after = {**source[key], "quantity": rng.randint(1, 99)}
                records += [
                    feed.rec("-U", source[key], pos=position),
                    feed.rec("+U", after, pos=position),
                ]
                source[key] = after
            elif action < 0.85:
                key = rng.choice(sorted(source))
                new = rng.randint(51, 99)
                if new not in source:
                    position = next(feed.pos)
                    before = source.pop(key)
                    source[new] = {**before, "order_id": new}
                    records += [
                        feed.rec("-U", before, pos=position),
                        feed.rec("+U", source[new], pos=position),
                    ]
            else:
                key = rng.choice(sorted(source))
                records.append(feed.rec("-D", source.pop(key)))
        for _ in range(2 if rng.random() < 0.3 else 1):  # some batches are retried
            json_sink.apply_batch(batch_id, SCHEMAS, records)
            delta_sink.apply_batch(batch_id, SCHEMAS, records)
        expected = {(k,): v for k, v in source.items()}
        assert json_sink.replay(ORDERS, KEY, strict=True) == expected
        mirror = table_to_rows(SCHEMA, delta_sink.read_mirror(ORDERS))
        assert {(r["order_id"],): r for r in mirror} == expected
        log = delta_sink.read_changelog(ORDERS)
        assert log.num_rows == sum(1 for _ in json_sink.read_lines(ORDERS))
