"""The binlog window reader against a real server, compared with plain pymysqlreplication.

``read_window`` decodes through ``CachingBinLogStreamReader`` (TABLE_MAP parsed once per body, row
images decoded in bulk); these tests hold it to what the plain library reader gives on the same
bytes: every value and its type, every none-source, every position, across ALTERs, re-created
tables, rotations and every type family; and to the errors the window reader promises.
"""

from __future__ import annotations

import math
import os
import secrets
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import QueryEvent, RotateEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from cdc_console.core.chunk import ChunkRange
from cdc_console.core.keys import KeyOrder
from cdc_console.core.offset import BinlogOffset, binlog_file_index
from cdc_console.core.records import ChangeRecord
from cdc_console.core.reports import WindowResult
from cdc_console.core.schema import TableId
from cdc_console.core.splits import (
    BinlogSplit,
    FinishedSnapshotSplitInfo,
    SnapshotSplit,
    TableStreamFilter,
)
from cdc_console.errors import BinlogPurgedError, SchemaChangedError, SourceError
from cdc_console.mysql.binlog import RowChange, read_window, read_window_events, stream_settings
from cdc_console.mysql.binlog_decode import CachingBinLogStreamReader
from cdc_console.mysql.connection import connect
from cdc_console.mysql.decoded_rows import DecodedRows
from cdc_console.mysql.position import current_position
from cdc_console.mysql.schema import load_table_schema
from cdc_console.mysql.window_end import transaction_starts
from cdc_console.source.binlog_reader import BinlogSplitReader, SplitWatermarks, should_emit
from cdc_console.source.jsonvalues import dump_json
from cdc_console.source.reshaped import drop_reshaped
from cdc_console.spark.protocol import merge_windows
from cdc_console.values.canonical import RowNormalizer, raw_chunk_key
from tests.conftest import SourceDb
from tests.integration.test_type_fidelity import DDL as FIDELITY_DDL
from tests.integration.test_type_fidelity import INSERTS as FIDELITY_INSERTS
from tests.integration.test_type_fidelity import UPDATES as FIDELITY_UPDATES
from tests.integration.test_type_fidelity import ZERO_DATES
from tests.unit.test_binlog_decode import invalid_dates_as_library

pytestmark = pytest.mark.mysql

ROW_EVENTS = [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent]


def canonical(value: Any) -> Any:
    """Comparable form that tells types apart (1 vs 1.0, str vs bytes) and NaN from NaN."""
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    if isinstance(value, set):
        return ("set", sorted(value))
    if isinstance(value, float):
        return ("float", struct.pack("<d", value) if math.isnan(value) else value)
    return (type(value).__name__, value)


def head(db: SourceDb) -> BinlogOffset:
    conn = db.connect()
    try:
        return current_position(conn)
    finally:
        conn.close()


def _stream(cls: type, db: SourceDb, server_id: int, start: BinlogOffset) -> Any:
    return cls(
        connection_settings=stream_settings(db.source_config()),
        server_id=server_id,
        log_file=start.file,
        log_pos=start.pos,
        resume_stream=True,
        blocking=False,
        is_mariadb=False,
        only_events=[*ROW_EVENTS, QueryEvent, RotateEvent],
        only_schemas=[db.name],
    )


def _events(stream: Any, end: BinlogOffset, window: bool = False) -> Iterator[Any]:
    """``(file, pos, event)`` up to ``end``: from ``fetchone``, or with ``window`` from
    ``window_events`` (row events as ``DecodedRows``)."""
    end_key = (binlog_file_index(end.file), end.pos)
    current = stream.log_file
    try:
        for event in stream.window_events() if window else stream:
            if isinstance(event, RotateEvent):
                current = event.next_binlog
                if (binlog_file_index(current), event.position) >= end_key:
                    return
                continue
            if isinstance(event, DecodedRows):
                start = event.log_pos - event.event_size
            else:
                start = event.packet.log_pos - event.packet.event_size
            if (binlog_file_index(current), start) >= end_key:
                return
            yield current, start, event
    finally:
        stream.close()


_KIND_NAMES = {"insert": "WriteRowsEvent", "update": "UpdateRowsEvent", "delete": "DeleteRowsEvent"}


def _kind_name(event: Any) -> str:
    """The library's row event class ``event`` is (or derives from), or stands for."""
    if isinstance(event, DecodedRows):
        return _KIND_NAMES[event.kind]
    for kind in (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent):
        if isinstance(event, kind):
            return kind.__name__
    raise AssertionError(f"not a row event: {event!r}")


