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

Performance notes (delta-rs 1.6.6, measured): the MERGE runs with ``streamed_exec=False`` so
delta-rs can skip target files whose key statistics exclude the batch's keys (4x faster for a
small batch on a ten-file table). That relies on correct statistics, which delta-rs does not
write for scale-0 decimals beyond int64 (see ``delta_tables.stats_properties``). File layout,
table properties and the change data feed are in ``delta_tables``; compaction and vacuum in
``sinks/maintenance.py``.

Schema evolution: columns added online join the mirror in the batch's own commit; a re-dump
after a retype migrates the mirror or sets it aside (``_migrate``); any other difference
between a mirror and its table raises ``SinkSchemaError``. Not supported: a source database
named ``_changelog``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.schema import Field, Schema
from deltalake.transaction import AddAction, CommitProperties, RemoveAction, Transaction

from cdc_console.config import LakeConfig
from cdc_console.core.records import ChangeRecord
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.untyped import DeltaMetrics
from cdc_console.core.values import CanonicalRow, CanonicalValue
from cdc_console.sinks.base import (
    DataFile,
    InRange,
    Key,
    KeyBounds,
    ReplaceRange,
    SinkError,
    SinkSchemaError,
    SinkStats,
    SnapshotChunk,
    TableBatchSink,
    TypedChunk,
    WrittenChunk,
)
from cdc_console.sinks.change_columns import ChangeColumns
from cdc_console.sinks.counted import MirrorCounts, plan_counted_batch
from cdc_console.sinks.delta_counted import counts_in_ranges, merge_counted
from cdc_console.sinks.delta_dv import CommitConflict, merge_by_deletion_vectors
from cdc_console.sinks.delta_files import check_rows, check_written, write_chunk
from cdc_console.sinks.delta_tables import (
    check_schema,
    open_or_create,
    open_table,
    reopen,
    same_schema,
    set_aside,
    table_properties,
)
from cdc_console.sinks.lake_layout import (
    CHANGELOG_DIR,
    CHANGELOG_FIELDS,
    MirrorNames,
    changelog_path,
    changelog_schema,
    from_lake,
    lake_schema,
    mirror_path,
    table_app_id,
    to_lake,
)
from cdc_console.sinks.lake_target import LakeTarget
from cdc_console.sinks.merge_sql import assignments, key_predicate, quote
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
    codec_for,
    columns_to_table,
    mirror_schema,
    table_to_rows,
)

