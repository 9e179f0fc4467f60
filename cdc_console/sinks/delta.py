"""Delta Lake sink: one typed mirror per source table, kept by MERGE, plus an optional changelog.

Layout under ``root``::

    <root>/<db>/<table>             mirror: the source table's current rows, typed (values/arrow.py)
    <root>/_changelog/<db>/<table>  append-only: every change record, typed, plus _op and position

*Exactly once* and *Crash-safe resume* (README, "The invariants"). A micro-batch may be applied
again after a crash (Spark replays the batch whose offsets were not committed). Every commit this sink makes carries
a Delta *app transaction* ``(app_id, version=batch_id)`` in the same atomic log entry as the data,
and ``apply_batch`` skips a table whose mirror (or changelog) already records a version >=
``batch_id``. Batch ids must therefore grow monotonically, which Spark's do. Per table and batch
the changelog is committed *before* the mirror, so a crash between the two leaves a changelog that
is ahead (skipped on retry) and a mirror that is behind (applied on retry); the range deletes of
``ReplaceRange`` are computed from the unchanged mirror either way.

Per-key order. The records of one table are sorted by ``ChangeRecord.sort_key`` (binlog position,
then order in the batch) and collapsed per key, last change wins: ``+I``/``+U`` leave the key
holding that row image, ``-U``/``-D`` leave it absent. So ``-U k, +U k`` nets to an upsert,
``-D k, +I k`` to an upsert of the new row, a primary-key change (``-U old``, ``+U new``) to a
delete of the old key and an upsert of the new one. One MERGE per table applies the result:
matched and delete -> delete; matched and upsert -> update all columns; not matched and upsert ->
insert. The collapse makes the MERGE source unique per key, which MERGE requires.

Keys. The mirror's key is ``TableSchema.key_columns``; it must identify a row. Key columns that
are nullable are joined with ``IS NOT DISTINCT FROM`` so a NULL key still matches itself. Keys
are compared as Delta values, i.e. exactly: a case-insensitive collation's 'a' and 'A' are two
keys here as in the change records.

First snapshot: a table's first-snapshot chunks arrive as data files their readers already
wrote (``WrittenChunk``, see ``delta_files``) or as typed Arrow rows (``TypedChunk``, written
here by the same writer) and are *appended* to the mirror (and changelog) in one commit per
table with the same app transaction: their key ranges are disjoint and nothing else writes them
before the table catches up, so an append equals the MERGE it replaces, at a fraction of the
cost.

Range replace (REDUMP, chunk repair): see ``ReplaceRange``. Its deletes happen at the split's
high watermark inside the same MERGE and commit, so they are as idempotent as the rest; the
changelog gets a ``-D`` row with the before image for each, with ``_seq`` = -1.

The MERGE and its merge-on-read counterpart, and the scans that plan them, are in
``sinks.delta_merge``; the MERGE prunes files by key statistics, which delta-rs does not
write for scale-0 decimals beyond int64 (see ``delta_tables.stats_properties``). File layout,
table properties and the change data feed are in ``delta_tables``; compaction and vacuum in
``sinks/maintenance.py``.

Schema evolution (``sinks.delta_shape``): columns added online join the mirror in the batch's
own commit; a re-dump after a retype migrates the mirror or sets it aside; any other difference
between a mirror and its table raises ``SinkSchemaError``. Not supported: a source database
named ``_changelog``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction, CommitProperties, RemoveAction, Transaction

from cdc_console.config import LakeConfig
from cdc_console.core.records import ChangeRecord
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.values import CanonicalRow
from cdc_console.sinks.base import (
    DataFile,
    Key,
    ReplaceRange,
    SinkStats,
    SnapshotChunk,
    TableBatchSink,
    TypedChunk,
    WrittenChunk,
)
from cdc_console.sinks.change_columns import ChangeColumns
from cdc_console.sinks.counted import MirrorCounts, plan_counted_batch
from cdc_console.sinks.delta_counted import counts_in_ranges, merge_counted
from cdc_console.sinks.delta_files import check_rows, check_written, write_chunk
from cdc_console.sinks.delta_merge import (
    bounds_filter,
    merge_nets,
    merge_on_read,
    merge_stats,
    mirror_absent,
    mirror_rows,
)
from cdc_console.sinks.delta_shape import (
    changelog_table,
    check_shared_column,
    check_table,
    migrate_mirror,
)
from cdc_console.sinks.delta_tables import (
    open_or_create,
    open_table,
    reopen,
    table_properties,
)
from cdc_console.sinks.lake_layout import (
    CHANGELOG_FIELDS,
    MirrorNames,
    changelog_path,
    changelog_schema,
    lake_schema,
    mirror_path,
    table_app_id,
)
from cdc_console.sinks.lake_target import LakeTarget
from cdc_console.sinks.mirror_read import (
    enable_deletion_vectors,
    has_deletion_vectors,
    read_delta,
    table_schema,
)
from cdc_console.sinks.netting import (
    PlannedChange,
    TableBatchPlan,
    fold_columns,
    patched_keys,
    plan_table_batch,
    split_keys,
)
from cdc_console.values.arrow import (
    mirror_schema,
)

_log = logging.getLogger(__name__)


def pipeline_app_id(pipeline: str) -> str:
    """The Delta app id of one pipeline's commits: its app transactions say which batch a
    mirror holds (``verify`` places a mirror at a binlog position by it)."""
    return f"cdc-console:{pipeline}"


class DeltaSink(TableBatchSink):
    """Mirror + changelog Delta tables under ``root``; see the module docstring for semantics."""

    #: delta-rs' refusals of one table's commit (a schema it will not take, a protocol it
    #: cannot write, a log it cannot read, such as one with a commit missing) are that
    #: table's, as in the base class; a commit another writer beat (``CommitFailedError``)
    #: is not: the batch is tried again
    table_faults = (*TableBatchSink.table_faults, DeltaError)

    def is_table_fault(self, exc: BaseException) -> bool:
        return not isinstance(exc, CommitFailedError) and super().is_table_fault(exc)

    def __init__(
        self,
        root: Path,
        changelog: bool = True,
        app_id: str = "cdc-console",
        lake: LakeConfig | None = None,
        names: MirrorNames | None = None,
    ) -> None:
        self.root = Path(root)
        self.changelog = changelog
        self.app_id = app_id
        self.lake = lake or LakeConfig()
        #: mirrors placed by name (``[sink] mirrors``)
        self.names: MirrorNames = names if names is not None else {}

    # --- paths and reads ------------------------------------------------------------------

    def mirror_path(self, table_id: TableId) -> Path:
        return mirror_path(self.root, table_id, self.names)

    def changelog_path(self, table_id: TableId) -> Path:
        return changelog_path(self.root, table_id, self.names)

    def _app(self, table_id: TableId) -> str:
        """The app transaction id a table's commits carry: the pipeline's, or, for a table
        routed into a mirror it shares, one of its own, so that each table's batches are
        applied once whatever the others did (``lake_layout.table_app_id``)."""
        return table_app_id(self.app_id, table_id, self.names)

    def _lake_for(self, schema: TableSchema) -> tuple[pa.Schema, pa.Schema]:
        paths = (self.mirror_path(schema.table_id), self.changelog_path(schema.table_id))
        return lake_schemas(schema, self.lake, paths)

    def read_mirror(self, table_id: TableId) -> pa.Table:
        """The mirror's current rows (for tests and tools). Raises ``FileNotFoundError``."""
        return read_delta(open_table(self.mirror_path(table_id)))

    def read_changelog(self, table_id: TableId) -> pa.Table:
        """The changelog rows in apply order: by batch, then position, then seq."""
        table = open_table(self.changelog_path(table_id)).to_pyarrow_table()
        order = ["_batch_id", "_file_index", "_pos", "_event_index", "_row_index", "_seq"]
        return table.sort_by([(name, "ascending") for name in order])

    def applied_batch(self, table_id: TableId) -> int | None:
        """The last batch id committed to the mirror, or None (never written)."""
        path = self.mirror_path(table_id)
        if not DeltaTable.is_deltatable(str(path)):
            return None
        return DeltaTable(str(path)).transaction_version(self._app(table_id))

    # --- writes ---------------------------------------------------------------------------

    # --- internals ------------------------------------------------------------------------

    def _migrate(self, table_id: TableId, typed: pa.Schema, log_schema: pa.Schema) -> None:
        """The mirror and its change feed brought to the table's new shape before a re-dump
        writes into them (``delta_shape.migrate_mirror``)."""
        mirror, log = self.mirror_path(table_id), self.changelog_path(table_id)
        migrate_mirror(table_id, mirror, log, typed, log_schema, self.lake.target_file_size)

    def _commit(self, batch_id: int, table_id: TableId, what: str) -> CommitProperties:
        return CommitProperties(
            app_transactions=[Transaction(self._app(table_id), batch_id)],
            custom_metadata={
                "cdc_console.batch": f"{batch_id} {table_id} {what}",
                **self._commit_info,
            },
        )

    def _mirror(self, table_id: TableId, typed: pa.Schema, in_write: bool = False) -> DeltaTable:
        properties = table_properties(typed, self.lake, self.lake.change_data_feed)
        table = open_or_create(
            self.mirror_path(table_id), typed, properties, new_columns_in_write=in_write
        )
        if self.lake.merge_on_read and table.version() == 0:
            enable_deletion_vectors(table)  # a new mirror, still empty
        return table

    def _changelog(
        self, table_id: TableId, log_schema: pa.Schema, in_write: bool = False
    ) -> DeltaTable:
        properties = table_properties(log_schema, self.lake, change_data_feed=False)
        return open_or_create(
            self.changelog_path(table_id),
            log_schema,
            properties,
            new_columns_in_write=in_write,
        )

    def _append_table(
        self, batch_id: int, schema: TableSchema, chunks: Sequence[SnapshotChunk]
    ) -> SinkStats:
        """Commit a batch's first-snapshot chunks of one table: their files, written by the
        readers (``WrittenChunk``) or here (``TypedChunk``), in key order, in one commit per
        table (changelog first) that carries the batch's app transaction."""
        check_table(schema)
        table_id = schema.table_id
        own, lake = self._lake_for(schema)
        for chunk in chunks:
            if isinstance(chunk, TypedChunk):
                check_rows(schema, chunk)
            else:
                check_written(schema, own, chunk)
        log_schema = changelog_schema(lake)
        stats = _empty_stats()
        mirror = self._mirror(table_id, lake)
        log = self._changelog(table_id, log_schema) if self.changelog else None
        log_due = log is not None and not _already(log, self._app(table_id), batch_id)
        if not log_due and _already(mirror, self._app(table_id), batch_id):
            stats["mirror_skipped"] = True
            return stats
        target = LakeTarget(self.root, self.changelog, self.lake, self.names)
        written = [
            chunk
            if isinstance(chunk, WrittenChunk)
            else write_chunk(target, schema, batch_id, chunk)
            for chunk in sorted(chunks, key=_chunk_order)
        ]
        rows = sum(chunk.rows for chunk in written)
        if log is not None and log_due:
            files = [f for chunk in written for f in chunk.changelog]
            commit_files(log, files, self._commit(batch_id, table_id, "log append"))
            stats["changelog_rows"] = rows
            stats["changelog_skipped"] = False
        if _already(mirror, self._app(table_id), batch_id):
            stats["mirror_skipped"] = True
            return stats
        files = [f for chunk in written for f in chunk.mirror]
        commit_files(mirror, files, self._commit(batch_id, table_id, "append"))
        stats["inserted"] = stats["upserted"] = rows
        stats["files_added"] = len(files)
        return stats

    def _apply_table(
        self,
        batch_id: int,
        schema: TableSchema,
        records: Sequence[ChangeRecord],
        replaces: list[ReplaceRange],
    ) -> SinkStats:
        check_table(schema)
        table_id = schema.table_id
        _, lake = self._lake_for(schema)
        stats = _empty_stats()
        log_schema = changelog_schema(lake)
        if replaces and not schema.routed:
            # a routed mirror holds other tables' rows and columns: never projected away
            self._migrate(table_id, lake, log_schema)
        # Columns added online join the mirror and the changelog in the batch's own commits.
        mirror = self._mirror(table_id, lake, in_write=True)
        mirror_done = _already(mirror, self._app(table_id), batch_id)
        log: DeltaTable | None = None
        if self.changelog:
            log = self._changelog(table_id, log_schema, in_write=True)
            if _already(log, self._app(table_id), batch_id):
                log = None
        if mirror_done and log is None:
            stats["mirror_skipped"] = True
            return stats

        if schema.counted:
            return self._apply_counted(batch_id, schema, records, replaces, mirror, lake, log)

        plan = _plan_batch(schema, lake, records, replaces, mirror, mirror_done, log is not None)
        if log is not None:
            self._write_log(log, schema, log_schema, batch_id, plan.changes, stats)
        if mirror_done:
            stats["mirror_skipped"] = True
            return stats

        self._commit_nets(batch_id, schema, lake, mirror, plan, stats)
        return stats

    def _commit_nets(
        self,
        batch_id: int,
        schema: TableSchema,
        lake: pa.Schema,
        mirror: DeltaTable,
        plan: TableBatchPlan,
        stats: SinkStats,
    ) -> None:
        """The batch's net changes into the mirror, merge-on-read or copy-on-write, with the
        app transaction; a batch with nothing to change still records that it was applied."""
        table_id = schema.table_id
        committed = False
        if plan.nets:
            version = mirror.version()
            if has_deletion_vectors(mirror):
                info = {"cdc_console.batch": f"{batch_id} {table_id} merge", **self._commit_info}
                app = (self._app(table_id), batch_id)
                metrics = merge_on_read(mirror, schema, lake, plan.nets, app, info, plan.befores)
            else:
                metrics = merge_nets(
                    mirror,
                    schema,
                    lake,
                    plan.nets,
                    self._commit(batch_id, table_id, "merge"),
                    merge_schema=True,
                )
            merge_stats(stats, metrics)
            stats["range_deleted"] = plan.range_deleted
            mirror.update_incremental()
            committed = mirror.version() > version
        if not committed:
            self._record_noop(mirror, lake, batch_id, table_id)

    def _write_log(
        self,
        log: DeltaTable,
        schema: TableSchema,
        log_schema: pa.Schema,
        batch_id: int,
        changes: Sequence[PlannedChange],
        stats: SinkStats,
    ) -> None:
        """Append a batch's changelog rows of one table, in the batch's own commit."""
        data = changelog_table(schema, log_schema, batch_id, changes)
        write_deltalake(
            log,
            data,
            mode="append",
            schema_mode="merge",
            commit_properties=self._commit(batch_id, schema.table_id, "log"),
        )
        stats["changelog_rows"] = data.num_rows
        stats["changelog_skipped"] = False

    def _record_noop(
        self, mirror: DeltaTable, lake: pa.Schema, batch_id: int, table_id: TableId
    ) -> None:
        """A MERGE that changes nothing (deletes of absent keys, say) makes no commit; record
        the batch anyway with an empty append so that a retry sees it as applied."""
        write_deltalake(
            mirror,
            lake.empty_table(),
            mode="append",
            schema_mode="merge",
            commit_properties=self._commit(batch_id, table_id, "noop"),
        )

    def _apply_counted(
        self,
        batch_id: int,
        schema: TableSchema,
        records: Sequence[ChangeRecord],
        replaces: list[ReplaceRange],
        mirror: DeltaTable,
        lake: pa.Schema,
        log: DeltaTable | None,
    ) -> SinkStats:
        """``_apply_table`` for a table without a unique key (``sinks.counted``)."""
        table_id = schema.table_id
        stats = _empty_stats()
        mirror_done = _already(mirror, self._app(table_id), batch_id)
        if isinstance(records, ChangeColumns):
            records = records.records()
        held: list[MirrorCounts] = []
        if replaces and not mirror_done:
            where = bounds_filter(lake, [r.bounds for r in replaces])
            held = counts_in_ranges(mirror, schema, replaces, where)
        plan = plan_counted_batch(schema, records, replaces, held, want_changes=log is not None)
        if log is not None:
            self._write_log(log, schema, changelog_schema(lake), batch_id, plan.changes, stats)
        if mirror_done:
            stats["mirror_skipped"] = True
            return stats
        version = mirror.version()
        metrics = merge_counted(
            mirror,
            schema,
            lake,
            plan.nets,
            self._commit(batch_id, table_id, "merge"),
            merge_schema=True,
        )
        if metrics is not None:
            merge_stats(stats, metrics)
            mirror.update_incremental()
        stats["range_deleted"] = plan.range_deleted
        if mirror.version() == version:
            self._record_noop(mirror, lake, batch_id, table_id)
        return stats


