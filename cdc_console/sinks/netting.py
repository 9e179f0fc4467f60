"""Netting a batch per key: what one batch does to one table, and the changelog rows it writes.

Per-key order. The records of one table are sorted by ``ChangeRecord.sort_key`` (binlog position,
then order in the batch) and collapsed per key, last change wins: ``+I``/``+U`` leave the key
holding that row image, ``-U``/``-D`` leave it absent. So ``-U k, +U k`` nets to an upsert,
``-D k, +I k`` to an upsert of the new row, a primary-key change (``-U old``, ``+U new``) to a
delete of the old key and an upsert of the new one. Range replaces (``ReplaceRange``) take
effect at their high watermark among the records. Shared by every sink: the Delta sink MERGEs
the nets, the JSON changelog sink writes the changes; ``sinks.counted`` nets tables without a
unique key by multiplicity instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

import pyarrow as pa
import pyarrow.compute as pc

from cdc_console.core.records import (
    OP_DELETE,
    OP_DELETE_KEY,
    OP_UPDATE_AFTER,
    OP_UPDATE_BEFORE,
    PARTIAL_OPS,
    UPSERT_OPS,
    ChangeRecord,
)
from cdc_console.core.schema import TableSchema
from cdc_console.core.values import CanonicalRow
from cdc_console.sinks.base import Key, Position, ReplaceRange, SinkError
from cdc_console.sinks.change_columns import ChangeColumns


@dataclass(frozen=True, slots=True)
class PlannedChange:
    """One changelog row: a change record, or a ``-D`` written by a range replace (seq -1)."""

    op: str
    row: CanonicalRow
    position: Position
    seq: int
    ts_ms: int


@dataclass
class TableBatchPlan:
    """What one batch does to one table: net change per key, and the changelog rows in order."""

    # key -> the row it holds after the batch, or None: absent (delete). Plain dicts, no objects:
    # this is the per-record hot path.
    nets: dict[Key, CanonicalRow | None] = field(default_factory=dict)
    changes: list[PlannedChange] = field(default_factory=list)
    range_deleted: int = 0
    #: with ``want_befores``: the row a key held when the batch began, as the before image of
    #: its first change says (keys whose first change is a ``-U`` or ``-D``)
    befores: dict[Key, CanonicalRow] = field(default_factory=dict)


def _sort_key(record: ChangeRecord) -> tuple[int, int, int, int, int, int]:
    return record.sort_key


_POSITION = attrgetter("file_index", "pos", "event_index", "row_index")


def _key_of(record: ChangeRecord) -> Key:
    try:
        return record.key_values()
    except ValueError as exc:
        raise SinkError(f"bad key in change record {record}: {exc}") from exc


def _row_of(record: ChangeRecord, names: Sequence[str]) -> CanonicalRow:
    try:
        row = record.row_dict()
    except ValueError as exc:
        raise SinkError(f"bad row in change record {record}: {exc}") from exc
    if row.keys() != set(names):
        raise SinkError(
            f"row columns {list(row)} of change record {record} do not match the table's "
            f"columns {list(names)} (schema changed?)"
        )
    return row


def _parse_keys(records: Sequence[ChangeRecord]) -> list[Key]:
    """All records' keys, parsed in one ``json.loads`` (per-call overhead dominates otherwise);
    on any doubt, per record, so that the error names the bad record."""
    parsed = _parse_key_texts([r.key for r in records])
    return parsed if parsed is not None else [_key_of(r) for r in records]


def _parse_key_texts(texts: Sequence[str]) -> list[Key] | None:
    """Key texts as tuples in one ``json.loads``; None when any is not a JSON list."""
    try:
        parsed = json.loads("[" + ",".join(texts) + "]")
    except ValueError:
        return None
    if (
        not isinstance(parsed, list)
        or len(parsed) != len(texts)
        or not all(type(k) is list for k in parsed)
    ):
        return None
    return [tuple(k) for k in parsed]


def parse_rows(records: Sequence[ChangeRecord], names: Sequence[str]) -> list[CanonicalRow]:
    """All records' row images in one ``json.loads``; each must have exactly the columns."""
    parsed = _parse_row_texts([r.row for r in records], names)
    return parsed if parsed is not None else [_row_of(r, names) for r in records]