#: tries of a merge-on-read commit whose version another writer took first
_CONFLICT_ATTEMPTS = 3
_MERGE_OP = "__cdc_console_merge_op"  # extra source column of the MERGE: 'U' upsert, 'D' delete
_RESERVED = {_MERGE_OP} | {f.name for f in CHANGELOG_FIELDS}

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
        """The table's own lake schema, and the one its mirror and change feed are written
        with: the same, or, routed, that with the columns only other tables of the route gave
        the mirror or its change feed (null in this table's rows). Both tables count: a crash
        between another table's feed commit and its mirror commit leaves a column in one
        only, which the retry adds to the other."""
        own = lake_schema(mirror_schema(schema), self.lake)
        if not schema.routed:
            return own, own
        theirs: dict[str, pa.Field] = {}
        feed_only = {f.name for f in CHANGELOG_FIELDS}
        for path in (self.mirror_path(schema.table_id), self.changelog_path(schema.table_id)):
            if not DeltaTable.is_deltatable(str(path)):
                continue
            for held in table_schema(reopen(path)):
                if held.name in feed_only:
                    continue
                index = own.get_field_index(held.name)
                if index >= 0:
                    _check_shared_column(schema, own.field(index), held, path)
                else:
                    theirs.setdefault(held.name, held)
        return own, pa.schema([*own, *theirs.values()])

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

    def delete_absent_in_range(
        self,
        table_id: TableId,
        schema: TableSchema,
        in_range: InRange,
        present_keys: set[Key],
    ) -> int:
        """Delete the mirror keys with ``in_range(key_row)`` true that are not in ``present_keys``.

        ``key_row`` and the ``present_keys`` tuples hold canonical values in
        ``schema.key_columns`` order (``ChangeRecord.key_values()``). Returns the number of rows
        deleted. A standalone repair tool: its commit carries no app transaction, and running it
        again after new keys entered the range would delete those too. The pipeline uses
        ``apply_batch(..., replace_ranges=...)`` instead, which does this at the split's high
        watermark inside the batch's single, idempotent MERGE. The mirror's key columns are read
        in full: the predicate is Python, so Delta cannot prune files for it.
        """
        _check_table(schema)
        path = self.mirror_path(table_id)
        if not DeltaTable.is_deltatable(str(path)):
            return 0
        table = DeltaTable(str(path))
        _, lake = self._lake_for(schema)
        check_schema(table, lake, path)
        (absent,) = _mirror_absent(table, schema, [(in_range, present_keys)], full_rows=False)
        if not absent:
            return 0
        nets: dict[Key, CanonicalRow | None] = dict.fromkeys(absent)
        metrics = _merge(table, schema, lake, nets, commit_properties=None)
        return int(metrics.get("num_target_rows_deleted", 0))

    # --- internals ------------------------------------------------------------------------

    def _migrate(self, table_id: TableId, typed: pa.Schema, log_schema: pa.Schema) -> None:
        """Bring a mirror to the table's new shape before a re-dump writes into it.

        A re-dump is the fix for a table whose columns changed (a DDL stop). The mirror keeps
        its rows, projected onto the new columns (kept columns cast, new ones null until the
        re-dump's chunks rewrite each row), in one overwrite commit, so it is never empty. When
        its rows cannot take the new shape exactly (a text that is no number, a new NOT NULL
        column), the mirror is set aside whole under a versioned name, readable as it was, and
        the re-dump fills a fresh one. The changelog is history in the old shape: its folder is
        set aside the same way and a new one starts. Every step is a no-op once done, so a
        retried batch skips them.
        """
        path = self.mirror_path(table_id)
        if DeltaTable.is_deltatable(str(path)):
            mirror = DeltaTable(str(path))
            if not same_schema(mirror, typed):
                current = read_delta(mirror)
                try:
                    projected = _project(current, typed, path)
                except SinkSchemaError as exc:
                    aside = _set_aside(path, mirror.version())
                    _log.warning(
                        "%s: the mirror's rows cannot take the new columns (%s); the old mirror "
                        "is kept, readable, at %s and the re-dump fills a fresh one",
                        table_id,
                        exc,
                        aside,
                    )
                else:
                    write_deltalake(
                        mirror,
                        projected,
                        mode="overwrite",
                        schema_mode="overwrite",
                        target_file_size=self.lake.target_file_size,
                        commit_properties=CommitProperties(
                            custom_metadata={"cdc_console.migrate": f"{table_id} new shape"}
                        ),
                    )
                    _log.warning("%s: mirror migrated to the new columns %s", table_id, typed.names)
        log_path = self.changelog_path(table_id)
        if DeltaTable.is_deltatable(str(log_path)) and not same_schema(
            DeltaTable(str(log_path)), log_schema
        ):
            aside = _set_aside(log_path, DeltaTable(str(log_path)).version())
            _log.warning("%s: changelog in the old shape kept at %s", table_id, aside)

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
        _check_table(schema)
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
            self._commit_files(log, files, batch_id, table_id, "log append")
            stats["changelog_rows"] = rows
            stats["changelog_skipped"] = False
        if _already(mirror, self._app(table_id), batch_id):
            stats["mirror_skipped"] = True
            return stats
        files = [f for chunk in written for f in chunk.mirror]
        self._commit_files(mirror, files, batch_id, table_id, "append")
        stats["inserted"] = stats["upserted"] = rows
        stats["files_added"] = len(files)
        return stats

    def _commit_files(
        self,
        table: DeltaTable,
        files: Sequence[DataFile],
        batch_id: int,
        table_id: TableId,
        what: str,
    ) -> None:
        """One append commit of files already in the table's folder (none: the batch is still
        recorded, so that a retry sees it as applied). The table's own schema is passed, so the
        commit changes no metadata."""
        actions: list[AddAction | RemoveAction] = [
            AddAction(f.path, f.size, {}, f.modification_time, True, f.stats) for f in files
        ]
        table.create_write_transaction(
            actions,
            mode="append",
            schema=table.schema(),
            commit_properties=self._commit(batch_id, table_id, what),
        )
        table.update_incremental()

    def _apply_table(
        self,
        batch_id: int,
        schema: TableSchema,
        records: Sequence[ChangeRecord],
        replaces: list[ReplaceRange],
    ) -> SinkStats:
        _check_table(schema)
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

        # Range deletes need the mirror as of before this batch, so they are planned only while
        # the mirror has not taken the batch (it is committed last, see the module docstring).
        absent: list[dict[Key, CanonicalRow | None]] = []
        if replaces and not mirror_done:
            presents = split_keys(records, replaces)
            checks = [(r.in_range, presents[r.split_id]) for r in replaces]
            absent = _mirror_absent(
                mirror,
                schema,
                checks,
                full_rows=log is not None,
                where=_bounds_filter(lake, [r.bounds for r in replaces]),
            )
        # Changes logged with partial row images complete the rows the mirror holds.
        patched = patched_keys(records)
        bases = _mirror_rows(mirror, schema, lake, patched) if patched else {}
        # A merge-on-read batch takes the change feed's pre-images from the changes' own before
        # images where they have them, instead of reading those rows back from the mirror.
        befores = not mirror_done and has_deletion_vectors(mirror)
        if isinstance(records, ChangeColumns) and not replaces and log is None and not patched:
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
                want_changes=log is not None,
                bases=bases,
                want_befores=befores,
            )

        if log is not None:
            self._write_log(log, schema, log_schema, batch_id, plan.changes, stats)
        if mirror_done:
            stats["mirror_skipped"] = True
            return stats

        committed = False
        if plan.nets:
            version = mirror.version()
            if has_deletion_vectors(mirror):
                metrics = self._merge_on_read(
                    mirror, schema, lake, plan.nets, batch_id, plan.befores
                )
            else:
                metrics = _merge(
                    mirror,
                    schema,
                    lake,
                    plan.nets,
                    self._commit(batch_id, table_id, "merge"),
                    merge_schema=True,
                )
            _merge_stats(stats, metrics)
            stats["range_deleted"] = plan.range_deleted
            mirror.update_incremental()
            committed = mirror.version() > version
        if not committed:
            self._record_noop(mirror, lake, batch_id, table_id)
        return stats

    def _merge_on_read(
        self,
        mirror: DeltaTable,
        schema: TableSchema,
        lake: pa.Schema,
        nets: Mapping[Key, CanonicalRow | None],
        batch_id: int,
        befores: Mapping[Key, CanonicalRow],
    ) -> DeltaMetrics:
        """The batch's nets by deletion vectors (``sinks.delta_dv``), columns added online in
        the same commit. A new wall-clock column on a table without the ``timestampNtz``
        feature joins in a commit of its own first (delta-rs upgrades the protocol; a NULL
        column in every row the mirror holds is true of the source too)."""
        held = {f.name for f in table_schema(mirror)}
        wall_clock = [f for f in lake if f.name not in held and f.type == pa.timestamp("us")]
        if wall_clock and "timestampNtz" not in (mirror.protocol().writer_features or []):
            mirror.alter.add_columns([Field.from_arrow(f) for f in wall_clock])
            mirror.update_incremental()
        info = {
            "cdc_console.batch": f"{batch_id} {schema.table_id} merge",
            **self._commit_info,
        }
        attempt = 1
        while True:
            try:
                return merge_by_deletion_vectors(
                    mirror,
                    schema,
                    lake,
                    nets,
                    (self._app(schema.table_id), batch_id),
                    info,
                    befores,
                )
            except CommitConflict:
                # Another writer (an operator's `lake optimize`, say) took the version: the
                # batch's net changes are laid on the table as it now is; the files the failed
                # attempt wrote are referenced by no version, and vacuum removes them.
                if attempt == _CONFLICT_ATTEMPTS:
                    raise
                attempt += 1
                _log.warning("%s: commit conflict, batch %d tried again", schema.table_id, batch_id)
                mirror.update_incremental()

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
        data = _changelog_table(schema, log_schema, batch_id, changes)
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
            where = _bounds_filter(lake, [r.bounds for r in replaces])
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
            _merge_stats(stats, metrics)
            mirror.update_incremental()
        stats["range_deleted"] = plan.range_deleted
        if mirror.version() == version:
            self._record_noop(mirror, lake, batch_id, table_id)
        return stats


