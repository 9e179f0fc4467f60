"""A batch applied to a mirror by deletion vectors: a change costs what it changes.

The copy-on-write MERGE rewrites every data file a change touches, so random changes rewrite the
whole table each batch. Here a batch's net changes (``sinks.netting``) are applied as the Delta
protocol's merge-on-read:

1. the live rows of the changed keys are found in the table's active files (files whose key
   statistics cannot hold any of the keys are not read) and their positions collected;
2. each touched file gets a new deletion vector (its old one plus those positions) in one new
   DV file; a file whose every row is deleted is removed instead;
3. the batch's inserted and updated rows are written to one new data file;
4. one commit, put-if-absent, holds the ``remove`` and ``add`` of each touched file (same path,
   new vector), the new file's ``add`` and the batch's ``txn`` (so a retry sees it applied).

A column the source dropped (``TableSchema.retired``) keeps, in an updated row, the value the
mirror held, as the MERGE keeps it. Only keyed tables: a counted table's mirror is merged
copy-on-write (``sinks.delta_counted``).
"""

from __future__ import annotations

import json
import time
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, Schema
from deltalake.schema import Field

from cdc_console.core.schema import TableSchema
from cdc_console.core.values import CanonicalRow, JSONObject
from cdc_console.sinks.base import Key
from cdc_console.sinks.deletion_vectors import inline_vector, write_dv_file
from cdc_console.sinks.delta_log import ActiveFile, active_files
from cdc_console.sinks.dv_actions import (
    plain_action,
    put_if_absent,
    remove_action,
    with_num_records,
    write_change_file,
    write_data_file,
)
from cdc_console.sinks.file_keys import FILE_KEYS
from cdc_console.sinks.lake_layout import from_lake, to_lake
from cdc_console.sinks.mirror_read import (
    live_rows,
    read_positions,
    table_root,
    table_schema,
)
from cdc_console.values.arrow import codec_for, columns_to_table

#: a vector of at most this many rows is written inline in the log, a larger one to a file
INLINE_ROWS = 16
CHANGE_FEED = "delta.enableChangeDataFeed"
CHANGE_TYPE = "_change_type"


@dataclass
class _Live:
    """Where the table holds the changed keys live, and (when asked) their rows."""

    #: key -> (file, position in it)
    where: dict[Key, tuple[str, int]] = field(default_factory=dict)
    #: the rows of ``where``'s keys as the mirror holds them (lake types), and key -> its row
    rows: list[pa.Table] = field(default_factory=list)
    index: dict[Key, tuple[int, int]] = field(default_factory=dict)
    #: file -> the positions its current vector marks (read once, for the new vector too)
    deleted: dict[str, list[int]] = field(default_factory=dict)

    def old_rows(self, keys: Sequence[Key]) -> pa.Table | None:
        """The held rows of ``keys`` (each of which must be held), in order: one ``take`` per
        file read, then one to put them in the keys' order (a table of one-row slices costs
        a chunk per row in everything that follows)."""
        if not keys:
            return None
        wanted = [self.index[k] for k in keys]
        by_part: dict[int, list[int]] = {}
        for part, row in wanted:
            by_part.setdefault(part, []).append(row)
        parts = sorted(by_part)
        offsets: dict[int, int] = {}
        taken = []
        total = 0
        for part in parts:
            offsets[part] = total
            taken.append(self.rows[part].take(pa.array(by_part[part], type=pa.int64())))
            total += len(by_part[part])
        seen: dict[int, int] = dict.fromkeys(parts, 0)
        order = []
        for part, _ in wanted:
            order.append(offsets[part] + seen[part])
            seen[part] += 1
        return pa.concat_tables(taken).combine_chunks().take(pa.array(order, type=pa.int64()))


