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
from dataclasses import dataclass

from cdc_console.config import SourceConfig
from cdc_console.core.keys import KeyOrder
from cdc_console.core.offset import BinlogOffset, binlog_file_index
from cdc_console.core.records import PARTIAL_OPS, ChangeRecord, RecordDict
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.core.schema_change import ChangeCause, SchemaChange
from cdc_console.core.splits import BinlogSplit, TableStreamFilter
from cdc_console.core.values import CanonicalRow, CanonicalValue, RawKey
from cdc_console.errors import SchemaChangedError, SourceError, redact
from cdc_console.mysql import partial_images
from cdc_console.mysql.binlog import read_window_events
from cdc_console.mysql.key_weights import key_order
from cdc_console.mysql.window_walk import RowEvent
from cdc_console.source.jsonvalues import compact_encoder
from cdc_console.values.canonical import RowNormalizer, raw_chunk_key

log = logging.getLogger(__name__)


class SplitWatermarks:
    """The finished splits of one table, indexed for a fast owner lookup by chunk key."""

    def __init__(self, stream_filter: TableStreamFilter, order: KeyOrder) -> None:
        self.order = order
        self.start = stream_filter.resume_from
        self.max_high_watermark = stream_filter.max_high_watermark
        order.warm(f.split.range.start for f in stream_filter.finished_splits)
        ordered = sorted(
            stream_filter.finished_splits,
            key=lambda f: (
                f.split.range.start is not None,
                order.sort_key(f.split.range.start) if f.split.range.start is not None else 0,
            ),
        )
        self._starts = [order.sort_key(f.split.range.start) for f in ordered[1:]]
        self._infos = ordered
        self._pending = stream_filter.pending_ranges

    def owner_high_watermark(self, key: RawKey) -> BinlogOffset | None:
        if not self._infos:
            return None
        # a NULL chunk key belongs to the first chunk (ChunkRange.contains)
        index = 0 if key is None else bisect.bisect_right(self._starts, self.order.sort_key(key))
        info = self._infos[index]
        if not info.split.range.contains(key, self.order):
            return None
        return info.high_watermark

    def pending(self, key: RawKey) -> bool:
        """Whether ``key`` falls in a chunk of the table that is being read (again)."""
        return any(r.contains(key, self.order) for r in self._pending)


class UnplacedKey(LookupError):
    """A change's chunk key falls in none of its table's chunks, finished or being read (the
    chunks cover every key, so only a bug or an order that disagrees with the server's gets
    here): whether a snapshot holds it cannot be told, so it is neither emitted nor passed over
    in silence (the table is read again)."""


def should_emit(watermarks: SplitWatermarks, position: BinlogOffset, key: RawKey) -> bool:
    """Whether a change at ``position`` on chunk key ``key`` is new to the sink: after its
    chunk's high watermark, or in a chunk being read again (not: that read holds it). A key
    in no chunk at all raises ``UnplacedKey`` (the table is read again), never passed over in
    silence."""
    if watermarks.start is not None and position < watermarks.start:
        return False
    if watermarks.max_high_watermark is None or position >= watermarks.max_high_watermark:
        return True
    high = watermarks.owner_high_watermark(key)
    if high is None:
        if watermarks.pending(key):
            return False  # its chunk is being read again, and that read holds it
        raise UnplacedKey(
            f"chunk key {key!r} at {position} falls in none of the chunks, finished or pending"
        )
    return position >= high


# ``dump_json``'s exact encoding (checked by tests/unit/test_binlog_decode.py), with the encoder
# built once instead of on every call: two encodings per record are a visible share of the reader.
_encode_json = compact_encoder()


def _encode_key(key: tuple[CanonicalValue, ...]) -> str:
    """``_encode_json(list(key))``, spelled directly for a lone integer key (the usual id)."""
    if len(key) == 1 and type(key[0]) is int:
        return f"[{key[0]}]"
    return _encode_json(list(key))


_HALVES: dict[str, tuple[tuple[str, str, str], ...]] = {
    # kind -> (op, image key, none-sources key) per record; an update is two records, each
    # checked against the chunk owning its own key
    "insert": (("+I", "values", "none_sources"),),
    "delete": (("-D", "values", "none_sources"),),
    "update": (
        ("-U", "before_values", "before_none_sources"),
        ("+U", "after_values", "after_none_sources"),
    ),
}


