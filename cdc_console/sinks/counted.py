"""Counted mirrors: a table without a unique key, kept as its distinct rows and how many of each.

A table with no primary key and no NOT NULL column with a UNIQUE index of its own may hold the
same row twice, and nothing tells the two apart: a row's only identity is its content
(``TableSchema.counted``, whose ``key_columns`` are all its columns). Its mirror therefore holds
each distinct row once, with ``COUNT_COLUMN`` saying how many source rows have that content.
Expanding each mirror row ``COUNT_COLUMN`` times gives the source table back (README, "Tables
without a unique key").

Netting. The changes of a multiset commute: whatever their order, each distinct row ends with
its count plus the inserts minus the deletes. So a batch nets, per distinct row, to a change of
its count (``+I``/``+U`` add one, ``-U``/``-D`` take one away); an UPDATE is the two halves on two
rows. A range replace (re-dump) at its high watermark sets the count of every row in its range to
zero -- the mirror's rows there, and those the batch added before -- and the split's own rows,
``+I`` records at that watermark, add theirs: the count becomes *absolute*, the state of the range
at the watermark plus the changes after it. One MERGE applies the nets, matched on every column
(``IS NOT DISTINCT FROM`` where nullable): an absolute count replaces the mirror's, a relative
one adds to it; a count that reaches zero deletes the row (``sinks.delta_counted``).

Exactness needs a chunk's rows to be exact at its high watermark, which the keyed backfill cannot
give (replaying an insert the SELECT already saw would count it twice): ``snapshot_reader`` reads
a counted chunk inside a consistent snapshot at a known binlog position, or by quiet windows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cdc_console.core.records import OP_DELETE, UPSERT_OPS, ChangeRecord
from cdc_console.core.schema import TableSchema
from cdc_console.core.values import CanonicalRow
from cdc_console.sinks.base import Key, ReplaceRange
from cdc_console.sinks.netting import PlannedChange, marker_position, parse_rows

#: a distinct row and how many of it the mirror holds: ``{key: (row, count)}``
MirrorCounts = dict[Key, tuple[CanonicalRow, int]]


@dataclass(slots=True)
class CountedNet:
    """What a batch does to one distinct row: adds ``count`` to the mirror's, or (absolute)
    makes it ``count``."""

    row: CanonicalRow
    count: int = 0
    absolute: bool = False


@dataclass
class CountedPlan:
    """A counted table's batch: net count change per distinct row, changelog rows in order."""

    nets: dict[Key, CountedNet] = field(default_factory=dict)
    changes: list[PlannedChange] = field(default_factory=list)
    range_deleted: int = 0


def plan_counted_batch(
    schema: TableSchema,
    records: Sequence[ChangeRecord],
    replaces: Sequence[ReplaceRange],
    held: Sequence[MirrorCounts],
    want_changes: bool,
) -> CountedPlan:
    """Net a counted table's batch per distinct row (module docstring). ``held[i]`` holds the
    mirror's rows in ``replaces[i]``'s range with their counts, before the batch."""
    ordered = sorted(records, key=lambda r: r.sort_key)
    rows = parse_rows(ordered, schema.row_names)
    key_names = schema.key_columns
    markers = sorted(((*marker_position(r, ordered), -1, -1), i) for i, r in enumerate(replaces))
    plan = CountedPlan()
    nets = plan.nets

    def replace_at(marker: tuple[tuple[int, int, int, int, int, int], int]) -> None:
        sort_key, index = marker
        replace = replaces[index]
        mirror = held[index] if held else {}
        doomed: dict[Key, tuple[CanonicalRow, int]] = {}
        for key, (row, count) in mirror.items():
            net = nets.get(key)
            now = count if net is None else (net.count if net.absolute else count + net.count)
            doomed[key] = (row, now)
        for key, net in nets.items():
            if key not in doomed and replace.in_range(dict(zip(key_names, key, strict=True))):
                doomed[key] = (net.row, net.count)  # the mirror holds none of it
        for key, (row, count) in doomed.items():
            nets[key] = CountedNet(row, 0, absolute=True)
            plan.range_deleted += max(count, 0)
            if want_changes:
                change = PlannedChange(OP_DELETE, row, sort_key[:4], -1, replace.ts_ms)
                plan.changes.extend([change] * max(count, 0))

    next_marker = 0
    for record, row in zip(ordered, rows, strict=True):
        while next_marker < len(markers) and markers[next_marker][0] < record.sort_key:
            replace_at(markers[next_marker])
            next_marker += 1
        key = tuple(row[name] for name in key_names)
        net = nets.get(key)
        if net is None:
            net = nets[key] = CountedNet(row)
        net.count += 1 if record.op in UPSERT_OPS else -1
        if want_changes:
            position = (record.file_index, record.pos, record.event_index, record.row_index)
            plan.changes.append(PlannedChange(record.op, row, position, record.seq, record.ts_ms))
    for marker in markers[next_marker:]:
        replace_at(marker)
    return plan
