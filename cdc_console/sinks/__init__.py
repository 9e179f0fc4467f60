"""Sinks: where the change stream lands, one typed table (or file) per captured table.

Every sink takes a micro-batch of ``ChangeRecord`` values for many tables through the same call,
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

import importlib
from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from cdc_console.core.records import ChangeRecord
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.sinks.base import (
    ReplaceRange,
    SinkError,
    SinkSchemaError,
    SinkStats,
    SnapshotChunk,
    TableBatchSink,
    TypedChunk,
)

#: the names this package exports from its heavier modules, imported on first use: Spark's
#: executors import ``delta_files`` (pyarrow only) and should not load delta-rs with it
_LAZY = {
    "ChangelogJsonSink": "cdc_console.sinks.changelog_json",
    "replay_changelog": "cdc_console.sinks.changelog_json",
    "DeltaSink": "cdc_console.sinks.delta",
    "SinkTypeError": "cdc_console.values.arrow",
    "arrow_schema": "cdc_console.values.arrow",
    "codec_for": "cdc_console.values.arrow",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


class Sink(Protocol):
    """What the pipeline's ``foreachBatch`` needs from a sink."""

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
    ) -> dict[TableId, SinkStats]: ...


__all__ = [
    "ChangelogJsonSink",
    "DeltaSink",
    "ReplaceRange",
    "Sink",
    "SinkError",
    "SinkSchemaError",
    "SinkStats",
    "SinkTypeError",
    "SnapshotChunk",
    "TableBatchSink",
    "TypedChunk",
    "arrow_schema",
    "codec_for",
    "replay_changelog",
]