def merge_by_deletion_vectors(
    table: DeltaTable,
    schema: TableSchema,
    lake: pa.Schema,
    nets: Mapping[Key, CanonicalRow | None],
    txn: tuple[str, int],
    commit_info: Mapping[str, str],
    befores: Mapping[Key, CanonicalRow] | None = None,
) -> dict[str, int]:
    """Apply ``nets`` (key -> its row after the batch, or None: deleted) to ``table`` in one
    commit; returns delta-rs' MERGE metric names: rows inserted, updated and deleted.

    ``befores`` are rows the keys held when the batch began, from the changes' before images
    (``TableBatchPlan.befores``): the change feed's pre-images of those keys are taken from
    them, and only the others are read back from the mirror's files. With columns the source
    retired, every held row is read (their values are the mirror's alone)."""
    started = time.monotonic()
    root = table_root(table)
    version = table.version()
    active = active_files(root, version)
    retired = [c.name for c in schema.retired_row_columns if c.name in lake.names]
    feed = table.metadata().configuration.get(CHANGE_FEED) == "true"
    known: Mapping[Key, CanonicalRow] = befores if befores and feed and not retired else {}
    live = _find_live(
        root, active, schema, lake, list(nets), whole=feed or bool(retired), known=known
    )
    found = live.where
    inserted = [k for k, r in nets.items() if r is not None and k not in found]
    updated = [k for k, r in nets.items() if r is not None and k in found]
    deleted = [k for k, r in nets.items() if r is None and k in found]
    metrics = {
        "num_target_rows_inserted": len(inserted),
        "num_target_rows_updated": len(updated),
        "num_target_rows_deleted": len(deleted),
    }
    now = int(time.time() * 1000)
    actions: list[JSONObject] = [*_vectors(root, active, live, now)]
    widened = _metadata(table, lake)
    new_rows = (
        _new_rows(schema, lake, nets, live, updated, inserted, retired)
        if inserted or updated
        else None
    )
    if new_rows is not None:
        actions.append({"add": write_data_file(root, new_rows, now)})
    if feed and (actions or new_rows is not None):
        changes = _change_rows(schema, lake, live, known, deleted, updated, new_rows)
        if changes is not None:
            actions.append({"cdc": write_change_file(root, changes)})
    if not actions:
        return metrics
    head = _merge_head(
        txn, metrics, actions, new_rows is not None, widened, started, now, commit_info
    )
    put_if_absent(root / "_delta_log" / f"{version + 1:020}.json", [*head, *actions])
    return metrics


def _new_rows(
    schema: TableSchema,
    lake: pa.Schema,
    nets: Mapping[Key, CanonicalRow | None],
    live: _Live,
    updated: Sequence[Key],
    inserted: Sequence[Key],
    retired: Sequence[str],
) -> pa.Table:
    """The batch's updated then inserted rows in the lake's schema; an updated row keeps the
    values the mirror held for the columns the source retired."""
    keys = [*updated, *inserted]
    rows = [nets[k] for k in keys]
    columns = {n: [r.get(n) if r else None for r in rows] for n in schema.row_names}
    new_rows = to_lake(columns_to_table(schema, columns), lake)
    if retired:
        held = live.old_rows(updated)
        for name in retired:
            kept = held.column(name).to_pylist() if held is not None else []
            values = pa.array(kept + [None] * len(inserted), lake.field(name).type)
            index = new_rows.schema.get_field_index(name)
            new_rows = new_rows.set_column(index, lake.field(name), values)
    return new_rows.select(lake.names)


def _merge_head(
    txn: tuple[str, int],
    metrics: Mapping[str, int],
    actions: Sequence[JSONObject],
    added_file: bool,
    widened: JSONObject | None,
    started: float,
    now: int,
    commit_info: Mapping[str, str],
) -> list[JSONObject]:
    """A merge commit's first actions: its commitInfo, the app transaction that makes the batch
    exactly-once, and the widened metadata when columns joined."""
    app_id, batch_id = txn
    info: JSONObject = {
        "timestamp": now,
        "operation": "MERGE",
        "operationParameters": {"mode": "deletion vectors"},
        # delta-rs' MERGE metric names, so a history reads the same whichever wrote it
        "operationMetrics": {
            **metrics,
            "num_target_rows_copied": 0,
            "num_output_rows": metrics["num_target_rows_inserted"]
            + metrics["num_target_rows_updated"],
            "num_target_files_added": 1 if added_file else 0,
            "num_target_files_removed": 0,
            "num_deletion_vectors_written": sum(
                1
                for a in actions
                if isinstance(add := a.get("add"), dict) and "deletionVector" in add
            ),
            "execution_time_ms": int((time.monotonic() - started) * 1000),
        },
        "clientVersion": "cdc-console",
        **dict(commit_info),
    }
    head: list[JSONObject] = [
        {"commitInfo": info},
        {"txn": {"appId": app_id, "version": batch_id, "lastUpdated": now}},
        *([widened] if widened is not None else []),
    ]
    return head