def _parse_row_texts(texts: Sequence[str], names: Sequence[str]) -> list[CanonicalRow] | None:
    """Row texts as dicts in one ``json.loads``; None when any lacks or adds a column."""
    try:
        parsed = json.loads("[" + ",".join(texts) + "]")
    except ValueError:
        return None
    expected = set(names)
    if (
        not isinstance(parsed, list)
        or len(parsed) != len(texts)
        or not all(type(row) is dict and row.keys() == expected for row in parsed)
    ):
        return None
    return parsed


def split_keys(
    records: Sequence[ChangeRecord], replaces: Sequence[ReplaceRange]
) -> dict[str, set[Key]]:
    """Per replaced split id, the keys the batch's rows of that split carry."""
    present: dict[str, set[Key]] = {r.split_id: set() for r in replaces}
    own = [r for r in records if r.split_id and r.split_id in present]
    for record, key in zip(own, _parse_keys(own), strict=True):
        present[record.split_id].add(key)
    return present


def marker_position(replace: ReplaceRange, records: Sequence[ChangeRecord]) -> Position:
    if replace.position is not None:
        return replace.position
    own = [_POSITION(r) for r in records if r.split_id == replace.split_id]
    if own:
        file_index, pos, event_index, row_index = min(own)
        return (file_index, pos, event_index, row_index)
    return (0, 0, 0, 0)


def patched_keys(records: Sequence[ChangeRecord]) -> set[Key]:
    """The keys of the batch's changes logged with partial row images (``PARTIAL_OPS``): the
    rows a sink must hold before the batch to apply them (``bases`` of ``plan_table_batch``)."""
    if isinstance(records, ChangeColumns):
        table = records.table
        partial = pc.is_in(table.column("op"), value_set=pa.array(sorted(PARTIAL_OPS)))
        if not pc.any(partial).as_py():
            return set()
        texts = pc.fill_null(table.filter(partial).column("key"), "").to_pylist()
        parsed = _parse_key_texts(texts)
        if parsed is not None:
            return set(parsed)
    return set(_parse_keys([r for r in records if r.op in PARTIAL_OPS]))


def _patch_of(record: ChangeRecord, names: Sequence[str]) -> CanonicalRow:
    try:
        row = record.row_dict()
    except ValueError as exc:
        raise SinkError(f"bad row in change record {record}: {exc}") from exc
    unknown = [name for name in row if name not in names]
    if unknown:
        raise SinkError(
            f"change record {record} names column {unknown[0]!r}, which the table does not "
            f"have (columns {list(names)}; schema changed?)"
        )
    return row


def _apply_partial(
    plan: TableBatchPlan,
    schema: TableSchema,
    record: ChangeRecord,
    key: Key,
    bases: Mapping[Key, CanonicalRow],
    want_changes: bool,
) -> None:
    """A patch (``+P``) or a delete by key (``-P``): the row the key holds at this point of the
    batch (its net so far, else the sink's row before the batch) is what it changes."""
    nets = plan.nets
    held = nets[key] if key in nets else bases.get(key)
    position = _POSITION(record)
    if record.op == OP_DELETE_KEY:
        nets[key] = None
        if want_changes and held is not None:
            plan.changes.append(PlannedChange(OP_DELETE, held, position, record.seq, record.ts_ms))
        return
    if held is None:
        raise SinkError(
            f"{schema.table_id}: an update logged with a partial row image (a writer's "
            f"binlog_row_image MINIMAL or NOBLOB) changes key {list(key)}, a row the mirror "
            f"does not hold: the mirror lacks a row of its source. Fix: cdc-console redump "
            f"--table {schema.table_id}"
        )
    row = {**held, **_patch_of(record, schema.row_names)}
    nets[key] = row
    if want_changes:
        plan.changes.append(
            PlannedChange(OP_UPDATE_BEFORE, held, position, record.seq, record.ts_ms)
        )
        plan.changes.append(PlannedChange(OP_UPDATE_AFTER, row, position, record.seq, record.ts_ms))