# --- Delta helpers -------------------------------------------------------------------------


def _plan_batch(
    schema: TableSchema,
    lake: pa.Schema,
    records: Sequence[ChangeRecord],
    replaces: list[ReplaceRange],
    mirror: DeltaTable,
    mirror_done: bool,
    want_changes: bool,
) -> TableBatchPlan:
    """The batch's net change per key, and the change feed's rows when ``want_changes``."""
    # Range deletes need the mirror as of before this batch, so they are planned only while
    # the mirror has not taken the batch (it is committed last, see the module docstring).
    absent: list[dict[Key, CanonicalRow | None]] = []
    if replaces and not mirror_done:
        presents = split_keys(records, replaces)
        checks = [(r.in_range, presents[r.split_id]) for r in replaces]
        absent = mirror_absent(
            mirror,
            schema,
            checks,
            full_rows=want_changes,
            where=bounds_filter(lake, [r.bounds for r in replaces]),
        )
    # Changes logged with partial row images complete the rows the mirror holds.
    patched = patched_keys(records)
    bases = mirror_rows(mirror, schema, lake, patched) if patched else {}
    # A merge-on-read batch takes the change feed's pre-images from the changes' own before
    # images where they have them, instead of reading those rows back from the mirror.
    befores = not mirror_done and has_deletion_vectors(mirror)
    if isinstance(records, ChangeColumns) and not replaces and not want_changes and not patched:
        held: dict[Key, CanonicalRow] = {}
        plan = TableBatchPlan(
            nets=fold_columns(schema, records, held if befores else None), befores=held
        )
    else:
        plan = plan_table_batch(
            schema,
            records,
            replaces,
            absent,
            want_changes=want_changes,
            bases=bases,
            want_befores=befores,
        )
    return plan