def _comparable(events: Iterator[tuple[str, int, Any]]) -> list[Any]:
    """Each ``(file, pos, event)`` as a tuple that holds everything decoded, types told apart."""
    out: list[Any] = []
    for file, pos, event in events:
        if isinstance(event, QueryEvent):
            out.append(("query", file, pos, event.query))
            continue
        out.append(
            (
                _kind_name(event),
                file,
                pos,
                event.timestamp,
                event.schema,
                event.table,
                [c.data for c in event.columns],
                canonical(event.rows),
            )
        )
    return out


def decoded(cls: type, db: SourceDb, server_id: int, start: BinlogOffset, end: BinlogOffset) -> Any:
    return _comparable(_events(_stream(cls, db, server_id, start), end))


def as_library(ours: list[Any], expected: list[Any]) -> list[Any]:
    """Ours with each invalid date as the library gives it (None, marked out of range), where
    ours gives its text (``test_binlog_decode.invalid_dates_as_library``)."""
    for got, theirs in zip(ours, expected, strict=False):
        if got[0] != "query" and theirs[0] == got[0]:
            invalid_dates_as_library(("rows", theirs[7]), ("rows", got[7]))
    return ours


def test_caching_reader_decodes_like_the_library_across_alters(source_db: SourceDb) -> None:
    start = head(source_db)
    source_db.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(20))",
        "INSERT INTO t VALUES (1, 'one'), (2, 'two')",
        "INSERT INTO t VALUES (3, 'three')",
        "UPDATE t SET note = 'uno' WHERE id = 1",
        # same table, new shape: a column added, one retyped
        "ALTER TABLE t ADD COLUMN amount DECIMAL(10,3) NULL",
        "INSERT INTO t VALUES (4, 'four', -1.5)",
        "ALTER TABLE t MODIFY id BIGINT UNSIGNED",
        "INSERT INTO t VALUES (18446744073709551615, 'max', 2.25)",
        "UPDATE t SET amount = amount + 1",
        # dropped and re-created under the same name, different columns
        "DROP TABLE t",
        "CREATE TABLE t (id INT PRIMARY KEY, seen DATETIME(6), tags SET('a','b') NOT NULL)",
        "INSERT INTO t VALUES (1, '2024-01-02 03:04:05.6', ''), (2, NULL, 'b,a')",
        "DELETE FROM t WHERE id = 1",
        "FLUSH BINARY LOGS",
        "INSERT INTO t VALUES (3, '1999-12-31 23:59:59', 'a')",
        "ALTER TABLE t DROP COLUMN seen",
        "INSERT INTO t VALUES (4, 'b')",
        FIDELITY_DDL,
        "SET time_zone = '+05:30'",  # the fidelity literals are +05:30 wall-clock times
        *FIDELITY_INSERTS,
        "SET SESSION sql_mode = ''",
        ZERO_DATES,
        "SET SESSION sql_mode = DEFAULT",
        *FIDELITY_UPDATES,
        "DELETE FROM fidelity WHERE id IN (2, 3)",
    )
    end = head(source_db)
    assert binlog_file_index(end.file) > binlog_file_index(start.file)

    expected = decoded(BinLogStreamReader, source_db, 5431, start, end)
    stream = _stream(CachingBinLogStreamReader, source_db, 5432, start)
    cache = stream.cdc_cache
    assert as_library(_comparable(_events(stream, end)), expected) == expected
    shapes = {repr(e[6]) for e in expected if e[0] != "query"}
    assert len(shapes) == 6  # every shape of t and fidelity seen, each decoded right
    row_events = sum(1 for e in expected if e[0] != "query")
    assert cache.fast_events == row_events
    assert cache.library_events == 0
    assert cache.misses >= len(shapes)

    # window_events: the same, with TABLE_MAP hits and row events handled from the bytes
    stream = _stream(CachingBinLogStreamReader, source_db, 5434, start)
    assert as_library(_comparable(_events(stream, end, window=True)), expected) == expected
    assert stream.cdc_cache.direct_events == row_events
    assert stream.cdc_cache.hits > 0