# --- Delta helpers -------------------------------------------------------------------------


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


def _set_aside(path: Path, version: int) -> Path:
    """Move a Delta table's folder to ``<name>.before-v<version>`` and return where (a table
    reshaped again starts at version 0 each time, so ``set_aside`` numbers a name taken)."""
    return set_aside(path, f"before-v{version}")


def _merge_stats(stats: SinkStats, metrics: DeltaMetrics) -> None:
    """A MERGE's row and file counts (delta-rs' metrics) into a table's batch stats."""
    inserted = int(metrics.get("num_target_rows_inserted", 0))
    updated = int(metrics.get("num_target_rows_updated", 0))
    stats["inserted"], stats["updated"] = inserted, updated
    stats["deleted"] = int(metrics.get("num_target_rows_deleted", 0))
    stats["upserted"] = inserted + updated
    stats["rows_copied"] = int(metrics.get("num_target_rows_copied", 0))
    stats["files_added"] = int(metrics.get("num_target_files_added", 0))
    stats["files_removed"] = int(metrics.get("num_target_files_removed", 0))


def _project(current: pa.Table, typed: pa.Schema, path: Path) -> pa.Table:
    """``current``'s rows on ``typed``'s columns: kept columns cast exactly, new ones null."""
    columns = []
    for field_ in typed:
        if field_.name not in current.column_names:
            if not field_.nullable and current.num_rows:
                raise SinkSchemaError(
                    f"{path} gets a new NOT NULL column {field_.name!r}, which its rows cannot "
                    "hold until the re-dump rewrites them; move the mirror away and re-dump the "
                    "table into a fresh one"
                )
            columns.append(pa.nulls(current.num_rows, field_.type))
            continue
        try:
            columns.append(current[field_.name].cast(field_.type, safe=True))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SinkSchemaError(
                f"column {field_.name!r} of {path} cannot become {field_.type} exactly ({exc}); "
                "move the mirror away and re-dump the table into a fresh one"
            ) from None
    return pa.Table.from_arrays(columns, schema=typed.with_metadata(None))


