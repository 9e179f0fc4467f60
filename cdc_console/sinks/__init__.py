"""Sinks: where the change stream lands, one typed table (or file) per captured table.

The seam is ``TableBatchSink`` (``base.py``). Every sink takes a micro-batch of ``ChangeRecord`` values for many tables through the same call,
``apply_batch(batch_id, schemas, records, replace_ranges=(), appends=None, commit_info=None)``,
and must be idempotent per ``batch_id`` because Spark replays the batch whose offsets were not
committed (the *Exactly once* and *Crash-safe resume* invariants). Records of one key are applied
in ``ChangeRecord.sort_key`` order.

- ``DeltaSink`` (``delta.py``): a Delta Lake mirror per table, kept by MERGE on the key, plus an
  optional append-only changelog table; Delta app transactions make retries no-ops.
- ``ChangelogJsonSink`` (``changelog_json.py``): Flink's ``changelog-json`` lines, one file per
  table per batch, replaced atomically on retry.
- ``delta_tables.py``: creating Delta tables with the layout and change-feed properties;
  ``maintenance.py``: compaction, vacuum and size reports of the lake.
- The MySQL -> Delta/Arrow type table and the canonical-value codecs are
  ``cdc_console.values.arrow``; typed chunks for the first snapshot's appends (``TypedChunk``,
  which only ``DeltaSink`` takes) are built on the read side, ``mysql/snapshot_arrow.py``;
  ``delta_files.py`` writes such a chunk's Delta data files where it was read
  (``WrittenChunk``), so that only their add actions travel to the driver.
"""

from __future__ import annotations

from cdc_console.sinks.base import (
    ReplaceRange,
    SinkError,
    SinkSchemaError,
    SinkStats,
    SnapshotChunk,
    TableBatchSink,
    TypedChunk,
)

__all__ = [
    "ReplaceRange",
    "SinkError",
    "SinkSchemaError",
    "SinkStats",
    "SnapshotChunk",
    "TableBatchSink",
    "TypedChunk",
]
