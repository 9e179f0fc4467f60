"""``SnapshotSplitReader``: one chunk, read without locks, corrected to its high watermark.

The DBLog/Flink CDC 2.x procedure for a split ``[start, end)`` of table T:

1. read the server's binlog position: the low watermark LW;
2. ``SELECT`` the chunk (a plain consistent read, no lock);
3. read the position again: the high watermark HW;
4. if HW > LW, replay the binlog window ``[LW, HW)`` of T onto the buffered rows, by key:
   an insert or update whose after-image falls in the chunk upserts it, a delete or update whose
   before-image falls in the chunk removes it;
5. emit the buffered rows: the chunk as it was at HW.

When HW == LW nothing committed in between, so the SELECT's rows already are the chunk at HW; a
reader in *text mode* reads them as raw columns off the wire (``mysql.rawrows``) and hands them
on untouched (``SnapshotSplitResult.raw``) for a typed sink to convert per column, skipping the
per-row canonical form entirely.

The SELECT saw the table at some instant between LW and HW; replaying every change of that window
in order yields the state at HW whichever instant that was, because full row images make each
upsert and delete idempotent. Changes after HW are the binlog reader's, filtered by this split's HW.

A table without a unique key (``TableSchema.counted``) has no such idempotence: replaying an
insert the SELECT already saw would count its row twice. Its chunk is read where it is exact
instead: inside ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` at the binlog position the server
names for it (``begin_consistent_snapshot``; LW = HW = that position), or, where the server
cannot name it or the table has no transactions, again until no change in the chunk's range
falls in ``[LW, HW)`` (the rows are then the range's state at HW), a bounded number of times.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import pymysql

from cdc_console.config import SourceConfig
from cdc_console.core.offset import BinlogOffset, binlog_file_index
from cdc_console.core.records import ChangeRecord
from cdc_console.core.schema import TableId, TableSchema, param_safe, quote_ident
from cdc_console.core.schema_change import SchemaChange
from cdc_console.core.splits import SnapshotSplit
from cdc_console.core.untyped import Connection, DriverImage, DriverRow, DriverValue
from cdc_console.core.values import RawKey
from cdc_console.mysql import partial_images
from cdc_console.mysql.binlog import RowChange, read_window
from cdc_console.mysql.connection import connect, text_mode_conversions, text_mode_decoders
from cdc_console.mysql.key_weights import key_order
from cdc_console.mysql.position import (
    begin_consistent_snapshot,
    current_position,
    gtid_of,
    transactional,
)
from cdc_console.mysql.rawrows import RawResult, select_raw
from cdc_console.mysql.retry import error_code
from cdc_console.source.jsonvalues import compact_encoder
from cdc_console.values.canonical import (
    CanonicalRow,
    CanonicalValue,
    RowNormalizer,
    raw_chunk_key,
)

log = logging.getLogger(__name__)

#: ``dump_json`` with its encoder built once (``jsonvalues.compact_encoder``)
_encode_json = compact_encoder()

Hook = Callable[[], None]


@dataclass
class SnapshotPhaseHooks:
    """Callables run around the watermarks, for tests that change rows between them."""

    pre_low_watermark: Hook | None = None
    post_low_watermark: Hook | None = None
    pre_high_watermark: Hook | None = None
    post_high_watermark: Hook | None = None

    def run(self, name: str) -> None:
        hook = getattr(self, name)
        if hook is not None:
            hook()


@dataclass
class SnapshotSplitResult:
    split: SnapshotSplit
    low_watermark: BinlogOffset
    high_watermark: BinlogOffset
    rows: list[CanonicalRow]
    backfill_events: int
    started_at: float
    duration_ms: int
    records: list[ChangeRecord] = field(default_factory=list)
    #: why nothing was read: the table's columns changed during its snapshot ("" when read)
    reshaped: str = ""
    #: Text mode, no backfill: the SELECT's raw columns (select-list order, see
    #: ``mysql.rawrows``). ``rows`` and ``records`` are then empty.
    raw: RawResult | None = None

    @property
    def row_count(self) -> int:
        return self.raw.row_count if self.raw is not None else len(self.rows)


#: "Unknown column": a column the chunk's SELECT names is gone
_ER_BAD_FIELD_ERROR = 1054

#: reads of a counted chunk, on a server without a snapshot position, before it gives up
_QUIET_ATTEMPTS = 8

#: tests read counted chunks as a MySQL source would, by quiet windows alone
_NO_EXACT = os.environ.get("CDC_TEST_NO_SNAPSHOT_POSITION") == "1"


class SnapshotContendedError(RuntimeError):
    """A counted table's chunk could not be read exactly: it changed during every read."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(f"{message}; {hint}")
        self.hint = hint


