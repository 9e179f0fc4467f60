"""``Verifier``: is every chunk of a mirror equal to its source, while both keep moving?

Nothing is locked or paused. For a group of consecutive chunks of one streaming table:

1. each chunk is read from the source exactly as a snapshot reads it (``SnapshotSplitReader``:
   low watermark, SELECT, high watermark HWi, backfill), so it is the chunk's state at HWi;
2. the mirror's rows in the group's key range are read with the position P before which it
   holds every change of the table (``verify.mirror``); a snapshot-only mirror (SNAPSHOT_DONE)
   is never written after its snapshot, so each of its chunks stands at its own high watermark;
3. the server's head H is read, and the binlog ``[min(P, HWi), H)`` of the table is folded onto
   both sides: onto chunk i the changes at or after HWi (the snapshot reader's own rule for what
   a chunk has not seen), onto the mirror those at or after P. Both sides are then the table's
   state at H, so they must be equal: every difference is a real one, never a change in flight;
4. the two are compared in the mirror's Arrow types (``verify.compare``).

Chunks that differ are verified once more on their own before anything is reported, as
Ghostferry's iterative verifier does, and only keys that differ both times are reported: a
guard against anything the exact procedure above does not foresee.

The source is read with a server id of its own (the last of ``source.server_id``, beyond the
job's readers), at most ``rows_per_second``, and not at all while it is busier than ``[source]
max_load`` allows (``source.throttle``): the next chunk waits, with backoff, journaled.
"""

from __future__ import annotations

import fcntl
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import pyarrow as pa

from cdc_console.config import PipelineConfig, SourceConfig
from cdc_console.core.lifecycle import Lifecycle, SplitStatus, Verdict
from cdc_console.core.mysqltypes import TypeFamily
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.options import SinkKind
from cdc_console.core.schema import TableId, TableSchema, companions_of
from cdc_console.core.splits import SnapshotSplit
from cdc_console.errors import CdcError, ConfigError, redact
from cdc_console.mysql.connection import close_quietly, connect
from cdc_console.mysql.key_weights import key_order
from cdc_console.mysql.position import current_position
from cdc_console.mysql.snapshot_arrow import SnapshotArrowBuilder
from cdc_console.mysql.source_load import read_load
from cdc_console.sinks.lake_layout import mirror_path
from cdc_console.source.snapshot_reader import SnapshotSplitReader, open_text_mode
from cdc_console.source.throttle import LoadThrottle
from cdc_console.state.store import StateStore, TableState, VerifyProgress
from cdc_console.status import skip_reason
from cdc_console.values.arrow import rows_to_table
from cdc_console.values.canonical import canonical_chunk_key
from cdc_console.verify.compare import Difference, Fold, compare, overlay
from cdc_console.verify.fold_window import SourceChunk, fold_window
from cdc_console.verify.mirror import MirrorNotReady, MirrorReader, MirrorSnapshot
from cdc_console.verify.report import ChunkResult, TableResult, VerifyReport, hidden_columns

log = logging.getLogger(__name__)

T = TypeVar("T")

#: rows of consecutive chunks compared at once (integer chunk keys; others compare whole)
GROUP_ROWS = 200_000
#: seconds between a chunk's first verdict "differs" and its re-check
RECHECK_AFTER = 1.0
#: the longest wait between two looks at a busy source's load
LOAD_WAIT_CAP = 10.0


@contextmanager
def exclusive(config: PipelineConfig) -> Iterator[None]:
    """Hold the pipeline's verification lock: two verifications at once would read the binlog
    with one server id, and the server drops the older of two such connections."""
    path = config.state_path.parent / "verify.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CdcError(
                f"another verification of {config.name} is running",
                "wait for it: its verdicts appear in 'cdc-console status' and the console",
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def verify_server_id(config: PipelineConfig) -> int:
    """The binlog server id verification reads with: one the job never uses."""
    ids = config.source.server_ids
    if len(ids) < config.snapshot.parallelism + 2:
        low = config.source.server_id_min
        raise ConfigError(
            f"source.server_id has {len(ids)} ids, all taken by the job (one binlog reader and "
            f"{config.snapshot.parallelism} chunk readers); verify needs one more",
            f'widen it, e.g. server_id = "{low}-{low + config.snapshot.parallelism + 2}"',
        )
    return ids[-1]