def _reference_read_window(
    db: SourceDb, start: BinlogOffset, end: BinlogOffset, wanted: set[TableId]
) -> list[RowChange]:
    """read_window as it was before the caching reader: plain library, one RowChange per row."""
    out: list[RowChange] = []
    current_file = start.file
    for file, event_start, event in _events(_stream(BinLogStreamReader, db, 5433, start), end):
        current_file = file
        if isinstance(event, QueryEvent):
            continue
        if event_start < start.pos and current_file == start.file:
            continue
        table_id = TableId(event.schema, event.table)
        if table_id not in wanted:
            continue
        for row_index, row in enumerate(event.rows):
            position = BinlogOffset(current_file, event_start, 0, row_index)
            if isinstance(event, WriteRowsEvent):
                out.append(
                    RowChange(table_id, "insert", None, row["values"], position,
                              event.timestamp, None, row.get("none_sources"))
                )  # fmt: skip
            elif isinstance(event, DeleteRowsEvent):
                out.append(
                    RowChange(table_id, "delete", row["values"], None, position,
                              event.timestamp, row.get("none_sources"), None)
                )  # fmt: skip
            else:
                out.append(
                    RowChange(table_id, "update", row["before_values"], row["after_values"],
                              position, event.timestamp, row.get("before_none_sources"),
                              row.get("after_none_sources"))
                )  # fmt: skip
    return out


def _as_comparable(change: RowChange) -> tuple[Any, ...]:
    return (
        change.table_id,
        change.kind,
        canonical(change.before),
        canonical(change.after),
        change.position.file,
        change.position.pos,
        change.position.events_to_skip,
        change.position.rows_to_skip,
        change.timestamp,
        change.before_none_sources,
        change.after_none_sources,
    )


@pytest.fixture
def busy_window(source_db: SourceDb) -> tuple[BinlogOffset, BinlogOffset, BinlogOffset]:
    """Two captured tables and one other, multi- and single-row statements, a rotation."""
    source_db.execute(
        "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(20), amount DECIMAL(12,2), ts DATETIME(6))",
        "CREATE TABLE b (k VARCHAR(10) PRIMARY KEY, n BIGINT)",
        "CREATE TABLE other (id INT PRIMARY KEY)",
        "INSERT INTO a SELECT seq, 'seed', seq / 100, NOW(6) FROM seq_1_to_50",
    )
    start = head(source_db)
    statements = [
        "INSERT INTO a SELECT seq, 'multi', seq / 7, NOW(6) FROM seq_100_to_160",
        "UPDATE a SET amount = amount + 1 WHERE id BETWEEN 1 AND 30",
        "INSERT INTO b VALUES ('x', 1), ('y', 2)",
        "INSERT INTO other VALUES (1), (2)",
        "ALTER TABLE other ADD COLUMN z INT",  # DDL on a table not captured: no error
        "DELETE FROM a WHERE id BETWEEN 40 AND 45",
    ]
    for i in range(20):
        statements.append(f"UPDATE a SET v = 'single {i}' WHERE id = {i + 1}")
        statements.append(f"UPDATE b SET n = n + {i} WHERE k = 'x'")
    source_db.execute(*statements)
    middle = head(source_db)
    source_db.execute(
        "FLUSH BINARY LOGS",
        "START TRANSACTION",
        "INSERT INTO a VALUES (1000, 'txn', 1.5, NULL)",
        "UPDATE b SET k = 'z' WHERE k = 'y'",
        "DELETE FROM a WHERE id = 1000",
        "COMMIT",
        "INSERT INTO a SELECT seq, 'late', 0, NOW(6) FROM seq_2000_to_2100",
    )
    return start, middle, head(source_db)


def test_read_window_matches_the_plain_library_row_by_row(
    source_db: SourceDb, busy_window: tuple[BinlogOffset, BinlogOffset, BinlogOffset]
) -> None:
    start, middle, end = busy_window
    wanted = {TableId(source_db.name, "a"), TableId(source_db.name, "b")}
    source = source_db.source_config()
    conn = connect(source)
    expected_columns = {t: load_table_schema(conn, t).column_names for t in wanted}
    conn.close()
    got = list(read_window(source, 5434, start, end, wanted, expected_columns))
    expected = _reference_read_window(source_db, start, end, wanted)
    assert len(got) == len(expected) > 200
    assert [_as_comparable(c) for c in got] == [_as_comparable(c) for c in expected]
    assert len({c.position.file for c in got}) == 2
    # a window starting at a later group boundary yields exactly the rows from there on
    later = list(read_window(source, 5434, middle, end, wanted))
    assert [_as_comparable(c) for c in later] == [
        _as_comparable(c) for c in expected if c.position >= middle
    ]
    assert 0 < len(later) < len(expected)
    assert list(read_window(source, 5434, end, end, wanted)) == []