def _check_shared_column(schema: TableSchema, own: pa.Field, held: pa.Field, path: Path) -> None:
    """A column a routed table shares with its mirror has the mirror's type; a re-dump does
    not migrate a mirror other tables write too, so a retyped shard parks with what to do."""
    if _delta_type(own) != _delta_type(held):
        raise SinkSchemaError(
            f"{schema.table_id} now maps column {own.name!r} to {own.type}, but the mirror it "
            f"shares with the other tables of its route ({path}) holds it as {held.type}; a "
            "shared mirror is not migrated in place: change the column alike on every table "
            "of the route, then, with the job stopped, set the mirror folder aside and "
            "re-dump each of them (cdc-console redump --table <db.table>) into a fresh one"
        )


def _delta_type(field_: pa.Field) -> str:
    return str(Schema.from_arrow(pa.schema([field_])).fields[0].type)


def _check_table(schema: TableSchema) -> None:
    if schema.table_id.database == CHANGELOG_DIR:
        raise SinkError(f"{schema.table_id}: database name {CHANGELOG_DIR!r} is the sink's own")
    for name in schema.row_names:
        if name in _RESERVED:
            raise SinkError(f"{schema.table_id}: column {name!r} clashes with a sink column")
    if not schema.key_columns or not all(schema.key_columns):
        raise SinkError(f"{schema.table_id} has no key columns to MERGE on")
    for name in schema.key_columns:
        schema.column(name)  # KeyError names a key column the table lacks


