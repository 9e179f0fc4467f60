"""``BinlogSplitReader`` and ``should_emit``: the binlog phase of the incremental snapshot.

After a table's chunks are finished, each chunk's rows are correct as of that chunk's high
watermark, and chunks finished at different times have different watermarks. A binlog change on
key k at position p is therefore emitted only if p lies at or after the high watermark of the chunk
that owns k; earlier changes are already in that chunk's snapshot. From the table's largest high
watermark on, every change streams freely.

Positions are compared as event starts: a watermark is a boundary between event groups, so a change
whose event starts at or after the watermark was committed after the watermark was read.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from cdc_console.config import SourceConfig
from cdc_console.mysql.binlog import RowChange, read_window
from cdc_console.mysql.schema import TableId, TableSchema
from cdc_console.source.jsonvalues import dump_json
from cdc_console.source.keys import KeyOrder
from cdc_console.source.normalize import RowNormalizer, raw_chunk_key
from cdc_console.source.offset import BinlogOffset, binlog_file_index
from cdc_console.source.records import ChangeRecord
from cdc_console.source.splits import BinlogSplit, TableStreamFilter

log = logging.getLogger(__name__)


class SplitWatermarks:
    """The finished splits of one table, indexed for a fast owner lookup by chunk key."""

    def __init__(self, stream_filter: TableStreamFilter, order: KeyOrder) -> None:
        self.order = order
        self.start = stream_filter.resume_from
        self.max_high_watermark = stream_filter.max_high_watermark
        ordered = sorted(
            stream_filter.finished_splits,
            key=lambda f: (
                f.split.range.start is not None,
                order.sort_key(f.split.range.start) if f.split.range.start is not None else 0,
            ),
        )
        self._starts = [order.sort_key(f.split.range.start) for f in ordered[1:]]
        self._infos = ordered

    def owner_high_watermark(self, key: Any) -> BinlogOffset | None:
        if not self._infos:
            return None
        index = bisect.bisect_right(self._starts, self.order.sort_key(key))
        info = self._infos[index]
        if not info.split.range.contains(key, self.order):
            return None
        return info.high_watermark


def should_emit(watermarks: SplitWatermarks, position: BinlogOffset, key: Any) -> bool:
    """Whether a change at ``position`` on chunk key ``key`` is new to the sink."""
    if watermarks.start is not None and position < watermarks.start:
        return False
    if watermarks.max_high_watermark is None or position >= watermarks.max_high_watermark:
        return True
    high = watermarks.owner_high_watermark(key)
    if high is None:
        log.warning("key %r at %s belongs to no finished split; not emitted", key, position)
        return False
    return position >= high


class BinlogSplitReader:
    """Reads one ``BinlogSplit`` window and emits the changes ``should_emit`` lets through."""

    def __init__(
        self, source: SourceConfig, schemas: Mapping[TableId, TableSchema], server_id: int
    ) -> None:
        self.source = source
        self.schemas = dict(schemas)
        self.server_id = server_id
        self.normalizers = {t: RowNormalizer(s) for t, s in self.schemas.items()}
        self.emitted = 0
        self.skipped = 0
        self.last_event_ts: int | None = None

    def read(self, split: BinlogSplit) -> Iterator[ChangeRecord]:
        watermarks: dict[TableId, SplitWatermarks] = {}
        key_columns = {}
        for stream_filter in split.tables:
            schema = self.schemas[stream_filter.table_id]
            column = schema.column(schema.chunk_key)
            key_columns[stream_filter.table_id] = column
            watermarks[stream_filter.table_id] = SplitWatermarks(
                stream_filter, KeyOrder.for_column(column)
            )
        expected = {t: self.schemas[t].column_names for t in watermarks}
        log.info("binlog split [%s, %s): %d tables", split.start, split.end, len(watermarks))
        seq = 0
        for change in read_window(
            self.source, self.server_id, split.start, split.end, list(watermarks), expected
        ):
            marks = watermarks[change.table_id]
            column = key_columns[change.table_id]
            for op, image, sources in self._halves(change):
                key = raw_chunk_key(column, image.get(column.name), binlog=True)
                if not should_emit(marks, change.position, key):
                    self.skipped += 1
                    continue
                yield self._record(change, op, image, sources, seq)
                seq += 1
                self.emitted += 1
            self.last_event_ts = change.timestamp
        log.info(
            "binlog split [%s, %s) done: %d changes emitted, %d skipped by watermarks",
            split.start,
            split.end,
            self.emitted,
            self.skipped,
        )

    @staticmethod
    def _halves(change: RowChange) -> list[tuple[str, dict[str, Any], dict[str, str] | None]]:
        """An update is two records, each checked against the chunk owning its own key."""
        if change.kind == "insert":
            assert change.after is not None
            return [("+I", change.after, change.after_none_sources)]
        if change.kind == "delete":
            assert change.before is not None
            return [("-D", change.before, change.before_none_sources)]
        assert change.before is not None and change.after is not None
        return [
            ("-U", change.before, change.before_none_sources),
            ("+U", change.after, change.after_none_sources),
        ]

    def _record(
        self,
        change: RowChange,
        op: str,
        image: dict[str, Any],
        sources: dict[str, str] | None,
        seq: int,
    ) -> ChangeRecord:
        normalizer = self.normalizers[change.table_id]
        row = normalizer.binlog_row(image, sources)
        position = change.position
        return ChangeRecord(
            database=change.table_id.database,
            table=change.table_id.table,
            op=op,
            key=dump_json(list(normalizer.key_of(row))),
            row=dump_json(row),
            file_index=binlog_file_index(position.file),
            pos=position.pos,
            event_index=position.events_to_skip,
            row_index=position.rows_to_skip,
            seq=seq,
            ts_ms=change.timestamp * 1000,
            split_id="",
        )