def plan_table_batch(
    schema: TableSchema,
    records: Sequence[ChangeRecord],
    replaces: Sequence[ReplaceRange],
    absent: Sequence[Mapping[Key, CanonicalRow | None]],
    want_changes: bool,
    bases: Mapping[Key, CanonicalRow] | None = None,
    want_befores: bool = False,
) -> TableBatchPlan:
    """Net one table's batch per key, and list its changelog rows, in apply order.

    The walk visits the records by ``sort_key`` and each range replace at its HW, just before
    the rows at that position; per key the last change wins. ``absent[i]`` holds the keys (with
    before images, or None) that the sink's state *before the batch* has in ``replaces[i]``'s
    range and its split lacks. ``want_changes`` also collects the changelog rows (it parses the
    before images of ``-U``/``-D``, which the MERGE alone does not need). ``bases`` are the
    sink's rows before the batch of the keys changed by partial row images (``patched_keys``),
    which such a change completes (a ``+P`` then nets to the whole row). ``want_befores`` fills
    ``befores`` (not with range replaces, whose deletes come first). Shared by both sinks.
    """
    names = schema.row_names
    ordered = sorted(records, key=_sort_key)
    keys = _parse_keys(ordered)
    firsts = _first_befores(ordered, keys) if want_befores and not replaces else set()
    needs_row = [
        (want_changes or r.op in UPSERT_OPS or i in firsts) and r.op not in PARTIAL_OPS
        for i, r in enumerate(ordered)
    ]
    rows = iter(parse_rows([r for r, need in zip(ordered, needs_row, strict=True) if need], names))
    presents: dict[str, set[Key]] = {r.split_id: set() for r in replaces}
    for record, key in zip(ordered, keys, strict=True):
        if record.split_id and record.split_id in presents:
            presents[record.split_id].add(key)
    markers = sorted(((*marker_position(r, ordered), -1, -1), i) for i, r in enumerate(replaces))

    plan = TableBatchPlan()
    nets = plan.nets

    def replace_at(marker: tuple[tuple[int, int, int, int, int, int], int]) -> None:
        marker_key, index = marker
        mirror_absent = absent[index] if absent else {}
        _replace(plan, schema, replaces[index], marker_key, mirror_absent, presents, want_changes)

    next_marker = 0
    for index, (record, key, needs) in enumerate(zip(ordered, keys, needs_row, strict=True)):
        if next_marker < len(markers):
            sort_key = record.sort_key
            while next_marker < len(markers) and markers[next_marker][0] < sort_key:
                replace_at(markers[next_marker])
                next_marker += 1
        if record.op in PARTIAL_OPS:
            _apply_partial(plan, schema, record, key, bases or {}, want_changes)
            continue
        row = next(rows) if needs else None
        if index in firsts:
            assert row is not None
            plan.befores[key] = row
        upsert = record.op in UPSERT_OPS
        nets[key] = row if upsert else None
        if want_changes:
            assert row is not None
            plan.changes.append(
                PlannedChange(record.op, row, _POSITION(record), record.seq, record.ts_ms)
            )
    for marker in markers[next_marker:]:
        replace_at(marker)
    return plan


def _first_befores(ordered: Sequence[ChangeRecord], keys: Sequence[Key]) -> set[int]:
    """The indexes of the records that are their key's first change in the batch and carry the
    whole row the key held before it (a ``-U`` or ``-D``; a partial image says too little)."""
    first: dict[Key, int] = {}
    for index, key in enumerate(keys):
        first.setdefault(key, index)
    return {i for i in first.values() if ordered[i].op in _BEFORE_OPS}


_BEFORE_OPS = frozenset({OP_UPDATE_BEFORE, OP_DELETE})