def _reference_split_dicts(
    reader: BinlogSplitReader, changes: list[RowChange], split: BinlogSplit
) -> list[dict[str, Any]]:
    """BinlogSplitReader.read as it was: RowChange -> should_emit -> ChangeRecord -> dict."""
    marks = {}
    columns = {}
    for stream_filter in split.tables:
        schema = reader.schemas[stream_filter.table_id]
        column = schema.column(schema.chunk_key)
        columns[stream_filter.table_id] = column
        marks[stream_filter.table_id] = SplitWatermarks(stream_filter, KeyOrder.for_column(column))
    out = []
    seq = 0
    for change in changes:
        if change.table_id not in marks:
            continue
        column = columns[change.table_id]
        normalizer = RowNormalizer(reader.schemas[change.table_id])
        halves = {
            "insert": [("+I", change.after, change.after_none_sources)],
            "delete": [("-D", change.before, change.before_none_sources)],
            "update": [
                ("-U", change.before, change.before_none_sources),
                ("+U", change.after, change.after_none_sources),
            ],
        }[change.kind]
        for op, image, sources in halves:
            assert image is not None
            key = raw_chunk_key(column, image.get(column.name), binlog=True)
            if not should_emit(marks[change.table_id], change.position, key):
                continue
            row = normalizer.binlog_row(image, sources)
            out.append(
                ChangeRecord(
                    database=change.table_id.database,
                    table=change.table_id.table,
                    op=op,
                    key=dump_json(list(normalizer.key_of(row))),
                    row=dump_json(row),
                    file_index=binlog_file_index(change.position.file),
                    pos=change.position.pos,
                    event_index=change.position.events_to_skip,
                    row_index=change.position.rows_to_skip,
                    seq=seq,
                    ts_ms=change.timestamp * 1000,
                ).to_dict()
            )
            seq += 1
    return out


def test_split_reader_emits_what_it_did_before_under_watermarks(
    source_db: SourceDb, busy_window: tuple[BinlogOffset, BinlogOffset, BinlogOffset]
) -> None:
    start, middle, end = busy_window
    source = source_db.source_config()
    a, b = TableId(source_db.name, "a"), TableId(source_db.name, "b")
    conn = connect(source)
    schemas = {a: load_table_schema(conn, a), b: load_table_schema(conn, b)}
    conn.close()
    changes = list(read_window(source, 5435, start, end, [a, b]))
    # a mid-window resume point for a; finished chunks of a whose high watermarks straddle it
    resume = changes[30].position
    hw_early = changes[10].position.at_event_boundary()
    hw_late = middle
    split = BinlogSplit(
        start,
        end,
        (
            TableStreamFilter(
                a,
                resume,
                (
                    FinishedSnapshotSplitInfo(SnapshotSplit(a, 0, "id", ChunkRange(None, 20)), hw_early),
                    FinishedSnapshotSplitInfo(SnapshotSplit(a, 1, "id", ChunkRange(20, 150)), hw_late),
                ),
                # ids >= 150 are in a chunk still being read until the max high watermark
                (ChunkRange(150, None),),
            ),
            TableStreamFilter(b),
        ),
    )  # fmt: skip
    reader = BinlogSplitReader(source, schemas, 5436)
    got = list(reader.read_dicts(split))
    expected = _reference_split_dicts(BinlogSplitReader(source, schemas, 5436), changes, split)
    assert got == expected
    emitted_ops = {d["op"] for d in got}
    assert emitted_ops == {"+I", "-U", "+U", "-D"}
    total = sum(2 if c.kind == "update" else 1 for c in changes)
    assert reader.emitted == len(got) and reader.skipped == total - len(got) > 0
    per_table: dict[str, int] = {}
    last_ts: dict[str, int] = {}
    for d in got:
        name = f"{d['database']}.{d['table']}"
        per_table[name] = per_table.get(name, 0) + 1
        last_ts[name] = d["ts_ms"]
    assert reader.emitted_by_table == per_table and reader.last_ts_by_table == last_ts
    # read() gives the same records as ChangeRecords
    records = list(BinlogSplitReader(source, schemas, 5436).read(split))
    assert [r.to_dict() for r in records] == expected