def rewrite_deleted(
    table: DeltaTable,
    share: float,
    commit_info: Mapping[str, str],
    pack_rows: int | None = None,
    pass_rows: int | None = None,
) -> tuple[int, int]:
    """Compaction for merge-on-read, in one commit with ``dataChange = false`` (the change feed
    and readers of changes see nothing): the files whose deletion vector marks at least
    ``share`` of their rows, and with ``pack_rows`` the files of fewer than half that many live
    rows (when there are two), are rewritten as files of their live rows, at most
    ``pack_rows`` each, vectors dropped. A file of half ``pack_rows`` or more is never packed
    again, so compaction settles. ``pass_rows`` bounds the small files' live rows one call
    packs (the oldest first), so one pass over a very large table of small files holds the
    job's batches for a bounded time. Returns (files removed, files added)."""
    root = table_root(table)
    version = table.version()
    files = sorted(
        active_files(root, version).values(),
        key=lambda f: (int(str(f.action.get("modificationTime") or 0)), f.path),
    )
    heavy, small = _compaction_candidates(files, share, pack_rows, pass_rows)
    heavy_paths = {f.path for f in heavy}
    chosen_paths = heavy_paths | {f.path for f in small}
    doomed = [f for f in files if f.path in chosen_paths]
    if not doomed:
        return 0, 0
    schema = table_schema(table)
    limit = pack_rows or sum(f.num_records or 0 for f in doomed) or 1
    now = int(time.time() * 1000)
    actions: list[JSONObject] = []
    for file in doomed:
        remove = remove_action(file, now)
        remove["dataChange"] = False
        actions.append({"remove": remove})
    adds = _packed_files(root, doomed, schema, limit, now)
    actions += [{"add": add} for add in adds]
    info: JSONObject = {
        "timestamp": now,
        "operation": "OPTIMIZE",
        "operationParameters": {
            "mode": "rewrite files by deleted share" + (", pack small files" if small else ""),
            "share": share,
        },
        "clientVersion": "cdc-console",
        **dict(commit_info),
    }
    put_if_absent(root / "_delta_log" / f"{version + 1:020}.json", [{"commitInfo": info}, *actions])
    return len(doomed), len(adds)


def _compaction_candidates(
    files: Sequence[ActiveFile], share: float, pack_rows: int | None, pass_rows: int | None
) -> tuple[list[ActiveFile], list[ActiveFile]]:
    """The files mostly deleted, and the small files one pass packs (none unless two)."""
    heavy = [
        f
        for f in files
        if f.deletion_vector is not None and f.num_records and f.deleted >= share * f.num_records
    ]
    heavy_paths = {f.path for f in heavy}
    small: list[ActiveFile] = []
    if pack_rows is not None:
        small = [
            f
            for f in files
            if f.path not in heavy_paths
            and f.num_records is not None
            and f.num_records - f.deleted < pack_rows // 2
        ]
        if pass_rows is not None:
            chosen: list[ActiveFile] = []
            total = 0
            for f in small:
                live = (f.num_records or 0) - f.deleted
                if len(chosen) >= 2 and total + live > pass_rows:
                    break
                chosen.append(f)
                total += live
            small = chosen
        if len(small) < 2:
            small = []
    return heavy, small


def _packed_files(
    root: Path, doomed: Sequence[ActiveFile], schema: pa.Schema, limit: int, now: int
) -> list[JSONObject]:
    """The live rows of ``doomed`` written as files of at most ``limit`` rows; their adds."""
    adds: list[JSONObject] = []
    group: list[pa.Table] = []
    held = 0

    def write() -> None:
        nonlocal held
        if held:
            add = write_data_file(root, pa.concat_tables(group), now)
            add["dataChange"] = False
            adds.append(add)
        group.clear()
        held = 0

    for file in doomed:
        rows = live_rows(root, file, schema, None)
        while rows.num_rows:
            take = rows.slice(0, limit - held)
            group.append(take)
            held += take.num_rows
            rows = rows.slice(take.num_rows)
            if held >= limit:
                write()
    write()
    return adds