def _chunk_order(chunk: SnapshotChunk) -> tuple[int, str]:
    """Chunks of one table by split number (``db.t:N``), i.e. by key range."""
    _, _, number = chunk.split_id.rpartition(":")
    return (int(number), chunk.split_id) if number.isdigit() else (-1, chunk.split_id)


def _already(table: DeltaTable, app_id: str, batch_id: int) -> bool:
    applied = table.transaction_version(app_id)
    return applied is not None and applied >= batch_id


def _merge(
    table: DeltaTable,
    schema: TableSchema,
    lake: pa.Schema,
    nets: Mapping[Key, CanonicalRow | None],
    commit_properties: CommitProperties | None,
    *,
    merge_schema: bool = False,
) -> DeltaMetrics:
    """One MERGE of the net changes into the mirror; returns delta-rs' metrics. With
    ``merge_schema`` the source's columns the mirror lacks are added in the same commit."""
    key_columns = list(schema.key_columns)
    source_rows: list[Mapping[str, CanonicalValue]] = []
    ops: list[str] = []
    for key, row in nets.items():
        if row is not None:
            source_rows.append(row)
            ops.append("U")
        else:
            if len(key) != len(key_columns):
                raise SinkError(
                    f"{schema.table_id}: key {list(key)} does not match key columns {key_columns}"
                )
            source_rows.append(dict(zip(key_columns, key, strict=True)))
            ops.append("D")
    columns = {name: [row.get(name) for row in source_rows] for name in schema.row_names}
    source = to_lake(columns_to_table(schema, columns), lake).append_column(
        pa.field(_MERGE_OP, pa.string()), pa.array(ops, type=pa.string())
    )
    is_delete = f"s.{quote(_MERGE_OP)} = 'D'"
    is_upsert = f"s.{quote(_MERGE_OP)} = 'U'"
    merger = table.merge(
        source,
        predicate=key_predicate(schema, key_columns),
        source_alias="s",
        target_alias="t",
        streamed_exec=False,  # the source is in memory; lets delta-rs prune files by key bounds
        merge_schema=merge_schema,
        commit_properties=commit_properties,
    )
    # A column the source dropped keeps, in rows it held, the value it had (TableSchema.retired)
    retired = {c.name for c in schema.retired_row_columns}
    inserted = [name for name in source.column_names if name != _MERGE_OP]
    updated = [name for name in inserted if name not in retired]
    return (
        merger.when_matched_delete(predicate=is_delete)
        .when_matched_update(assignments(updated), predicate=is_upsert)
        .when_not_matched_insert(assignments(inserted), predicate=is_upsert)
        .execute()
    )


def _bounds_filter(lake: pa.Schema, bounds: Sequence[KeyBounds | None]) -> pc.Expression | None:
    """The rows of the mirror any of ``bounds`` can hold, as a filter Delta prunes files by;
    None (read everything) unless every range has integer bounds on one integer column."""
    if not bounds or any(b is None for b in bounds):
        return None
    names = {b.column for b in bounds if b is not None}
    if len(names) != 1:
        return None
    (name,) = names
    if lake.get_field_index(name) < 0 or not pa.types.is_integer(lake.field(name).type):
        return None
    column = pc.field(name)
    where: pc.Expression | None = None
    for b in bounds:
        assert b is not None
        part = column.is_valid()
        if b.start is not None:
            part = part & (column >= b.start)
        if b.end is not None:
            part = part & (column < b.end)
        if b.start is None:
            part = part | column.is_null()  # a NULL chunk key is the first chunk's
        where = part if where is None else where | part
    return where