def test_ddl_and_shape_changes_stop_the_window(source_db: SourceDb) -> None:
    source_db.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)")
    source = source_db.source_config()
    t = TableId(source_db.name, "t")
    start = head(source_db)
    source_db.execute("INSERT INTO t VALUES (2, 2)")
    ddl_at = head(source_db)
    source_db.execute("ALTER TABLE t ADD COLUMN w INT", "INSERT INTO t VALUES (3, 3, 3)")
    end = head(source_db)
    expected = {t: ["id", "v"]}
    seen: list[RowChange] = []
    with pytest.raises(SchemaChangedError) as err:
        seen.extend(read_window(source, 5437, start, end, [t], expected))
    assert [c.after for c in seen] == [{"id": 2, "v": 2}]
    assert f"at {ddl_at.file}:" in str(err.value) and "ALTER TABLE t ADD COLUMN w" in str(err.value)
    # a window opened after the DDL with the old shape: refused at the first row event
    after_ddl = head(source_db)
    source_db.execute("INSERT INTO t VALUES (4, 4, 4)")
    with pytest.raises(SchemaChangedError, match="changed shape"):
        list(read_window(source, 5437, after_ddl, head(source_db), [t], expected))
    rows = list(read_window(source, 5437, after_ddl, head(source_db), [t], {t: ["id", "v", "w"]}))
    assert [c.after for c in rows] == [{"id": 4, "v": 4, "w": 4}]


def test_a_ddl_is_placed_at_its_transaction_start_and_passed_over_before_since(
    source_db: SourceDb,
) -> None:
    source_db.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "CREATE TABLE u (id INT PRIMARY KEY)"
    )
    source = source_db.source_config()
    t, u = TableId(source_db.name, "t"), TableId(source_db.name, "u")
    start = head(source_db)
    source_db.execute("INSERT INTO t VALUES (1, 1)", "INSERT INTO u VALUES (1)")
    t_ddl = head(source_db)
    source_db.execute("ALTER TABLE t ADD COLUMN w INT", "INSERT INTO u VALUES (2)")
    u_ddl = head(source_db)
    source_db.execute("ALTER TABLE u ADD COLUMN w INT", "INSERT INTO t VALUES (2, 2, 2)")
    end = head(source_db)

    def read(
        since: dict[TableId, BinlogOffset], expected: dict[TableId, list[str]]
    ) -> tuple[list[str], list[str]]:
        changes: list[str] = []
        rows = [
            f"{e.table_id.table} {e.kind} {len(e.rows)}"
            for e in read_window_events(
                source,
                5438,
                start,
                end,
                [t, u],
                expected,
                on_schema_change=lambda table, c: changes.append(
                    f"{table.table} {c.position} {c.what.split()[0]}"
                ),
                since=since,
            )
        ]
        return rows, changes

    rows, changes = read({}, {t: ["id", "v"], u: ["id"]})
    # each DDL sits where its transaction (its GTID event) starts: the head read before it
    assert changes == [f"t {t_ddl} ALTER", f"u {u_ddl} ALTER"]
    assert rows == ["t insert 1", "u insert 1", "u insert 1"]
    # a table resumed past its DDL passes over it (and its earlier rows) and reads on
    rows, changes = read({t: u_ddl}, {t: ["id", "v", "w"], u: ["id"]})
    assert changes == [f"u {u_ddl} ALTER"]
    assert rows == ["u insert 1", "u insert 1", "t insert 1"]