@dataclass
class _Checked:
    """A table after its first comparison: the result so far, and what a recheck needs."""

    result: TableResult
    schema: TableSchema | None = None
    splits: list[SnapshotSplit] = field(default_factory=list)
    rows: dict[int, int] = field(default_factory=dict)
    marks: dict[int, BinlogOffset | None] = field(default_factory=dict)

    def differing(self) -> list[ChunkResult]:
        return [c for c in self.result.chunks if c.verdict == Verdict.DIFFERS]


class Verifier:
    """Verifies tables of one pipeline; see the module docstring. Not thread-safe."""

    def __init__(
        self,
        config: PipelineConfig,
        store: StateStore,
        *,
        rows_per_second: int | None = None,
        group_rows: int = GROUP_ROWS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if config.sink.kind != SinkKind.DELTA:
            raise ConfigError(
                f"only Delta mirrors can be verified, not sink.kind = '{config.sink.kind}'",
                'verify needs [sink] kind = "delta"',
            )
        self.config = config
        self.store = store
        self.server_id = verify_server_id(config)
        rate = config.verify.rows_per_second if rows_per_second is None else rows_per_second
        self.rows_per_second = max(0, rate)
        self.group_rows = group_rows
        self._sleep = sleep
        self._paced_rows = 0
        self._paced_since = time.monotonic()
        #: chunks whose first comparison differed and were compared again
        self.rechecked = 0
        #: the table being verified: each finished chunk's rows and high watermark
        self._rows: dict[int, int] = {}
        self._marks: dict[int, BinlogOffset | None] = {}
        #: the verification under way, as the state shows it (its finish-time estimate)
        self._progress: VerifyProgress | None = None

    # -- entry points ---------------------------------------------------------------------

    def run(
        self, tables: Sequence[TableId] | None = None, chunk: int | None = None
    ) -> VerifyReport:
        """Verify every table (or ``tables``); chunks that differ are compared once more after
        one pause shared by all tables, so that a change in flight is not reported."""
        started = time.monotonic()
        picked = tables_to_verify(self.store, tables)
        only = [chunk] if chunk is not None else None
        checked: list[_Checked] = []
        with self._progress_over(picked, only):
            for table in picked:
                checked.append(self._check(table, only))
            if any(c.differing() for c in checked):
                self._sleep(RECHECK_AFTER)
            for found in checked:
                self._recheck(found)
                self._record(found.result)
        return VerifyReport([c.result for c in checked], time.monotonic() - started)

    def verify_table(self, table: TableState, chunks: list[int] | None = None) -> TableResult:
        with self._progress_over([table], chunks):
            found = self._check(table, chunks)
            if found.differing():
                self._sleep(RECHECK_AFTER)
            self._recheck(found)
            self._record(found.result)
        return found.result

    @contextmanager
    def _progress_over(
        self, tables: Sequence[TableState], chunks: list[int] | None
    ) -> Iterator[None]:
        """Record the verification's progress in the state while it runs, for its finish-time
        estimate (``figures.verify_estimate``): the chunks it is to compare (each finished chunk
        of a table that is not skipped), then each group as it is first compared."""
        total = chunks_to_compare(self.store, tables, chunks)
        self._progress = _told(partial(self.store.begin_verify, total))
        try:
            yield
        finally:
            self._progress = None
            _told(self.store.end_verify)

    def _check(self, table: TableState, chunks: list[int] | None) -> _Checked:
        """The first comparison of a table's (or some of its) chunks."""
        table_id = table.table_id
        reason = skip_reason(table)
        schema = self.store.schemas().get(table_id)
        if not reason and schema is None:
            reason = "no schema recorded by the job yet"
        if reason:
            log.info("verify %s: skipped: %s", table_id, reason)
            return _Checked(TableResult(table_id, skipped=reason))
        assert schema is not None
        hide = hidden_columns(table_id, schema.row_names, self.config.verify.hide_values)
        # a hidden date column's companion holds the same date as text
        hide |= {c.name for c in companions_of(schema.column(n) for n in hide)}
        result = TableResult(table_id, tuple(schema.key_columns), hide=hide)
        finished = [s for s in self.store.splits(table_id) if s.status == SplitStatus.FINISHED]
        # read once per table: chunk sizes group the chunks, watermarks place snapshot-only ones
        rows = {s.split.split_no: s.rows or 0 for s in finished}
        marks = {s.split.split_no: s.high_watermark for s in finished}
        self._rows, self._marks = rows, marks
        splits = [s.split for s in finished]
        if chunks is not None:
            splits = [s for s in splits if s.split_no in chunks]
            if not splits:
                result.error = f"it has no finished chunk {chunks[0]}"
                return _Checked(result)
        if not splits:
            # captured with startup_mode latest-offset: no chunks, so no key ranges to compare
            result.skipped = "it has no snapshot chunks (captured without a snapshot)"
            return _Checked(result)
        found = _Checked(result, schema, splits, rows, marks)
        self._guarded(
            found,
            lambda: setattr(result, "chunks", self._verify_splits(schema, splits, counted=True)),
        )
        return found

    def _recheck(self, found: _Checked) -> None:
        """Compare the chunks that differed once more: only what differs twice counts."""
        differing = found.differing()
        if not differing or found.schema is None:
            return
        schema, result = found.schema, found.result
        self._rows, self._marks = found.rows, found.marks
        self.rechecked += len(differing)

        def again() -> None:
            numbers = {c.split_no for c in differing}
            second = {
                c.split_no: c
                for s in found.splits
                if s.split_no in numbers
                for c in self._verify_splits(schema, [s])
            }
            result.chunks = [_confirmed(c, second.get(c.split_no)) for c in result.chunks]

        self._guarded(found, again)

    def _guarded(self, found: _Checked, step: Callable[[], None]) -> None:
        """Run one comparison step; a mirror not ready skips the table, a failure is its error."""
        result = found.result
        try:
            step()
        except MirrorNotReady as exc:
            result.chunks = []
            result.skipped = str(exc)
        except Exception as exc:
            log.debug("verify %s failed", result.table_id, exc_info=True)
            result.chunks = []
            result.error = redact(f"{type(exc).__name__}: {exc}".splitlines()[0])

    def _record(self, result: TableResult) -> None:
        for chunk in result.chunks:
            self.store.record_verification(chunk.state_row(result.hide))
        message, level = result.journal_entry()
        self.store.log_event("verify", message, level=level, table_id=result.table_id)

    # -- one table ------------------------------------------------------------------------

    def _verify_splits(
        self, schema: TableSchema, splits: list[SnapshotSplit], *, counted: bool = False
    ) -> list[ChunkResult]:
        """Compare ``splits`` group by group; ``counted``: the first comparison, which the
        verification's progress counts (a second look at differing chunks is not)."""
        out: list[ChunkResult] = []
        for group in chunk_groups(schema, splits, self._rows, self.group_rows):
            began = time.time()
            out.extend(self._verify_group(schema, group))
            if counted and self._progress is not None:
                note = self.store.note_verified
                self._progress = _told(partial(note, self._progress, len(group), began))
        return out

    def _verify_group(self, schema: TableSchema, splits: list[SnapshotSplit]) -> list[ChunkResult]:
        source = self.config.source
        table_id = schema.table_id
        chunks: list[SourceChunk] = []
        conn = open_text_mode(source)
        try:
            reader = SnapshotSplitReader(
                source, schema, self.server_id, connection=conn, text_mode=True
            )
            builder = SnapshotArrowBuilder(schema)
            throttle = LoadThrottle(
                dict(source.max_load),
                lambda names: read_load(conn, names),
                self.store,
                what=f"verify reads of {table_id}",
                keep=False,
            )
            for split in splits:
                self._yield_to_load(throttle)
                clock = time.monotonic()
                read = reader.read(split)
                rows = (
                    builder.table(read.raw)
                    if read.raw is not None
                    else rows_to_table(schema, read.rows)
                )
                chunks.append(
                    SourceChunk(split, rows, read.high_watermark, time.monotonic() - clock)
                )
                self._pace(rows.num_rows)
        finally:
            close_quietly(conn)
        clock = time.monotonic()
        ranges = [s.range for s in splits]
        mirror = MirrorReader(
            self.store,
            str(mirror_path(self.config.sink.path, table_id, self.config.sink.mirrors)),
            self.config.name,
            self.config.source,
            self.config.sink.mirrors,
        ).read(schema, ranges)
        head, sides, mirror_rows = self._at_head(schema, chunks, mirror)
        source_rows = pa.concat_tables(sides) if sides else rows_to_table(schema, [])
        differences = compare(schema, source_rows, mirror_rows)
        shared = time.monotonic() - clock
        by_chunk = _by_chunk(schema, splits, differences, self.config.source)
        total = max(1, source_rows.num_rows)
        now = time.time()
        log.info(
            "verify %s chunks %s: %d rows at %s (mirror at %s, batch version %d): %d differ",
            table_id,
            ",".join(str(s.split_no) for s in splits),
            source_rows.num_rows,
            head,
            mirror.position or "each chunk's high watermark",
            mirror.version,
            len(differences),
        )
        return [
            ChunkResult(
                table_id,
                c.split.split_no,
                str(c.split.range),
                Verdict.DIFFERS if by_chunk.get(c.split.split_no) else Verdict.EQUAL,
                rows=side.num_rows,
                differences=by_chunk.get(c.split.split_no, []),
                position=head,
                seconds=c.seconds + shared * side.num_rows / total,
                verified_at=now,
            )
            for c, side in zip(chunks, sides, strict=True)
        ]

    def _at_head(
        self, schema: TableSchema, chunks: list[SourceChunk], mirror: MirrorSnapshot
    ) -> tuple[BinlogOffset, list[pa.Table], pa.Table]:
        """Both sides brought to the server's head (step 3): the head, each chunk's rows and
        the mirror's rows there."""
        head_conn = connect(self.config.source)
        try:
            head = current_position(head_conn)
        finally:
            close_quietly(head_conn)
        source_folds = [Fold() for _ in chunks]
        mirror_fold = Fold()
        if mirror.position is not None:
            mirror_at = [mirror.position] * len(chunks)
        else:
            mirror_at = [self._snapshot_watermark(c.split) for c in chunks]
        start = min([*mirror_at, *(c.high_watermark for c in chunks)])
        if start < head:
            folds = (source_folds, mirror_fold, mirror_at)
            fold_window(self.config.source, self.server_id, schema, chunks, *folds, start, head)
        sides = [overlay(schema, c.rows, f) for c, f in zip(chunks, source_folds, strict=True)]
        return head, sides, overlay(schema, mirror.rows, mirror_fold)

    def _snapshot_watermark(self, split: SnapshotSplit) -> BinlogOffset:
        """Where a snapshot-only mirror's chunk stands: the high watermark it was read at."""
        mark = self._marks.get(split.split_no)
        if mark is not None:
            return mark
        raise MirrorNotReady(f"chunk {split.split_no} of {split.table_id} has no high watermark")

    def _yield_to_load(self, throttle: LoadThrottle) -> None:
        """Wait, with backoff, while the source is busier than ``[source] max_load`` allows."""
        delay = 1.0
        while throttle.reason() is not None:
            self._sleep(delay)
            delay = min(LOAD_WAIT_CAP, delay * 2)
        throttle.clear()

    def _pace(self, rows: int) -> None:
        """Sleep as needed to keep to ``rows_per_second`` over the whole run."""
        if not self.rows_per_second:
            return
        self._paced_rows += rows
        due = self._paced_rows / self.rows_per_second
        elapsed = time.monotonic() - self._paced_since
        if due > elapsed:
            self._sleep(due - elapsed)


def _by_chunk(
    schema: TableSchema,
    splits: list[SnapshotSplit],
    differences: list[Difference],
    source: SourceConfig | None = None,
) -> dict[int, list[Difference]]:
    """The differences per chunk number, by where each key's chunk key falls."""
    column = schema.column(schema.chunk_key)
    order = key_order(column, source)
    out: dict[int, list[Difference]] = {}
    for difference in differences:
        key = canonical_chunk_key(column, difference.chunk_value)
        for split in splits:
            if split.range.contains(key, order):
                out.setdefault(split.split_no, []).append(difference)
                break
    return out


def _confirmed(first: ChunkResult, again: ChunkResult | None) -> ChunkResult:
    """A chunk's re-check: only keys that differed both times still count."""
    if first.verdict != Verdict.DIFFERS or again is None:
        return first
    if again.verdict != Verdict.DIFFERS:
        return again
    keys = {(d.kind, d.key) for d in first.differences}
    again.differences = [d for d in again.differences if (d.kind, d.key) in keys]
    if not again.differences:
        again.verdict = Verdict.EQUAL
    return again


def _told(record: Callable[[], T]) -> T | None:
    """Record the verification's progress; a state that cannot take it (locked, full) costs
    the estimate, never the verification: the progress is no longer recorded for the rest of
    this verification, and its end still clears it."""
    try:
        return record()
    except sqlite3.Error as exc:
        log.warning("verify: progress not recorded: %s", exc)
        return None


def chunk_groups(
    schema: TableSchema, splits: list[SnapshotSplit], counts: Mapping[int, int], group_rows: int
) -> list[list[SnapshotSplit]]:
    """Consecutive chunks up to ``group_rows`` rows (by their snapshot ``counts``); one group for
    a key compared by collation, whose mirror range can only be filtered row by row."""
    column = schema.column(schema.chunk_key)
    if column.family != TypeFamily.INTEGER:
        return [splits] if splits else []
    groups: list[list[SnapshotSplit]] = []
    current: list[SnapshotSplit] = []
    rows = 0
    # in key order: a chunk split again as its table grew has a later number
    ordered = sorted(splits, key=lambda s: (s.range.start is not None, s.range.start or 0))
    for split in ordered:
        contiguous = not current or current[-1].range.end == split.range.start
        if current and (rows >= group_rows or not contiguous):
            groups.append(current)
            current, rows = [], 0
        current.append(split)
        rows += counts.get(split.split_no, 0)
    if current:
        groups.append(current)
    return groups


def chunks_to_compare(
    store: StateStore, tables: Sequence[TableState], chunks: list[int] | None
) -> int:
    """The finished chunks of the tables not skipped (of ``chunks`` only, when given)."""
    total = 0
    for table in tables:
        if skip_reason(table):
            continue
        total += sum(
            1
            for s in store.splits(table.table_id)
            if s.status == SplitStatus.FINISHED and (chunks is None or s.split.split_no in chunks)
        )
    return total


def tables_to_verify(store: StateStore, tables: Sequence[TableId] | None) -> list[TableState]:
    """The named tables, or every captured table that is not removed."""
    wanted = {str(t) for t in tables} if tables else None
    return [
        table
        for table in store.tables()
        if (
            str(table.table_id) in wanted
            if wanted is not None
            else table.state != Lifecycle.REMOVED
        )
    ]
