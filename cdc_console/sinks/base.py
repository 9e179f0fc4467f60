"""What every sink shares: the batch's per-table loop, key types, range replaces and errors.

A sink applies a micro-batch table by table; ``TableBatchSink.apply_batch`` groups the records,
checks each table has a schema, and hands each table's records and range replaces to the sink's
own ``_apply_table``, which must be idempotent per ``batch_id``.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cdc_console.core.records import ChangeRecord
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.values import CanonicalValue
from cdc_console.errors import redact

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

Key = tuple[CanonicalValue, ...]  # canonical key values in key_columns order
Position = tuple[int, int, int, int]  # file_index, pos, event_index, row_index
KeyRow = Mapping[str, CanonicalValue]
InRange = Callable[[KeyRow], bool]
#: what a sink did for one table in one batch: row and file counts, skip flags, a file written
SinkStats = dict[str, int | bool | str | None]


#: ``SinkStats`` key of a table whose share of the batch the sink refused: why
REFUSED = "refused"


class SinkError(RuntimeError):
    """The sink cannot apply a batch (bad input, unsupported table); retrying will not help."""


class SinkSchemaError(SinkError):
    """An existing Delta table's schema differs from the source table's typed schema."""


@dataclass(frozen=True)
class KeyBounds:
    """An integer key column's values in ``[start, end)`` (None: unbounded).

    A hint beside ``ReplaceRange.in_range``: it lets a sink read only that part of a table
    (Delta prunes files by their key statistics) instead of testing every key in Python; the
    rows it lets through are still tested with ``in_range``, which stays the authority. Only
    for integer keys, whose server order is their numeric order.
    """

    column: str
    start: int | None
    end: int | None


@dataclass(frozen=True)
class ReplaceRange:
    """Replace a key range of a mirror with one snapshot split's rows (REDUMP, chunk repair).

    The split's rows are its range's state as of its high watermark (HW). So at ``position`` (the
    HW) every key the table holds at that point -- the mirror's keys plus those the batch upserted
    before HW -- for which ``in_range(key_row)`` is true and that no record of split ``split_id``
    carries is deleted; changes after HW in the same batch still apply on top. ``key_row`` maps
    each key column to its canonical value, the representation of ``ChangeRecord.key``.

    ``position`` is (file_index, pos, event_index, row_index) of the HW; when None it is taken
    from the split's records (which carry the HW), and an empty split without a position replaces
    the range before anything else in the batch. ``ts_ms`` stamps the ``-D`` changelog rows.
    """

    table_id: TableId
    split_id: str
    in_range: InRange
    position: Position | None = None
    ts_ms: int = 0
    bounds: KeyBounds | None = None


@dataclass(frozen=True)
class TypedChunk:
    """A chunk of a table's first snapshot as typed rows (the mirror's Arrow schema), to be
    appended: nothing else has written its key range (see
    ``spark.plan_tasks.appendable_tables``). ``position`` is its high watermark, as
    snapshot change records carry it."""

    split_id: str
    position: Position
    ts_ms: int
    rows: pa.Table


@dataclass(frozen=True)
class DataFile:
    """A data file already written into a Delta table's folder, not yet committed: what its
    add action needs (``path`` relative to the table, ``stats`` Delta's JSON statistics)."""

    path: str
    size: int
    modification_time: int
    stats: str


@dataclass(frozen=True)
class WrittenChunk:
    """A first-snapshot chunk whose files the reader wrote itself (``[lake] snapshot_writes =
    "executors"``): the sink commits them as they are, in the batch's commit. ``changelog`` is
    empty when the changelog is off."""

    split_id: str
    position: Position
    ts_ms: int
    rows: int
    mirror: tuple[DataFile, ...]
    changelog: tuple[DataFile, ...]
    #: the written rows' columns, ``(name, Arrow type)``: the sink refuses files of another shape
    columns: tuple[tuple[str, str], ...]


#: a first-snapshot chunk as the sink receives it: rows to write, or files already written
SnapshotChunk = TypedChunk | WrittenChunk


def group_by_table(records: Sequence[ChangeRecord]) -> dict[TableId, list[ChangeRecord]]:
    """The batch's records per table, in batch order."""
    groups: dict[tuple[str, str], list[ChangeRecord]] = defaultdict(list)
    for record in records:
        groups[record.database, record.table].append(record)
    return {TableId(database, table): group for (database, table), group in groups.items()}


class TableBatchSink(ABC):
    """A sink that applies a batch one table at a time."""

    #: the current batch's ``commit_info`` while ``apply_batch`` runs
    _commit_info: dict[str, str] = {}  # noqa: RUF012 - replaced per batch, never mutated
    #: how long each table's share of the last ``apply_batch`` took to write and commit
    commit_seconds: dict[TableId, float] = {}  # noqa: RUF012 - replaced per batch
    #: A failure of one table's share of a batch that no retry cures (a value its mirror type
    #: cannot hold, a mirror schema that refuses the source's): that table is refused, the
    #: others applied. Each table is its own failure domain; the job parks the refused one.
    table_faults: tuple[type[BaseException], ...] = (
        SinkError,
        ValueError,
        TypeError,
        ArithmeticError,
        LookupError,
    )

    def apply_batch(
        self,
        batch_id: int,
        schemas: Mapping[TableId, TableSchema],
        records: Sequence[ChangeRecord],
        replace_ranges: Sequence[ReplaceRange] = (),
        appends: Mapping[TableId, Sequence[SnapshotChunk]] | None = None,
        commit_info: Mapping[str, str] | None = None,
        *,
        isolate: bool = False,
        reshaped: Collection[TableId] = (),
    ) -> dict[TableId, SinkStats]:
        """Apply one micro-batch to every table it touches; idempotent per ``batch_id``.

        ``reshaped`` tables had a schema change applied in place in this batch: each is written
        even without a row, so that its mirror's schema follows at the DDL's batch (Delta: a
        commit that only adds the columns).

        With ``isolate`` (the job's way), a table whose share fails with one of
        ``table_faults`` is refused (its stats are ``{REFUSED: why}``) and the others are
        applied; without it, the failure is raised.

        ``commit_info`` is metadata the sink records with the batch where it can (Delta: in
        every commit's ``commitInfo``), e.g. ``cdc_console.position``, the binlog position the
        batch ends at.

        Returns per table: ``inserted``, ``updated``, ``deleted`` (mirror rows, from the MERGE
        metrics; ``upserted`` = inserted + updated), ``range_deleted`` (keys a ``ReplaceRange``
        deleted), ``changelog_rows``, and ``mirror_skipped`` / ``changelog_skipped`` (True when
        an earlier attempt of this batch already committed it, or the changelog is off).
        ``appends`` are typed first-snapshot chunks per table; a table has either those or
        records and range replaces in one batch, never both.
        """
        if batch_id < 0:
            raise SinkError(f"batch id must be >= 0, got {batch_id}")
        # Here: this module is imported where pyarrow.compute must not be (the planner).
        from cdc_console.sinks.change_columns import ChangeColumns

        by_table: Mapping[TableId, Sequence[ChangeRecord]] = (
            records.by_table() if isinstance(records, ChangeColumns) else group_by_table(records)
        )
        ranges: dict[TableId, list[ReplaceRange]] = defaultdict(list)
        for replace in replace_ranges:
            ranges[replace.table_id].append(replace)
        appends = appends or {}
        self._commit_info = dict(commit_info or {})
        self.commit_seconds = {}
        stats: dict[TableId, SinkStats] = {}
        for table_id in sorted(set(by_table) | set(ranges) | set(appends) | set(reshaped)):
            schema = schemas.get(table_id)
            if schema is None:
                raise SinkError(f"batch {batch_id} has changes for {table_id} but no schema")
            if table_id in appends and (table_id in by_table or table_id in ranges):
                raise SinkError(
                    f"batch {batch_id} has both typed snapshot chunks and change records "
                    f"for {table_id}; the planner never mixes them"
                )
            clock = time.monotonic()
            try:
                if table_id in appends:
                    stats[table_id] = self._append_table(batch_id, schema, appends[table_id])
                else:
                    stats[table_id] = self._apply_table(
                        batch_id, schema, by_table.get(table_id, ()), ranges.get(table_id, [])
                    )
                self.commit_seconds[table_id] = time.monotonic() - clock
            except BaseException as exc:
                if not isolate or not self.is_table_fault(exc):
                    raise
                reason = redact(" ".join(f"{type(exc).__name__}: {exc}".split()))[:500]
                log.error("batch %d: %s refused by the sink: %s", batch_id, table_id, reason)
                stats[table_id] = {REFUSED: reason}
        return stats

    def applied_batch(self, table_id: TableId) -> int | None:
        """The last batch id this sink holds for ``table_id``, or None: never written, or a
        sink that cannot tell (the job then cannot check its lake against its state)."""
        return None

    def is_table_fault(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a failure of one table's share (``table_faults``), or a panic of a
        native library (pyo3's ``PanicException``, a BaseException that cannot be imported by
        name): delta-rs panics on what one table holds, such as a path it cannot turn into a
        URL, and that must not stop the other tables."""
        return isinstance(exc, self.table_faults) or type(exc).__name__ == "PanicException"

    def _append_table(
        self, batch_id: int, schema: TableSchema, chunks: Sequence[SnapshotChunk]
    ) -> SinkStats:
        """Append typed first-snapshot chunks; sinks that cannot take them refuse."""
        raise SinkError(f"{type(self).__name__} does not take typed snapshot chunks")

    @abstractmethod
    def _apply_table(
        self,
        batch_id: int,
        schema: TableSchema,
        records: Sequence[ChangeRecord],
        replaces: list[ReplaceRange],
    ) -> SinkStats:
        """Apply one table's share of the batch; return its stats. ``records`` is a
        ``ChangeColumns`` when the batch came as one (the job's batches do)."""
