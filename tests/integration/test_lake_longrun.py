"""A lake that lives under a steady change load: write amplification and disk stay bounded.

A hundred batches into a 1M-row mirror, through the job's own sink and upkeep: 50 changes a
batch (updates of random existing keys, inserts at the tail, deletes), the scheduled compaction and
vacuum between batches. The upkeep's clock is simulated (the job's two ticks a second, 0.3 s each),
so the schedule fires the same number of times on a fast machine and a slow one. No server is needed: the sink takes the change records a binlog reader
would produce, which keeps the test about the lake. It checks three things a lake that runs for
months needs: a MERGE copies about one file's rows per changed row, not the table's; after
maintenance the folder holds at most about twice the live data; the mirror equals the model.

Figures from a run on the project's 2-core machine are printed (``-s`` shows them) and in the
README; only the bounds are asserted.
"""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from cdc_console.config import config_from_dict
from cdc_console.core.records import ChangeRecord
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.sinks.base import TypedChunk
from cdc_console.sinks.delta import DeltaSink
from cdc_console.sinks.maintenance import LakeTable, footprint, optimize, vacuum
from cdc_console.sinks.mirror_read import read_delta
from cdc_console.spark.lake_upkeep import LakeUpkeep
from cdc_console.state.store import StateStore
from cdc_console.values.arrow import arrow_schema, rows_to_table

ROWS = 1_000_000
CHUNK = 8096
BATCHES = int(__import__("os").environ.get("LAKE_LONGRUN_BATCHES", 100))
TICK_SECONDS = 0.3
PER_BATCH = (40, 8, 2)  # updates, inserts, deletes
ORDERS = TableId("shop", "orders")
SCHEMA = TableSchema(
    ORDERS,
    (
        ColumnInfo("id", "bigint", "bigint(20)", nullable=False, numeric_precision=19),
        ColumnInfo("name", "varchar", "varchar(50)"),
        ColumnInfo("amount", "decimal", "decimal(12,2)", numeric_precision=12, numeric_scale=2),
        ColumnInfo("updated", "datetime", "datetime(6)", datetime_precision=6),
    ),
    ("id",),
    "id",
)


def seed_chunk(first: int, last: int) -> pa.Table:
    ids = pa.array(range(first, last), pa.int64())
    return pa.Table.from_arrays(
        [
            ids,
            pc.binary_join_element_wise("customer-", pc.cast(ids, pa.string()), ""),
            pc.cast(pc.cast(pc.divide(ids, 7), pa.int32()), pa.decimal128(12, 2)),
            pc.cast(pc.add(ids, 1_700_000_000_000_000), pa.timestamp("us")),
        ],
        schema=arrow_schema(SCHEMA),
    )


def row(key: int, version: int) -> dict[str, Any]:
    return {
        "id": key,
        "name": f"customer-{key}-v{version}",
        "amount": f"{key % 9973}.{version % 100:02d}",
        "updated": f"2026-11-24 10:{version // 60 % 60:02d}:{version % 60:02d}.{key % 10**6:06d}",
    }


class Load:
    """Change records with growing positions, and the model of what the mirror must hold."""

    def __init__(self) -> None:
        self.rng = random.Random(20261124)
        self.pos = 1000
        self.seq = 0
        self.next_key = ROWS
        self.live = list(range(ROWS))  # keys present (the model's key set, unordered)
        self.index = {k: i for i, k in enumerate(self.live)}
        self.changed: dict[int, dict[str, Any] | None] = {}

    def record(self, op: str, image: dict[str, Any]) -> ChangeRecord:
        self.seq += 1
        return ChangeRecord(
            database="shop",
            table="orders",
            op=op,
            key=json.dumps([image["id"]]),
            row=json.dumps(image),
            file_index=1,
            pos=self.pos,
            event_index=0,
            row_index=0,
            seq=self.seq,
            ts_ms=0,
            split_id="",
        )

    def _drop(self, key: int) -> None:
        at = self.index.pop(key)
        last = self.live.pop()
        if last != key:
            self.live[at] = last
            self.index[last] = at

    def batch(self, number: int) -> list[ChangeRecord]:
        updates, inserts, deletes = PER_BATCH
        records: list[ChangeRecord] = []
        for _ in range(updates):
            self.pos += 10
            key = self.rng.choice(self.live)
            before = self.changed.get(key) or row(key, 0)
            after = row(key, number)
            records += [self.record("-U", before), self.record("+U", after)]
            self.changed[key] = after
        for _ in range(inserts):
            self.pos += 10
            key = self.next_key
            self.next_key += 1
            self.changed[key] = row(key, number)
            self.live.append(key)
            self.index[key] = len(self.live) - 1
            records.append(self.record("+I", self.changed[key]))
        for _ in range(deletes):
            self.pos += 10
            key = self.rng.choice(self.live)
            records.append(self.record("-D", self.changed.get(key) or row(key, 0)))
            self.changed[key] = None
            self._drop(key)
        return records