def _record(
    shared: RecordDict,
    op: str,
    key: tuple[CanonicalValue, ...],
    row: CanonicalRow,
    row_index: int,
    seq: int,
) -> RecordDict:
    """One change record as ``ChangeRecord.to_dict()`` gives it, built directly."""
    return {
        **shared,
        "op": op,
        "key": _encode_key(key),
        "row": _encode_json(row),
        "row_index": row_index,
        "seq": seq,
    }


@dataclass(frozen=True, slots=True)
class _TableFilter:
    """What a binlog split filters one table's changes by: its finished chunks' watermarks and,
    as sort keys (``BinlogOffset``'s order), should_emit's two position-only tests."""

    marks: SplitWatermarks
    column: ColumnInfo
    #: changes before the table's resume position are already applied
    start: tuple[int, int, int, int] | None
    #: from the largest high watermark on, every change streams freely
    max: tuple[int, int, int, int] | None
    names: list[str]
    normalizer: RowNormalizer

    @classmethod
    def of(
        cls,
        stream_filter: TableStreamFilter,
        schema: TableSchema,
        normalizer: RowNormalizer,
        source: SourceConfig,
    ) -> _TableFilter:
        column = schema.column(schema.chunk_key)
        marks = SplitWatermarks(stream_filter, key_order(column, source))
        return cls(
            marks,
            column,
            marks.start.sort_key if marks.start is not None else None,
            marks.max_high_watermark.sort_key if marks.max_high_watermark is not None else None,
            schema.binlog_names,
            normalizer,
        )