def test_missing_binlog_and_missing_grant_are_told_apart(source_db: SourceDb) -> None:
    source = source_db.source_config()
    t = TableId(source_db.name, "t")
    now = head(source_db)
    gone = BinlogOffset("binlog.000000", 4)
    with pytest.raises(BinlogPurgedError, match="no longer has the binlog"):
        list(read_window(source, 5438, gone, now, [t]))
    user = f"nodump_{secrets.token_hex(3)}"
    source_db.sandbox.create_user(user, "pw-" + user, ["SELECT ON *.*"])
    os.environ["CDC_TEST_NODUMP_PASSWORD"] = "pw-" + user
    denied = source_db.source_config(user=user, password_env="CDC_TEST_NODUMP_PASSWORD")
    source_db.execute("CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    with pytest.raises(SourceError) as err:
        list(read_window(denied, 5439, now, head(source_db), [t]))
    assert not isinstance(err.value, BinlogPurgedError)
    assert "GRANT REPLICATION SLAVE" in err.value.hint


def test_a_window_read_in_parts_gives_exactly_what_one_reader_gives(source_db: SourceDb) -> None:
    """Cut at transaction starts the server names, the parts of a window emit together what
    one reader of the whole window emits, row for row, once the driver dropped a table's
    changes after its first change of shape any part reports; and they report the same
    changes of shape. A later part never sees an earlier part's DDL: it decodes ``t``'s rows
    with a new column (and reports that) and ``u``'s rows with a wider type (and cannot)."""
    source_db.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))",
        "CREATE TABLE u (id INT PRIMARY KEY, n INT)",
    )
    source = source_db.source_config()
    t, u = TableId(source_db.name, "t"), TableId(source_db.name, "u")
    conn = connect(source)
    schemas = {t: load_table_schema(conn, t), u: load_table_schema(conn, u)}
    start = head(source_db)
    for k in range(60):
        source_db.execute(
            f"INSERT INTO t (id, v) VALUES ({k}, 'v{k}')",
            f"INSERT INTO u VALUES ({k}, {k})",
            f"UPDATE u SET n = n + 1 WHERE id < {k // 2}",
        )
        if k % 7 == 0:
            source_db.execute(f"DELETE FROM t WHERE id = {k // 2}")
        if k == 30:
            source_db.execute("ALTER TABLE t ADD COLUMN w INT")
        if k == 45:
            source_db.execute("ALTER TABLE u MODIFY n BIGINT")
        if k in (20, 50):
            # one statement, many row events after a single TABLE_MAP: never cut between them
            source_db.execute(
                f"INSERT INTO u SELECT seq + {k * 1000}, seq FROM seq_1_to_900",
                f"DELETE FROM u WHERE id > {k * 1000}",
            )
    end = head(source_db)
    split = BinlogSplit(start, end, (TableStreamFilter(t), TableStreamFilter(u)))

    def without_seq(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if k != "seq"} for r in records]

    whole = BinlogSplitReader(source, schemas, 5439, park_on_schema_change=True)
    expected = without_seq(list(whole.read_dicts(split)))
    assert {r["table"] for r in expected} == {"t", "u"} and len(expected) > 300
    assert sorted(whole.schema_changes) == sorted([str(t), str(u)])

    size = end.pos - start.pos
    group_starts = _group_starts(conn, start, end)
    dropped_any = False
    try:
        for count in (2, 3, 5, 8, 13):
            targets = [start.pos + size * k // count for k in range(1, count)]
            starts = transaction_starts(conn, start, end, targets)
            # from 8 parts on, cuts may fall into the large INSERT ... SELECT and DELETE
            # transactions and share their start: where depends on the names' lengths in the
            # events, i.e. on how many databases the worker's server made before this one
            assert len(starts) == count - 1 if count <= 5 else len(starts) >= 6, count
            assert [c.pos for c in starts] == sorted({c.pos for c in starts}), count
            assert all(c.pos in group_starts for c in starts), count
            cuts = [start, *starts, end]
            got: list[dict[str, Any]] = []
            window = WindowResult()
            for k in range(len(cuts) - 1):
                part = BinlogSplitReader(source, schemas, 5439, park_on_schema_change=True)
                got.extend(part.read_dicts(BinlogSplit(cuts[k], cuts[k + 1], split.tables)))
                report = WindowResult(dict(part.emitted_by_table), 0, {}, part.schema_changes)
                window = merge_windows(window, report)
            assert window.schema_changes == whole.schema_changes, count
            records = [ChangeRecord.from_dict(r) for r in got]
            kept, counted = drop_reshaped(records, window)
            dropped_any = dropped_any or len(kept) < len(got)  # rows in the new shapes
            assert without_seq([r.to_dict() for r in kept]) == expected, count
            assert counted is not None and counted.emitted == whole.emitted_by_table, count
    finally:
        conn.close()
    assert dropped_any


def _group_starts(conn: Any, start: BinlogOffset, end: BinlogOffset) -> set[int]:
    """Positions of the transaction starts (GTID events) in ``[start, end)`` of one file."""
    with conn.cursor() as cur:
        cur.execute(f"SHOW BINLOG EVENTS IN %s FROM {start.pos}", (start.file,))
        return {
            int(row[1])
            for row in cur.fetchall()
            if row[2] in ("Gtid", "Anonymous_Gtid") and int(row[1]) < end.pos
        }