def test_steady_changes_into_a_million_rows_keep_amplification_and_disk_bounded(
    tmp_path: Path,
) -> None:
    config = config_from_dict(
        {
            "source": {"tables": ["shop.orders"]},
            "sink": {"path": str(tmp_path / "lake"), "changelog": False},
            "state": {"path": str(tmp_path / "state.sqlite")},
            "lake": {
                "optimize_every": "30s",
                "vacuum_every": "30s",
                "vacuum_retention_hours": 0,
                "log_retention_hours": 0,
            },
        }
    )
    sink = DeltaSink(config.sink.path, changelog=False, lake=config.lake)
    chunks = [
        TypedChunk(
            f"shop.orders:{n}", (1, 500, 0, 0), 0, seed_chunk(first, min(first + CHUNK, ROWS))
        )
        for n, first in enumerate(range(0, ROWS, CHUNK))
    ]
    sink.apply_batch(1, {ORDERS: SCHEMA}, [], appends={ORDERS: chunks})
    del chunks
    table = LakeTable("shop.orders", "mirror", sink.mirror_path(ORDERS))
    start = footprint(table, config.lake.target_file_size)
    rows_per_file = start.rows / start.files

    store = StateStore(config.state_path)
    lock = threading.Lock()
    simulated = [0.0]
    upkeep = LakeUpkeep(config, store, lock, clock=lambda: simulated[0])
    load = Load()
    copied: list[float] = []
    apply_ms: list[float] = []
    maintenance = []
    number = 2
    began = time.monotonic()
    while number - 2 < BATCHES:
        records = load.batch(number)
        with lock:
            clock = time.monotonic()
            stats = sink.apply_batch(number, {ORDERS: SCHEMA}, records)[ORDERS]
            apply_ms.append((time.monotonic() - clock) * 1000)
        changed = stats["updated"] + stats["deleted"] + stats["inserted"]
        copied.append(stats["rows_copied"] / changed)
        number += 1
        for _ in range(2):  # the driver ticks twice a second
            simulated[0] += TICK_SECONDS
            done = upkeep.tick()
            if done is not None:
                maintenance.append(done)
    seconds = time.monotonic() - began
    optimize(table, config.lake)
    vacuum(table, config.lake)
    end = footprint(table, config.lake.target_file_size)

    mean_copied = statistics.fmean(copied)
    print(
        f"\n{number - 2} batches of {sum(PER_BATCH)} changes into {ROWS:,} rows in {seconds:.0f} s; "
        f"{start.files} files of ~{rows_per_file:,.0f} rows at the start, {end.files} at the end\n"
        f"rows copied per changed row: mean {mean_copied:,.0f}, p50 "
        f"{statistics.median(copied):,.0f}, max {max(copied):,.0f} "
        f"(one file for the table: {ROWS / sum(PER_BATCH):,.0f})\n"
        f"apply per batch: p50 {statistics.median(apply_ms):.0f} ms, p99 "
        f"{statistics.quantiles(apply_ms, n=100)[98]:.0f} ms\n"
        f"after maintenance: {end.disk_bytes / 2**20:.1f} MiB on disk for "
        f"{end.live_bytes / 2**20:.1f} MiB live ({end.amplification:.2f}x); "
        f"{sum(1 for m in maintenance if m.action == 'optimize')} compactions and "
        f"{sum(1 for m in maintenance if m.action == 'vacuum')} vacuums ran between batches"
    )
    assert number - 2 >= 100, "the load ran: at least 100 batches"
    assert {m.action for m in maintenance} == {"optimize", "vacuum"}, "scheduled upkeep ran"
    # Copy-on-write copies about one file's rows per touched file; a MERGE that wrote its
    # output into one file (no target size) would drift towards the whole table per batch.
    assert mean_copied <= 1.5 * rows_per_file, (mean_copied, rows_per_file)
    assert end.amplification <= 2.0, end
    assert end.files <= 2 * start.files, (start, end)

    mirror = read_delta(DeltaTable(str(table.path))).cast(arrow_schema(SCHEMA))
    unchanged = [k for k in range(ROWS) if k not in load.changed]
    present = [r for r in load.changed.values() if r is not None]
    expected = pa.concat_tables(
        [
            pa.concat_tables(seed_chunk(f, min(f + CHUNK, ROWS)) for f in range(0, ROWS, CHUNK))
            .filter(pc.is_in(pc.field("id"), pa.array(unchanged, pa.int64())))
            .cast(arrow_schema(SCHEMA)),
            rows_to_table(SCHEMA, present),
        ]
    )
    assert mirror.num_rows == len(load.live)
    assert mirror.sort_by("id").equals(expected.sort_by("id").combine_chunks())