def _name(value: DriverValue) -> str:
    """An information_schema name, which text-mode connections return as bytes."""
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)


def chunk_query(
    schema: TableSchema, split: SnapshotSplit, columns: str
) -> tuple[str, list[RawKey]]:
    """The chunk's SELECT: half-open on the chunk key, unbounded ends omitted; the first chunk
    also holds the rows whose (nullable) chunk key is NULL (``ChunkRange.contains``).

    ``columns`` is the normaliser's select list (FLOAT must be selected as ``f + 0e0`` or the
    server's text protocol rounds it to six digits, disagreeing with the binlog's float32).
    """
    key = param_safe(quote_ident(split.chunk_key))
    where: list[str] = []
    args: list[RawKey] = []
    if split.range.start is not None:
        where.append(f"{key} >= %s")
        args.append(split.range.start)
    if split.range.end is not None:
        nulls = split.range.start is None and schema.column(split.chunk_key).nullable
        where.append(f"({key} < %s OR {key} IS NULL)" if nulls else f"{key} < %s")
        args.append(split.range.end)
    sql = param_safe(f"SELECT {columns} FROM {schema.table_id.quoted()}")
    if where:
        sql += " WHERE " + " AND ".join(where)
    return sql, args


def open_text_mode(source: SourceConfig) -> Connection:
    """A source connection for text-mode snapshot readers (see ``text_mode_conversions``)."""
    return connect(source, conv=text_mode_conversions())