def _mirror_absent(
    table: DeltaTable,
    schema: TableSchema,
    checks: Sequence[tuple[InRange, set[Key]]],
    full_rows: bool,
    where: pc.Expression | None = None,
) -> list[dict[Key, CanonicalRow | None]]:
    """Per check: mirror keys in its range and not in its present set, with the canonical row
    when ``full_rows`` (the changelog's before image), else None. One scan for all checks,
    of the rows ``where`` lets through (a superset of every check's range: ``_bounds_filter``)."""
    key_columns = list(schema.key_columns)
    columns = None if full_rows else key_columns
    read = read_delta(table, columns, where)
    data = from_lake(read, mirror_schema(schema))
    result: list[dict[Key, CanonicalRow | None]] = [{} for _ in checks]
    if data.num_rows == 0:
        return result
    key_values = [
        codec_for(schema.column(name)).array_to_canonical(data.column(name)) for name in key_columns
    ]
    hits: list[tuple[int, Key, int]] = []
    for index, values in enumerate(zip(*key_values, strict=True)):
        key_row = dict(zip(key_columns, values, strict=True))
        for check, (in_range, present) in enumerate(checks):
            if values not in present and in_range(key_row):
                hits.append((check, values, index))
    rows: list[CanonicalRow | None] = [None] * len(hits)
    if full_rows and hits:
        indices = pa.array([index for _, _, index in hits], type=pa.int64())
        rows = list(table_to_rows(schema, data.take(indices)))
    for (check, key, _), row in zip(hits, rows, strict=True):
        result[check][key] = row
    return result


def _mirror_rows(
    table: DeltaTable, schema: TableSchema, lake: pa.Schema, keys: Collection[Key]
) -> dict[Key, CanonicalRow]:
    """The mirror's rows of ``keys``, canonical: one scan, which Delta prunes by the values of
    the first key column (file statistics), the rest matched here."""
    key_columns = list(schema.key_columns)
    first = key_columns[0]
    wanted = list({key[0] for key in keys})
    typed = to_lake(
        pa.table({first: codec_for(schema.column(first)).to_arrow(wanted)}),
        pa.schema([lake.field(first)]),
    )
    where = pc.field(first).isin(typed.column(first).combine_chunks())
    read = read_delta(table, where=where)
    rows = table_to_rows(schema, from_lake(read, mirror_schema(schema)))
    found: dict[Key, CanonicalRow] = {}
    for row in rows:
        key = tuple(row[name] for name in key_columns)
        if key in keys:
            found[key] = row
    return found


def _changelog_table(
    schema: TableSchema,
    log_schema: pa.Schema,
    batch_id: int,
    changes: Sequence[PlannedChange],
) -> pa.Table:
    """Typed changelog rows: the row image plus op, position, seq, event time and batch id."""
    names = schema.row_names
    lake = pa.schema(list(log_schema)[: len(log_schema) - len(CHANGELOG_FIELDS)])
    typed = to_lake(
        columns_to_table(schema, {n: [c.row.get(n) for c in changes] for n in names}), lake
    )
    meta = [
        pa.array([c.op for c in changes], type=pa.string()),
        *(pa.array([c.position[i] for c in changes], type=pa.int64()) for i in range(4)),
        pa.array([c.seq for c in changes], type=pa.int64()),
        pa.array([c.ts_ms for c in changes], type=pa.int64()),
        pa.array([batch_id] * len(changes), type=pa.int64()),
    ]
    return pa.Table.from_arrays([*typed.columns, *meta], schema=log_schema)
