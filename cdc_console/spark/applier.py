"""``foreachBatch``: stage, apply to the sinks, then record the batch in SQLite.

A batch is first written to a staging Parquet file and marked *staged*: from then on its content
is fixed, even though re-running its snapshot splits would read different rows at different
watermarks (a first-snapshot chunk's rows are in data files its reader wrote; the staged file
holds their add actions, and ``lake vacuum`` refuses to run beside a staged batch). Then it is applied to the sinks (each Delta commit tagged with the batch number, so a
retried apply is skipped per table), and finally ``commit_batch`` records watermarks, lifecycle and
the committed offset in one transaction. A crash between any two steps resumes from the staged
file, never from a fresh read.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cdc_console.config import PipelineConfig, SourceConfig
from cdc_console.core.chunk import ChunkRange
from cdc_console.core.lifecycle import BatchStatus
from cdc_console.core.mysqltypes import TypeFamily
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.options import SchemaChanges, SinkKind, StartupMode
from cdc_console.core.plan import BatchPlan
from cdc_console.core.reports import SplitResult
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.mysql.key_weights import key_order
from cdc_console.sinks.base import (
    REFUSED,
    InRange,
    KeyBounds,
    KeyRow,
    ReplaceRange,
    SinkStats,
    SnapshotChunk,
    TableBatchSink,
    TypedChunk,
)
from cdc_console.sinks.delta_files import chunk_from_json
from cdc_console.source.committer import commit_batch
from cdc_console.source.reshaped import drop_reshaped
from cdc_console.spark.protocol import (
    CHUNK_OPS,
    CONTROL_OP,
    FILES_OP,
    Reports,
    change_columns,
    read_controls,
    record_count,
    rows_payload,
)
from cdc_console.state.store import StateStore
from cdc_console.values.canonical import canonical_chunk_key

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

CRASH_ENV = "CDC_CONSOLE_CRASH_AT"
#: a wait for the applier's lock shorter than this is no wait for maintenance worth a write
HELD_NOTED_SECONDS = 0.01


def crash_point(name: str, has_data: bool) -> None:
    """Die like ``kill -9`` at a named point when ``CDC_CONSOLE_CRASH_AT`` names it (tests only).

    Lets the crash-recovery tests hit the exact windows that a random kill rarely does: after a
    batch is staged but before the sinks saw it, and after the sinks committed but before the
    state did.
    """
    if has_data and os.environ.get(CRASH_ENV) == name:
        log.warning("crash point %s reached: killing the driver", name)
        os.kill(os.getpid(), signal.SIGKILL)


def make_sink(config: PipelineConfig) -> TableBatchSink:
    if config.sink.kind == SinkKind.CHANGELOG_JSON:
        from cdc_console.sinks.changelog_json import ChangelogJsonSink

        return ChangelogJsonSink(config.sink.path, config.sink.mirrors)
    from cdc_console.sinks.delta import DeltaSink, pipeline_app_id

    return DeltaSink(
        config.sink.path,
        changelog=config.sink.changelog,
        app_id=pipeline_app_id(config.name),
        lake=config.lake,
        names=config.sink.mirrors,
    )


class BatchApplier:
    def __init__(self, config: PipelineConfig, store: StateStore) -> None:
        self.config = config
        self.store = store
        self.sink = make_sink(config)
        self.staging = config.state_path.parent / "staging"
        self.staging.mkdir(parents=True, exist_ok=True)
        self.applied_batches = 0
        self.last_applied_at: float | None = None
        #: held while a batch is applied; lake upkeep runs only when it can take it
        self.lock = threading.Lock()
        #: told of each applied batch: seconds, records, the sink's stats per table (metrics)
        self.on_applied: Callable[[float, int, Mapping[TableId, SinkStats]], None] | None = None
        #: the batch applied while the next one is read (``source.plan_past``), and its failure
        self._applying: threading.Thread | None = None
        self._failure: BaseException | None = None
        #: how long the batch being applied waited for the lock (``_held``)
        self._held_seconds = 0.0

    def __call__(self, df: DataFrame, spark_batch_id: int) -> None:
        table = df.toArrow()
        self.wait_applied()  # batches apply in order: the one before first
        with self._held():
            self.apply_arrow(table, overlap=True)

    @contextmanager
    def _held(self) -> Iterator[None]:
        """The applier's lock; how long taking it waited (for lake maintenance, which holds
        it) is noted on the batch applied under it, for the lag split by stage."""
        clock = time.monotonic()
        with self.lock:
            self._held_seconds = time.monotonic() - clock
            try:
                yield
            finally:
                self._held_seconds = 0.0

    def apply_arrow(self, table: pa.Table, *, overlap: bool = False) -> None:
        """Stage and apply the batch ``table`` carries; with ``overlap``, a batch the planner
        may plan past (``plan_past``) is applied in a thread of its own after it is staged, so
        that the next batch is read meanwhile (``wait_applied`` joins it)."""
        controls = _without_payload(table.filter(pc.equal(table["op"], CONTROL_OP))).to_pylist()
        reports = read_controls(controls)
        batch_numbers = list(reports.batch_numbers)
        if len(batch_numbers) > 1:
            raise RuntimeError(
                f"one Spark batch carried plans {batch_numbers}; the Spark checkpoint and the "
                f"state database {self.store.path} disagree: remove the checkpoint folder "
                f"{self.config.spark.checkpoint} and restart (state resumes on its own)"
            )
        for batch_no in batch_numbers:
            found = self.store.batch(batch_no)
            if found is None:
                raise RuntimeError(f"batch {batch_no} has no plan in {self.store.path}")
            if found.status == BatchStatus.APPLIED:
                log.info("batch %d already applied; replayed data ignored", batch_no)
                continue
            if found.status == BatchStatus.PLANNED:
                past = overlap and plans_past(found.plan, reports)
                self.stage(batch_no, table, plan_past=past, read_seconds=reports.read_seconds)
                crash_point("after-stage", table.num_rows > len(controls))
                if past:
                    self._apply_in_background(batch_no, table)
                else:
                    self.apply_staged(batch_no, just_staged=table)
            else:
                self.apply_staged(batch_no)  # staged before a crash: its file, not this replay

    def stage(
        self,
        batch_no: int,
        table: pa.Table,
        *,
        plan_past: bool = False,
        read_seconds: float | None = None,
    ) -> None:
        path = self.staging / f"batch-{batch_no:09d}.parquet"
        tmp = path.with_suffix(".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, path)
        self.store.mark_staged(
            batch_no,
            str(path),
            record_count(table),
            plan_past=plan_past,
            read_seconds=read_seconds,
        )

    def _apply_in_background(self, batch_no: int, table: pa.Table) -> None:
        def apply() -> None:
            try:
                with self._held():
                    self.apply_staged(batch_no, just_staged=table)
            except BaseException as exc:  # raised to the job by wait_applied / check
                log.error("batch %d failed to apply: %s", batch_no, exc)
                self._failure = exc

        self._applying = threading.Thread(target=apply, name=f"apply-batch-{batch_no}", daemon=True)
        self._applying.start()

    def wait_applied(self, timeout: float | None = None, *, quiet: bool = False) -> bool:
        """Wait for the batch applied in the background, if any; raise its failure unless
        ``quiet`` (the job is failing already). False when it still runs after ``timeout`` s:
        it stays staged, and the next start applies it (``recover``)."""
        thread = self._applying
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                return False
            self._applying = None
        if not quiet:
            self.check()
        return True

    def check(self) -> None:
        """Raise the failure of a batch applied in the background (the job's loop asks)."""
        if self._failure is not None:
            raise self._failure

    def recover(self) -> int:
        """Apply batches a crash left staged; return how many."""
        staged = self.store.staged_batches()
        for batch in staged:
            log.info("recovering staged batch %d", batch.batch_no)
            self.apply_staged(batch.batch_no)
        return len(staged)

    def apply_staged(self, batch_no: int, just_staged: pa.Table | None = None) -> None:
        """Apply a staged batch; ``just_staged`` is the table this process has just written to
        its staged file (not read back), never a replay's (that may differ from the file)."""
        found = self.store.batch(batch_no)
        if found is None or found.staged_path is None:
            raise RuntimeError(f"batch {batch_no} is not staged")
        plan = found.plan
        table = just_staged if just_staged is not None else pq.read_table(found.staged_path)
        ops = table["op"]
        carried = pc.is_in(ops, pa.array(CHUNK_OPS))
        appends = snapshot_chunks(table.filter(carried))
        changes = change_columns(
            table.filter(pc.and_(pc.invert(carried), pc.not_equal(ops, CONTROL_OP)))
        )
        controls = _without_payload(table.filter(pc.equal(ops, CONTROL_OP))).to_pylist()
        reports = read_controls(controls)
        records, window = drop_reshaped(changes, reports.window)
        schemas: dict[TableId, TableSchema] = self.store.schemas()
        replaces = replace_ranges(plan, schemas, self.config.source)
        if self._held_seconds >= HELD_NOTED_SECONDS:
            self.store.note_held(batch_no, self._held_seconds)
        clock = time.monotonic()
        split_results = list(reports.splits)
        # A chunk not read (its table changed shape) must not empty its key range.
        unread = {r.split_id for r in split_results if r.reshaped or r.failed}
        replaces = [r for r in replaces if r.split_id not in unread]
        has_data = bool(records or replaces or appends or plan.reshaped)
        position = batch_position(plan, split_results)
        info = {"cdc_console.position": str(position)} if position is not None else None
        stats = (
            self.sink.apply_batch(
                batch_no,
                schemas,
                records,
                replaces,
                appends,
                commit_info=info,
                isolate=True,
                reshaped=plan.reshaped,
            )
            if has_data
            else {}
        )
        crash_point("after-sink", has_data)
        if has_data and self.sink.commit_seconds:
            self.store.note_table_seconds(
                batch_no, {str(t): s for t, s in self.sink.commit_seconds.items()}
            )
        refused = {str(t): str(s[REFUSED]) for t, s in stats.items() if s.get(REFUSED)}
        commit_batch(
            self.store,
            plan,
            split_results,
            window,
            snapshot_only=self.config.snapshot.startup_mode == StartupMode.SNAPSHOT_ONLY,
            evolve=self.config.schema_changes == SchemaChanges.EVOLVE,
            refused=refused,
        )
        Path(found.staged_path).unlink(missing_ok=True)
        self.applied_batches += 1
        self.last_applied_at = time.time()
        appended = sum(chunk_rows(c) for chunks in appends.values() for c in chunks)
        if self.on_applied is not None:
            self.on_applied(time.monotonic() - clock, len(records) + appended, stats)
        log.info(
            "batch %d applied: %d changes, %d snapshot rows appended (%s) in %.0f ms",
            batch_no,
            len(records),
            appended,
            ", ".join(f"{t}: {s}" for t, s in stats.items()) or "no data",
            (time.monotonic() - clock) * 1000,
        )


def plans_past(plan: BatchPlan, reports: Reports) -> bool:
    """Whether the next batch may be planned before this one is applied
    (``source.plan_past``): a binlog window only, in which no table changed shape."""
    window = reports.window
    return (
        not plan.snapshot
        and plan.binlog is not None
        and (window is None or not window.schema_changes)
    )


def batch_position(plan: BatchPlan, splits: list[SplitResult]) -> BinlogOffset | None:
    """Where in the binlog a batch's changes end: its window's end, else its chunks' last high
    watermark. Recorded in each Delta commit, so a mirror version maps to a binlog position."""
    if plan.binlog is not None:
        return plan.binlog.end
    marks = [s.high_watermark for s in splits if not s.failed]
    return max(marks) if marks else None


def _without_payload(table: pa.Table) -> pa.Table:
    return table.drop_columns(["payload"]) if "payload" in table.column_names else table


def snapshot_chunks(rows: pa.Table) -> dict[TableId, list[SnapshotChunk]]:
    """The batch's ``ROWS`` and ``FILES`` records per table, in batch order, decoded."""
    chunks: dict[TableId, list[SnapshotChunk]] = {}
    if rows.num_rows == 0:
        return chunks
    meta = _without_payload(rows).to_pylist()
    for record, payload in zip(meta, rows.column("payload").to_pylist(), strict=True):
        chunk: SnapshotChunk
        if record["op"] == FILES_OP:
            chunk = chunk_from_json(payload)
        else:
            chunk = TypedChunk(
                split_id=record["split_id"],
                position=(record["file_index"], record["pos"], record["event_index"], 0),
                ts_ms=record["ts_ms"],
                rows=rows_payload(payload),
            )
        chunks.setdefault(TableId(record["database"], record["table"]), []).append(chunk)
    return chunks


def chunk_rows(chunk: SnapshotChunk) -> int:
    return chunk.rows.num_rows if isinstance(chunk, TypedChunk) else chunk.rows


def replace_ranges(
    plan: BatchPlan,
    schemas: Mapping[TableId, TableSchema],
    source: SourceConfig | None = None,
) -> list[ReplaceRange]:
    """The range replaces of a batch's re-dump chunks: each split's key range, in the server's
    order for its chunk key, over the canonical key values the sinks hold."""
    replaces: list[ReplaceRange] = []
    for planned in plan.snapshot:
        if not planned.replace:
            continue
        split = planned.split
        schema = schemas[split.table_id]
        column = schema.column(split.chunk_key)
        replaces.append(
            ReplaceRange(
                split.table_id,
                split.split_id,
                _of_origin(schema, _range_test(split.range, column, split.chunk_key, source)),
                ts_ms=int(time.time() * 1000),
                bounds=_integer_bounds(split.range, column, split.chunk_key),
            )
        )
    return replaces


def _integer_bounds(chunk: ChunkRange, column: ColumnInfo, name: str) -> KeyBounds | None:
    """The chunk's range as ``KeyBounds`` when its key is an integer column, else None."""
    if column.family != TypeFamily.INTEGER:
        return None
    ends: list[int | None] = []
    for end in (chunk.start, chunk.end):
        if end is not None and (not isinstance(end, int) or isinstance(end, bool)):
            return None
        ends.append(end)
    return KeyBounds(name, ends[0], ends[1])


def _of_origin(schema: TableSchema, in_range: InRange) -> InRange:
    """``in_range``, of the table's own rows only where its mirror holds other tables' rows
    too (``TableSchema.routed``): a re-dump of one shard replaces that shard's rows alone."""
    origin = schema.origin
    if not origin:
        return in_range

    def own_in_range(key_row: KeyRow) -> bool:
        return all(key_row.get(k) == v for k, v in origin.items()) and in_range(key_row)

    return own_in_range


def _range_test(
    chunk: ChunkRange, column: ColumnInfo, name: str, source: SourceConfig | None
) -> InRange:
    order = key_order(column, source)

    def in_range(key_row: KeyRow) -> bool:
        return chunk.contains(canonical_chunk_key(column, key_row[name]), order)

    return in_range