class SnapshotSplitReader:
    """Reads snapshot splits of one table, one after the other, with one server id.

    ``connection`` lends the reader an open connection (a task reading many chunks keeps one);
    without it each ``read`` opens and closes its own. ``text_mode`` must match how that
    connection was opened (``open_text_mode``).
    """

    def __init__(
        self,
        source: SourceConfig,
        schema: TableSchema,
        server_id: int,
        hooks: SnapshotPhaseHooks | None = None,
        *,
        connection: Connection | None = None,
        text_mode: bool = False,
        park_on_schema_change: bool = False,
    ) -> None:
        self.source = source
        #: a DDL on the table inside the chunk's [LW, HW) ends the chunk there (its rows are
        #: its state at the DDL); without it the DDL fails the read (``schema_changes = "stop"``)
        self.park_on_schema_change = park_on_schema_change
        self.schema = schema
        self.server_id = server_id
        self.hooks = hooks or SnapshotPhaseHooks()
        self.normalizer = RowNormalizer(schema)
        self.key_column = schema.column(schema.chunk_key)
        self.order = key_order(self.key_column, source)
        self.connection = connection
        self.text_mode = text_mode
        #: whether a counted table's chunks are read in a consistent snapshot (None: not
        #: asked yet)
        self._snapshots: bool | None = None
        decoders = enumerate(text_mode_decoders(schema.columns))
        self._text_decoders = [(i, decode) for i, decode in decoders if decode is not None]

    def read(self, split: SnapshotSplit) -> SnapshotSplitResult:
        started = time.time()
        clock = time.monotonic()
        sid = split.split_id
        conn = self.connection
        if conn is None:
            conn = open_text_mode(self.source) if self.text_mode else connect(self.source)
        try:
            for attempt in range(1, _QUIET_ATTEMPTS + 1):
                low, high, raw, selected, changed = self._watermarked_select(conn, split)
                if changed or not self.schema.counted or high == low:
                    break
                # A counted chunk is only exact where nothing in its range changed between
                # the watermarks: which of those changes the SELECT saw is unknown, and a
                # duplicate-holding row cannot be replayed idempotently.
                if not self._touched(split, low, high):
                    log.info("split %s: no change in range in [%s, %s): exact", sid, low, high)
                    break
                if attempt == _QUIET_ATTEMPTS:
                    raise SnapshotContendedError(
                        f"chunk {split.range} of {self.schema.table_id} (no unique key) changed "
                        f"during each of {attempt} reads, and this server cannot say which "
                        "binlog position a read sees (no Binlog_snapshot_position)",
                        "re-dump the table at a quieter time, or give it a primary key",
                    )
                log.info("split %s: changed in range while read, attempt %d", sid, attempt)
                time.sleep(min(2.0, 0.05 * 2**attempt))
        finally:
            if self.connection is None:
                conn.close()
        if changed:
            log.warning(
                "split %s: %s changed shape during its snapshot (%s): nothing read; the "
                "table is read again in its new shape",
                sid,
                self.schema.table_id,
                changed,
            )
            duration_ms = int((time.monotonic() - clock) * 1000)
            return SnapshotSplitResult(
                split, low, low, [], 0, started, duration_ms, reshaped=changed
            )
        if raw is not None:
            if high == low or self.schema.counted:
                log.info("split %s step 4: no backfill, the rows are exact at %s", sid, high)
                duration_ms = int((time.monotonic() - clock) * 1000)
                return SnapshotSplitResult(split, low, high, [], 0, started, duration_ms, raw=raw)
            selected = raw.driver_rows()
        events = 0
        if self.schema.counted:
            rows = [self.normalizer.snapshot_row(self._driver_values(v)) for v in selected]
            log.info("split %s step 4: no backfill, the rows are exact at %s", sid, high)
        else:
            buffer: dict[tuple[CanonicalValue, ...], CanonicalRow] = {}
            for values in selected:
                row = self.normalizer.snapshot_row(self._driver_values(values))
                buffer[self.normalizer.key_of(row)] = row
            if high > low:
                events, high = self._backfill(split, buffer, low, high)
                log.info(
                    "split %s step 4: backfilled %d binlog changes of [%s, %s)",
                    sid,
                    events,
                    low,
                    high,
                )
            else:
                log.info("split %s step 4: no backfill, high watermark equals low watermark", sid)
            rows = list(buffer.values())
        duration_ms = int((time.monotonic() - clock) * 1000)
        records = (
            []
            if self.text_mode
            else snapshot_records(self.schema.table_id, self.normalizer.key_of, split, rows, high)
        )
        return SnapshotSplitResult(split, low, high, rows, events, started, duration_ms, records)

    def _watermarked_select(
        self, conn: Connection, split: SnapshotSplit
    ) -> tuple[BinlogOffset, BinlogOffset, RawResult | None, list[DriverRow], str]:
        """Steps 1 to 3: the low watermark, the chunk's rows, the high watermark, and why the
        table was not read ("" when it was). A counted table's chunk is read inside a
        consistent snapshot where the server says its position: both watermarks are then that
        position, and the rows are exact at it."""
        sid = split.split_id
        raw: RawResult | None = None
        selected: list[DriverRow] = []
        self.hooks.run("pre_low_watermark")
        snapshot = self._begin_exact(conn)
        low = snapshot or current_position(conn, with_gtid=True)
        log.info("split %s step 1: low watermark %s", sid, low)
        try:
            self.hooks.run("post_low_watermark")
            # A table whose columns changed since its snapshot began is not read in its old
            # shape (a value of a widened column may not fit it, a dropped one fails the
            # SELECT): the chunk reads nothing and the table is read again in its new shape.
            changed = self._shape_changed(conn) if self.park_on_schema_change else ""
            if not changed:
                sql, args = chunk_query(self.schema, split, self.normalizer.select_list)
                try:
                    raw, selected = self._select(conn, sql, args)
                except pymysql.err.MySQLError as exc:
                    if not self.park_on_schema_change or error_code(exc) != _ER_BAD_FIELD_ERROR:
                        raise
                    changed = f"a column it reads is gone: {exc.args[-1]}"
        finally:
            if snapshot is not None:
                conn.commit()
        if changed:
            return low, low, None, [], changed
        count = raw.row_count if raw is not None else len(selected)
        log.info("split %s step 2: selected %d rows of %s", sid, count, split.range)
        self.hooks.run("pre_high_watermark")
        high = snapshot or current_position(conn, with_gtid=True)
        log.info("split %s step 3: high watermark %s", sid, high)
        self.hooks.run("post_high_watermark")
        return low, high, raw, selected, ""

    def _begin_exact(self, conn: Connection) -> BinlogOffset | None:
        """For a counted table: a consistent snapshot begun, and the position it is exact at
        (``begin_consistent_snapshot``); None for other tables, for tables whose engine has
        no transactions, and on servers that cannot say the position."""
        if not self.schema.counted:
            return None
        if self._snapshots is None:
            table = self.schema.table_id
            self._snapshots = transactional(conn, table.database, table.table) and not _NO_EXACT
        if not self._snapshots:
            return None
        position = begin_consistent_snapshot(conn)
        if position is None:
            self._snapshots = False
        return position

    def _touched(self, split: SnapshotSplit, low: BinlogOffset, high: BinlogOffset) -> bool:
        """Whether a change in ``[low, high)`` has an image in the chunk, or the table changed
        shape there."""
        table = self.schema.table_id
        reshaped: list[SchemaChange] = []

        def on_change(_table: TableId, change: SchemaChange) -> None:
            reshaped.append(change)

        for change in read_window(
            self.source,
            self.server_id,
            low,
            high,
            [table],
            {table: self.schema.binlog_names},
            on_change,
        ):
            if self._in_chunk(split, change.before) or self._in_chunk(split, change.after):
                return True
        return bool(reshaped)

    def _select(
        self, conn: Connection, sql: str, args: list[RawKey]
    ) -> tuple[RawResult | None, list[DriverRow]]:
        """The chunk's rows: raw text (text mode) or the driver's tuples."""
        if self.text_mode:
            return select_raw(conn, sql, args), []
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return None, list(cur.fetchall())

    def _shape_changed(self, conn: Connection) -> str:
        """How the table's columns (names, types, nullability, in order) differ from the ones
        this snapshot reads, or "" when they do not."""
        table = self.schema.table_id
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                (table.database, table.table),
            )
            now = [(_name(n), _name(t), _name(y) == "YES") for n, t, y in cur.fetchall()]
        left_out = set(self.schema.left_out)
        now = [column for column in now if column[0] not in left_out]
        was = [(c.name, c.column_type, c.nullable) for c in self.schema.columns]
        if now == was:
            return ""
        if [n for n, _, _ in now] != [n for n, _, _ in was]:
            return f"columns now {', '.join(n for n, _, _ in now)}"
        differ = [f"{n} {t}" for (n, t, y), old in zip(now, was, strict=True) if (n, t, y) != old]
        return f"redefined {', '.join(differ)}"

    def _driver_values(self, values: DriverRow) -> DriverRow:
        """A text-mode row as the default connection would have returned it."""
        if not self.text_mode:
            return values
        converted = list(values)
        for index, decode in self._text_decoders:
            value = converted[index]
            if value is not None:
                converted[index] = decode(value)
        return tuple(converted)

    def _in_chunk(self, split: SnapshotSplit, image: DriverImage | None) -> bool:
        if image is None:
            return False
        key = raw_chunk_key(self.key_column, image.get(split.chunk_key), binlog=True)
        return split.range.contains(key, self.order)

    def _backfill(
        self,
        split: SnapshotSplit,
        buffer: dict[tuple[CanonicalValue, ...], CanonicalRow],
        low: BinlogOffset,
        high: BinlogOffset,
    ) -> tuple[int, BinlogOffset]:
        """Apply the binlog changes of ``[low, high)`` in the chunk to ``buffer``; return how
        many, and the chunk's high watermark: ``high``, or the position of a DDL on the table
        inside the window. The rows are then only known to be in the old shape, not exact as
        of any one position; that is enough, because the table's catch-up starts at or before
        that watermark, meets the DDL there and parks the table until its re-dump."""
        count = 0
        table = self.schema.table_id
        expected = {table: self.schema.binlog_names}
        changed: list[BinlogOffset] = []

        def on_change(_table: TableId, change: SchemaChange) -> None:
            log.warning("split %s: %s changed shape at %s", split.split_id, table, change)
            # A DDL ends the chunk at its transaction's start. Rows already in a new shape with
            # no DDL in the window (it came before the low watermark) start mid-transaction,
            # no place to resume at: the low watermark is, and the catch-up meets them there.
            changed.append(change.position if change.after != change.position else low)

        handler = on_change if self.park_on_schema_change else None
        for change in read_window(
            self.source,
            self.server_id,
            low,
            high,
            [table],
            expected,
            handler,
            patchable=partial_images.patchable([self.schema]),
        ):
            if change.partial:
                count += apply_partial(
                    self.normalizer, partial(self._in_chunk, split), buffer, change
                )
                continue
            if self._in_chunk(split, change.before):
                assert change.before is not None
                before = self.normalizer.binlog_row(change.before, change.before_none_sources)
                buffer.pop(self.normalizer.key_of(before), None)
                count += 1
            if self._in_chunk(split, change.after):
                assert change.after is not None
                after = self.normalizer.binlog_row(change.after, change.after_none_sources)
                buffer[self.normalizer.key_of(after)] = after
                count += 1
        if changed:
            conn = connect(self.source)
            try:
                high = gtid_of(conn, changed[0])
            finally:
                conn.close()
            log.info("split %s: high watermark moved back to the DDL, %s", split.split_id, high)
        return count, high