def _metadata(table: DeltaTable, lake: pa.Schema) -> JSONObject | None:
    """The ``metaData`` action that adds the columns of ``lake`` the table lacks (added
    online at the source), so they join the mirror in the commit of the batch's rows; None
    when it has them all."""
    current = table.schema()
    held = {f.name for f in current.fields}
    added = [Field.from_arrow(f) for f in lake if f.name not in held]
    if not added:
        return None
    meta = table.metadata()
    return {
        "metaData": {
            "id": meta.id,
            "name": meta.name,
            "description": meta.description,
            "format": {"provider": "parquet", "options": {}},
            "schemaString": Schema([*current.fields, *added]).to_json(),
            "partitionColumns": list(meta.partition_columns),
            "configuration": dict(meta.configuration),
            "createdTime": meta.created_time,
        }
    }


def _vectors(
    root: Path, active: Mapping[str, ActiveFile], live: _Live, now: int
) -> list[JSONObject]:
    """The ``remove`` and re-``add`` of each file that holds a changed key, with its vector
    (the old one's positions and the new); a file left with no live row is only removed."""
    deletions: dict[str, list[int]] = {}
    for path, position in live.where.values():
        deletions.setdefault(path, []).append(position)
    merged: dict[str, list[int]] = {}
    rows: dict[str, int] = {}
    for path, positions in deletions.items():
        file = active[path]
        merged[path] = sorted({*live.deleted.get(path, ()), *positions})
        rows[path] = (
            file.num_records
            if file.num_records is not None
            else pq.read_metadata(root / path).num_rows
        )
    kept = [p for p in sorted(merged) if len(merged[p]) < rows[p]]
    small = [p for p in kept if len(merged[p]) <= INLINE_ROWS]
    on_disk = [p for p in kept if p not in small]
    vectors = {p: inline_vector(merged[p]) for p in small}
    if on_disk:
        written = write_dv_file(root, [merged[p] for p in on_disk])
        vectors.update(zip(on_disk, written, strict=True))
    for path, vector in vectors.items():
        FILE_KEYS.remember(root, vector, merged[path])
    actions: list[JSONObject] = []
    for path in sorted(merged):
        old_file = active[path]
        actions.append({"remove": remove_action(old_file, now)})
        if path in vectors:
            add = plain_action(old_file.action)
            add.update(dataChange=True, modificationTime=now)
            add["stats"] = with_num_records(add.get("stats"), rows[path])
            add["deletionVector"] = vectors[path].to_json()
            actions.append({"add": add})
    return actions


def _change_rows(
    schema: TableSchema,
    lake: pa.Schema,
    live: _Live,
    known: Mapping[Key, CanonicalRow],
    deleted: Sequence[Key],
    updated: Sequence[Key],
    new_rows: pa.Table | None,
) -> pa.Table | None:
    """The change feed's rows of the commit: deletes and update pre-images as the batch's
    before images or the mirror held them, update post-images and inserts as written."""
    parts: list[tuple[pa.Table, str]] = []
    for keys, kind in ((deleted, "delete"), (updated, "update_preimage")):
        from_changes = [k for k in keys if k in known]
        if from_changes:
            rows = [known[k] for k in from_changes]
            columns = {n: [r.get(n) for r in rows] for n in schema.row_names}
            parts.append((to_lake(columns_to_table(schema, columns), lake), kind))
        held = live.old_rows([k for k in keys if k not in known])
        if held is not None:
            parts.append((held.select(lake.names), kind))
    if new_rows is not None:
        if updated:
            parts.append((new_rows.slice(0, len(updated)), "update_postimage"))
        if new_rows.num_rows > len(updated):
            parts.append((new_rows.slice(len(updated)), "insert"))
    if not parts:
        return None
    tables = [
        t.cast(lake).append_column(CHANGE_TYPE, pa.array([kind] * t.num_rows, pa.string()))
        for t, kind in parts
    ]
    return pa.concat_tables(tables)