class BinlogSplitReader:
    """Reads one ``BinlogSplit`` window and emits the changes ``should_emit`` lets through."""

    def __init__(
        self,
        source: SourceConfig,
        schemas: Mapping[TableId, TableSchema],
        server_id: int,
        *,
        park_on_schema_change: bool = False,
        patches: bool = False,
    ) -> None:
        self.source = source
        #: the sink applies partial row images (``mysql.partial_images``) as patches and
        #: deletes by key; without it, a table logged with them is held and read again
        self.patches = patches
        #: with it, a table whose shape changes is left out of the window from that position
        #: on and reported in ``schema_changes``; without it, the window fails (``stop``)
        self.park_on_schema_change = park_on_schema_change
        #: per ``"database.table"``: where its shape changed, and the DDL (or what changed)
        self.schema_changes: dict[str, SchemaChange] = {}
        self.schemas = dict(schemas)
        self.server_id = server_id
        self.normalizers = {t: RowNormalizer(s) for t, s in self.schemas.items()}
        self.emitted = 0
        self.skipped = 0
        self.last_event_ts: int | None = None
        #: Per ``"database.table"``: records emitted, and ``ts_ms`` of the last one.
        self.emitted_by_table: dict[str, int] = {}
        self.last_ts_by_table: dict[str, int] = {}

    def _schema_changed(self, table_id: TableId, change: SchemaChange) -> None:
        log.warning("binlog: %s changed shape at %s: left out from there on", table_id, change)
        self.schema_changes.setdefault(str(table_id), change)

    def _unconvertible(
        self, event: RowEvent, exc: Exception, cause: ChangeCause = ChangeCause.UNDECODABLE
    ) -> None:
        """A row of ``event`` has a value that does not convert to its canonical form (bytes
        of a charset without a codec, a value out of its type's range...): the table is held
        at the event's transaction, so nothing of it past there is emitted, and reported like
        an undecodable event; without parking (``schema_changes = "stop"``) the window fails."""
        here = BinlogOffset(event.file, event.pos)
        at = BinlogOffset(event.file, event.transaction_start or event.pos)
        what = (
            f"the {event.kind} rows at {here}: {redact(str(exc))[:200]}"
            if cause is ChangeCause.UNPLACED
            else f"the {event.kind} rows at {here} hold a value that does not convert "
            f"({type(exc).__name__}: {redact(str(exc))[:200]})"
        )
        change = SchemaChange(at, here, what, cause)
        if not self.park_on_schema_change:
            raise SchemaChangedError(
                f"{event.table_id} {change.cause.headline} at {at}: {what}",
                f"cdc-console redump --table {event.table_id} once the cause is gone",
                tables=(event.table_id,),
                statement=what,
            ) from exc
        log.error("binlog: %s held at %s: %s", event.table_id, at, what)
        self.schema_changes.setdefault(str(event.table_id), change)

    def read(self, split: BinlogSplit) -> Iterator[ChangeRecord]:
        for record in self.read_dicts(split):
            yield ChangeRecord.from_dict(record)

    def read_dicts(self, split: BinlogSplit) -> Iterator[RecordDict]:
        """``read`` as ``ChangeRecord.to_dict()`` dicts, built directly (the Spark task's path)."""
        filters = {
            f.table_id: _TableFilter.of(
                f, self.schemas[f.table_id], self.normalizers[f.table_id], self.source
            )
            for f in split.tables
        }
        expected = {t: f.names for t, f in filters.items()}
        file_indexes: dict[str, int] = {}
        log.info("binlog split [%s, %s): %d tables", split.start, split.end, len(filters))
        seq = 0
        on_change = self._schema_changed if self.park_on_schema_change else None
        held: set[TableId] = set()
        for event in read_window_events(
            self.source,
            self.server_id,
            split.start,
            split.end,
            list(filters),
            expected,
            on_schema_change=on_change,
            since={t: f.marks.start for t, f in filters.items() if f.marks.start is not None},
            patchable=partial_images.patchable(self.schemas.values()) if self.patches else None,
        ):
            table_id = event.table_id
            if table_id in held:
                continue
            file_index = file_indexes.get(event.file)
            if file_index is None:
                file_index = file_indexes[event.file] = binlog_file_index(event.file)
            try:
                records = self._event_records(event, filters[table_id], file_index, seq)
            except SourceError:
                raise  # the source's fault (a key's collation weights), not this table's
            except Exception as exc:  # one table's value: that table is held, the rest go on
                unplaced = isinstance(exc, UnplacedKey)
                self._unconvertible(
                    event, exc, ChangeCause.UNPLACED if unplaced else ChangeCause.UNDECODABLE
                )
                held.add(table_id)
                continue
            yield from records
            seq += len(records)
            if records:
                self.emitted += len(records)
                name = f"{table_id.database}.{table_id.table}"
                self.emitted_by_table[name] = self.emitted_by_table.get(name, 0) + len(records)
                self.last_ts_by_table[name] = event.timestamp * 1000
            if event.rows:
                self.last_event_ts = event.timestamp
        log.info(
            "binlog split [%s, %s) done: %d changes emitted, %d skipped by watermarks",
            split.start,
            split.end,
            self.emitted,
            self.skipped,
        )

    def _event_records(
        self, event: RowEvent, table: _TableFilter, file_index: int, seq: int
    ) -> list[RecordDict]:
        """The records of one row event that are new to the sink (``should_emit``), numbered
        from ``seq``; raises what a value of the table cannot be converted by."""
        marks, column, start_key, max_key = table.marks, table.column, table.start, table.max
        binlog_row = table.normalizer.binlog_row
        binlog_columns = table.normalizer.binlog_columns
        key_of = table.normalizer.key_of
        file, pos = event.file, event.pos
        halves = _HALVES[event.kind]
        records: list[RecordDict] = []
        # what every record of the event shares (``_record`` adds the rest)
        shared: RecordDict = {
            "database": event.table_id.database,
            "table": event.table_id.table,
            "file_index": file_index,
            "pos": pos,
            "event_index": 0,
            "ts_ms": event.timestamp * 1000,
            "split_id": "",
        }
        for row_index, row in enumerate(event.rows):
            position = (file_index, pos, 0, row_index)
            # (op, image, what each value came from): a partial image's halves say
            # which columns it carries, a whole row's are the event's two images
            images = (
                partial_images.halves(event.kind, row, table.names)
                if event.partial
                else [
                    (op, row[image_key], row.get(sources_key))
                    for op, image_key, sources_key in halves
                ]
            )
            for op, image, sources in images:
                if start_key is not None and position < start_key:
                    self.skipped += 1
                    continue
                if (max_key is not None and position < max_key) and not should_emit(
                    marks,
                    BinlogOffset(file, pos, 0, row_index),
                    raw_chunk_key(column, image.get(column.name), binlog=True),
                ):
                    self.skipped += 1
                    continue
                convert = binlog_row if op not in PARTIAL_OPS else binlog_columns
                canonical = convert(image, sources)
                records.append(
                    _record(shared, op, key_of(canonical), canonical, row_index, seq + len(records))
                )
        return records