def apply_partial(
    normalizer: RowNormalizer,
    in_chunk: Callable[[DriverImage | None], bool],
    buffer: dict[tuple[CanonicalValue, ...], CanonicalRow],
    change: RowChange,
) -> int:
    """A change logged with a partial row image (``mysql.partial_images``), on the chunk's
    rows: a delete by key, or a patch of the row its key names. A patch of a key the buffer
    lacks is passed over: that row was deleted before the SELECT (its delete follows in the
    window), since an insert after the SELECT would be in the buffer already."""
    image = change.after if change.kind == "patch" else change.before
    if not in_chunk(image):
        return 0
    assert image is not None
    sources = change.after_none_sources if change.kind == "patch" else change.before_none_sources
    columns = normalizer.binlog_columns(image, sources)
    key = normalizer.key_of(columns)
    if change.kind != "patch":
        buffer.pop(key, None)
    elif key in buffer:
        buffer[key] = {**buffer[key], **columns}
    return 1


def snapshot_records(
    table: TableId,
    key_of: Callable[[CanonicalRow], tuple[CanonicalValue, ...]],
    split: SnapshotSplit,
    rows: list[CanonicalRow],
    high: BinlogOffset,
) -> list[ChangeRecord]:
    """Snapshot rows as ``+I`` records positioned at the split's high watermark."""
    file_index = binlog_file_index(high.file)
    ts_ms = int(time.time() * 1000)
    encode = _encode_json
    return [
        ChangeRecord(
            database=table.database,
            table=table.table,
            op="+I",
            key=encode(list(key_of(row))),
            row=encode(row),
            file_index=file_index,
            pos=high.pos,
            event_index=-1,
            row_index=0,
            seq=i,
            ts_ms=ts_ms,
            split_id=split.split_id,
        )
        for i, row in enumerate(rows)
    ]
