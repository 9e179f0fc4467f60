"""The latency bench's watcher tails the mirror's Delta log as a streaming reader would: each
row is timed against the commit of the version that first brought it, however many versions
landed between two polls, and a compaction's re-added rows change nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from cdc_console.bench.latency import _MirrorWatcher


def _rows(ids: list[int], sent_at: float) -> pa.Table:
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "sent_at": pa.array([sent_at] * len(ids), pa.float64())}
    )


def _commit_times(path: Path) -> dict[int, float]:
    return {
        int(entry["version"]): float(entry["timestamp"]) / 1000.0
        for entry in DeltaTable(str(path)).history()
    }


def _watch_until(watcher: _MirrorWatcher, count: int) -> None:
    deadline = time.monotonic() + 10
    while watcher.arrived() < count and time.monotonic() < deadline:
        time.sleep(0.02)


def test_each_row_is_timed_by_the_version_that_brought_it(tmp_path: Path) -> None:
    path = tmp_path / "mirror"
    watcher = _MirrorWatcher(path)
    watcher.start()  # before the table exists, as when the job has not created it yet
    try:
        time.sleep(0.1)
        write_deltalake(str(path), _rows([1, 2, 4], 100.0))
        write_deltalake(str(path), _rows([3], 200.0), mode="append")
        write_deltalake(str(path), _rows([5, 6], 300.0), mode="append")
        DeltaTable(str(path)).optimize.compact()  # re-adds every row, dataChange false
        _watch_until(watcher, 6)
        time.sleep(0.2)  # the compaction's commit read too
    finally:
        watcher.stop()
    at = _commit_times(path)
    assert sorted(at) == [0, 1, 2, 3]
    expected = {1: at[0] - 100, 2: at[0] - 100, 4: at[0] - 100, 3: at[1] - 200}
    expected |= {5: at[2] - 300, 6: at[2] - 300}
    assert watcher.arrived() == 6
    assert watcher.latencies_between(0, 6) == [expected[key] for key in (1, 2, 4, 3, 5, 6)]
    assert watcher.max_id == 6
    assert watcher.next_missing == 7