def _empty_stats() -> SinkStats:
    """A table's batch stats before anything is written (see ``TableBatchSink.apply_batch``)."""
    return {
        "inserted": 0,
        "updated": 0,
        "deleted": 0,
        "upserted": 0,
        "range_deleted": 0,
        "changelog_rows": 0,
        "rows_copied": 0,
        "files_added": 0,
        "files_removed": 0,
        "mirror_skipped": False,
        "changelog_skipped": True,
    }


def _chunk_order(chunk: SnapshotChunk) -> tuple[int, str]:
    """Chunks of one table by split number (``db.t:N``), i.e. by key range."""
    _, _, number = chunk.split_id.rpartition(":")
    return (int(number), chunk.split_id) if number.isdigit() else (-1, chunk.split_id)


def _already(table: DeltaTable, app_id: str, batch_id: int) -> bool:
    applied = table.transaction_version(app_id)
    return applied is not None and applied >= batch_id


def commit_files(
    table: DeltaTable, files: Sequence[DataFile], commit_properties: CommitProperties
) -> None:
    """One append commit of files already in the table's folder (none: the batch is still
    recorded, so that a retry sees it as applied). The table's own schema is passed, so the
    commit changes no metadata."""
    actions: list[AddAction | RemoveAction] = [
        AddAction(f.path, f.size, {}, f.modification_time, True, f.stats) for f in files
    ]
    table.create_write_transaction(
        actions, mode="append", schema=table.schema(), commit_properties=commit_properties
    )
    table.update_incremental()


def lake_schemas(
    schema: TableSchema, lake: LakeConfig, paths: Sequence[Path]
) -> tuple[pa.Schema, pa.Schema]:
    """The table's own lake schema, and the one its mirror and change feed are written
    with: the same, or, routed, that with the columns only other tables of the route gave
    the mirror or its change feed at ``paths`` (null in this table's rows). Both tables count: a crash
    between another table's feed commit and its mirror commit leaves a column in one
    only, which the retry adds to the other."""
    own = lake_schema(mirror_schema(schema), lake)
    if not schema.routed:
        return own, own
    theirs: dict[str, pa.Field] = {}
    feed_only = {f.name for f in CHANGELOG_FIELDS}
    for path in paths:
        if not DeltaTable.is_deltatable(str(path)):
            continue
        for held in table_schema(reopen(path)):
            if held.name in feed_only:
                continue
            index = own.get_field_index(held.name)
            if index >= 0:
                check_shared_column(schema, own.field(index), held, path)
            else:
                theirs.setdefault(held.name, held)
    return own, pa.schema([*own, *theirs.values()])