def fold_columns(
    schema: TableSchema,
    changes: ChangeColumns,
    befores: dict[Key, CanonicalRow] | None = None,
) -> dict[Key, CanonicalRow | None]:
    """``plan_table_batch(...).nets`` for a table's changes held as columns, without a range
    replace or changelog rows: the same nets, in the same order, with no record objects.

    The records are put in ``sort_key`` order by Arrow's stable sort, the keys parsed in one
    ``json.loads``, and only the row images that survive the fold are parsed. Anything these
    shortcuts cannot vouch for (an unknown op, a key or row that does not parse) goes the
    records' way, whose errors name the bad record. ``befores``, when given, is filled as
    ``TableBatchPlan.befores``.
    """
    table = changes.table

    def by_records() -> dict[Key, CanonicalRow | None]:
        plan = plan_table_batch(
            schema, changes.records(), (), (), want_changes=False, want_befores=befores is not None
        )
        if befores is not None:
            befores.update(plan.befores)
        return plan.nets

    if not changes.ops_valid():
        return by_records()
    split_ids = pc.fill_null(table.column("split_id"), "")
    tier = pc.if_else(pc.equal(split_ids, ""), 1, 0)
    order = pa.Table.from_arrays(
        [*(table.column(name) for name in _SORT_COLUMNS), tier, table.column("seq")],
        names=[*_SORT_COLUMNS, "tier", "seq"],
    )
    indices = pc.sort_indices(order, sort_keys=[(name, "ascending") for name in order.column_names])
    ordered = table.select(["op", "key", "row"]).take(indices)
    keys = _parse_key_texts(pc.fill_null(ordered.column("key"), "").to_pylist())
    if keys is None:
        return by_records()
    last = {key: index for index, key in enumerate(keys)}
    ops = ordered.column("op").to_pylist()
    upserts = [index for index in last.values() if ops[index] in UPSERT_OPS]
    texts = pc.fill_null(ordered.column("row").take(pa.array(upserts, type=pa.int64())), "")
    rows = _parse_row_texts(texts.to_pylist(), schema.row_names)
    if rows is None:
        return by_records()
    if befores is not None:
        first: dict[Key, int] = {}
        for index, key in enumerate(keys):
            first.setdefault(key, index)
        held = [i for i in first.values() if ops[i] in _BEFORE_OPS]
        images = pc.fill_null(ordered.column("row").take(pa.array(held, type=pa.int64())), "")
        parsed = _parse_row_texts(images.to_pylist(), schema.row_names)
        if parsed is None:
            return by_records()
        befores.update((keys[i], row) for i, row in zip(held, parsed, strict=True))
    by_index = dict(zip(upserts, rows, strict=True))
    return {key: by_index.get(index) for key, index in last.items()}


_SORT_COLUMNS = ("file_index", "pos", "event_index", "row_index")


def _replace(
    plan: TableBatchPlan,
    schema: TableSchema,
    replace: ReplaceRange,
    sort_key: tuple[int, int, int, int, int, int],
    mirror_absent: Mapping[Key, CanonicalRow | None],
    presents: Mapping[str, set[Key]],
    want_changes: bool,
) -> None:
    """Apply one range replace at its HW: delete every key held at this point (the sink's
    keys from ``absent`` plus the batch's upserts so far) that is in range and not in the split."""
    nets = plan.nets
    key_columns = list(schema.key_columns)
    present = presents.get(replace.split_id, set())
    doomed: list[tuple[Key, CanonicalRow | None]] = []
    for key, sink_row in mirror_absent.items():
        if key not in nets:
            doomed.append((key, sink_row))
        elif nets[key] is not None:
            doomed.append((key, nets[key]))
    for key, row in nets.items():
        if (
            row is not None
            and key not in present
            and key not in mirror_absent
            and len(key) == len(key_columns)
            and replace.in_range(dict(zip(key_columns, key, strict=True)))
        ):
            doomed.append((key, row))
    for key, before in doomed:
        nets[key] = None
        if want_changes and before is not None:
            plan.changes.append(PlannedChange(OP_DELETE, before, sort_key[:4], -1, replace.ts_ms))
    plan.range_deleted += len(doomed)
