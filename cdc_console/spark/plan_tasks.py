"""A batch plan as the Spark tasks that run it: one snapshot task per reader of its chunks,
and its binlog window whole or in parts read side by side.

Tasks are plain picklable values (``spark.partitions``); this module only decides which run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.options import SchemaChanges, SinkKind
from cdc_console.core.plan import BatchPlan
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.sinks.lake_target import LakeTarget
from cdc_console.spark.partitions import BinlogTask, ChunkTask, SnapshotTask
from cdc_console.state.store import TableState

log = logging.getLogger(__name__)

#: transaction starts inside ``(start, end)`` near the given byte positions of ``start``'s file
PartStarts = Callable[[BinlogOffset, BinlogOffset, list[int]], list[BinlogOffset]]


def window_parts(
    window: BinlogTask, config: PipelineConfig, starts: PartStarts
) -> list[BinlogTask]:
    """The tasks that read one binlog window: itself, or, for a window of at least two
    ``binlog_part_bytes`` in one binlog file, up to ``binlog_readers`` parts of about equal bytes.

    Each part runs from a transaction start (``starts``, found server-side) to the next, so it
    reads only its own bytes: its row events' TABLE_MAPs are in its own transactions. What a
    part cannot see is a DDL in a part before it; the driver drops a table's changes from the
    first change of shape any part reports (``source.reshaped``), which is what one reader of
    the whole window leaves out, so the parts' changes together are exactly that reader's.
    Each part reads with a server id of its own: the ones no chunk reader and no verification
    uses.
    """
    split = window.split
    start, end = split.start, split.end
    spare = config.source.server_ids[1 + config.snapshot.parallelism : -1]
    size = end.pos - start.pos if start.file == end.file else 0
    count = min(config.binlog_readers, 1 + len(spare), size // config.binlog_part_bytes)
    if count < 2:
        return [window]
    found = starts(start, end, [start.pos + size * k // count for k in range(1, count)])
    if not found:
        return [window]
    ids = [window.server_id, *spare]
    cuts = [start, *found, end]
    log.info(
        "binlog window [%s, %s): %d bytes read in %d parts from transaction starts %s",
        start,
        end,
        size,
        len(cuts) - 1,
        ", ".join(str(c.pos) for c in found),
    )
    return [
        replace(window, split=replace(split, start=cuts[k], end=cuts[k + 1]), server_id=ids[k])
        for k in range(len(cuts) - 1)
    ]


def appendable_tables(
    config: PipelineConfig, tables: Sequence[TableState], schemas: Mapping[TableId, TableSchema]
) -> frozenset[TableId]:
    """Tables whose plain (non-``replace``) chunks may travel as typed rows that the sink
    appends without a MERGE.

    Only into a Delta mirror, and only for a table's first snapshot: its chunks are disjoint
    key ranges that nothing else writes until the table catches up, so appending is the
    same as upserting. A re-dump (``replace``) must delete and overwrite, a table that has
    streamed before (``stream_from`` set: a re-dump interrupted by a removal) has rows in
    those ranges, and a table without a primary key may hold duplicate chunk keys, which
    only the MERGE collapses. Any other chunk takes the MERGE path, which is always right.
    """
    if config.sink.kind != SinkKind.DELTA:
        return frozenset()
    return frozenset(
        t.table_id
        for t in tables
        if t.state == Lifecycle.SNAPSHOTTING
        and t.stream_from is None
        and t.table_id in schemas
        and schemas[t.table_id].primary_key
    )


def plan_tasks(
    plan: BatchPlan,
    schemas: Mapping[TableId, TableSchema],
    appendable: frozenset[TableId],
    config: PipelineConfig,
    starts: PartStarts,
    lake: LakeTarget | None,
) -> list[SnapshotTask | BinlogTask]:
    """The tasks of one planned batch: a snapshot task per reader group of its chunks (typed
    chunks write their own files to ``lake``), then its binlog window's parts."""
    tasks: list[SnapshotTask | BinlogTask] = []
    park = config.schema_changes != SchemaChanges.STOP
    for server_id, group in plan.reader_groups():
        chunks = tuple(
            ChunkTask(
                planned.split,
                schemas[planned.split.table_id],
                typed=not planned.replace and planned.split.table_id in appendable,
            )
            for planned in group
        )
        target = lake if any(c.typed for c in chunks) else None
        tasks.append(SnapshotTask(server_id, chunks, park_on_schema_change=park, lake=target))
    if plan.binlog is not None:
        window = BinlogTask(
            plan.binlog,
            plan.binlog_server_id,
            tuple(schemas[f.table_id] for f in plan.binlog.tables),
            park_on_schema_change=park,
            patches=config.sink.kind == SinkKind.DELTA,
        )
        tasks += window_parts(window, config, starts)
    return tasks