def _find_live(
    root: Path,
    active: Mapping[str, ActiveFile],
    schema: TableSchema,
    lake: pa.Schema,
    keys: Sequence[Key],
    *,
    whole: bool,
    known: Collection[Key] = (),
) -> _Live:
    """Where ``active`` holds each of ``keys`` live; with ``whole``, their rows too (but for
    the ``known`` keys, whose rows the caller has)."""
    live = _Live()
    if not keys:
        return live
    key_columns = list(schema.key_columns)
    key_lake = pa.schema([lake.field(n) for n in key_columns])
    key_typed = pa.schema([codec_for(schema.column(n)).field for n in key_columns])
    typed = to_lake(
        pa.Table.from_arrays(
            [
                codec_for(schema.column(name)).to_arrow([k[i] for k in keys])
                for i, name in enumerate(key_columns)
            ],
            schema=key_typed,
        ),
        key_lake,
    )
    wanted = set(keys)
    first = typed.column(key_columns[0]).combine_chunks()
    files, held, hit_positions = _key_hits(root, active, key_columns, first)
    for index, positions in sorted(hit_positions.items()):
        file, data = files[index], held[index]
        if file.deletion_vector is not None:
            deleted = live.deleted[file.path] = FILE_KEYS.positions(root, file.deletion_vector)
            if deleted:
                gone = set(deleted)
                positions = [p for p in positions if p not in gone]
                if not positions:
                    continue
        taken = pa.array(positions, type=pa.uint64())
        keyed = from_lake(data.take(taken).cast(key_lake), key_typed)
        values = [
            codec_for(schema.column(n)).array_to_canonical(keyed.column(n)) for n in key_columns
        ]
        found = [
            (key, position)
            for index, position in enumerate(positions)
            if (key := tuple(v[index] for v in values)) in wanted
        ]
        for key, position in found:
            live.where[key] = (file.path, position)
        unread = [(key, position) for key, position in found if key not in known]
        if whole and unread:  # the rows themselves, of the files that hold a changed key only
            picked = _rows_at(root, file, lake, [position for _, position in unread])
            live.rows.append(picked.select(lake.names).cast(lake))
            for index, (key, _) in enumerate(unread):
                live.index[key] = (len(live.rows) - 1, index)
    return live


def _key_hits(
    root: Path, active: Mapping[str, ActiveFile], key_columns: Sequence[str], first: pa.Array
) -> tuple[list[ActiveFile], list[pa.Table], dict[int, list[int]]]:
    """The files that may hold a changed key (by their statistics), their key columns, and per
    file the positions whose first key column is one of ``first``'s values."""
    bounds = sorted(v for v in first.to_pylist() if v is not None) if _bounded(first.type) else []
    files = [f for f in active.values() if not bounds or _may_hold(f, key_columns[0], bounds)]
    held = [FILE_KEYS.key_columns(root / f.path, f.size, key_columns) for f in files]
    # One lookup over every candidate file's first key column (the changed keys are hashed
    # once, not once per file); an older file may hold the key in a narrower type the mirror
    # has since widened.
    stored = [
        (c if c.type == first.type else c.cast(first.type))
        for c in (t.column(key_columns[0]).combine_chunks() for t in held)
    ]
    starts = [0]
    for column in stored:
        starts.append(starts[-1] + len(column))
    hit_positions: dict[int, list[int]] = {}
    if stored:
        lookup = pc.is_in(pa.chunked_array(stored, type=first.type), value_set=first)
        for at in pc.indices_nonzero(lookup).to_pylist():
            index = bisect_right(starts, at) - 1
            hit_positions.setdefault(index, []).append(at - starts[index])
    return files, held, hit_positions


def _rows_at(root: Path, file: ActiveFile, lake: pa.Schema, positions: Sequence[int]) -> pa.Table:
    """The rows at ``positions`` of a data file in the lake's schema (a column the file
    predates reads as NULL)."""
    footer = FILE_KEYS.footer(root / file.path, file.size)
    present = set(footer.schema.to_arrow_schema().names)
    picked = read_positions(
        root / file.path,
        [n for n in lake.names if n in present],
        positions,
        footer,
    )
    for f in lake:
        if f.name not in present:
            picked = picked.append_column(f, pa.nulls(picked.num_rows, f.type))
    return picked


def _bounded(kind: pa.DataType) -> bool:
    return bool(pa.types.is_integer(kind))


def _may_hold(file: ActiveFile, column: str, ordered: Sequence[int]) -> bool:
    """Whether the file's statistics let it hold one of the sorted integer ``ordered``."""
    stats = file.action.get("stats")
    if not isinstance(stats, str) or not stats:
        return True
    parsed = json.loads(stats)
    low = parsed.get("minValues", {}).get(column)
    high = parsed.get("maxValues", {}).get(column)
    if not isinstance(low, int) or not isinstance(high, int):
        return True
    index = bisect_left(ordered, low)
    return index < len(ordered) and ordered[index] <= high
