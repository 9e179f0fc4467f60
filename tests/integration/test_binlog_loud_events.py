"""No silent filter, at the window reader: every event that can change a captured table is
decoded exactly or holds that table with its cause, never passed over.

Each writer session here changes its own logging as a script, a migration tool or a DBA may,
long after the pipeline's start-up checks passed: statement logging, partial row images,
MariaDB's compressed events. A second table written with full row images in the same window
must come through untouched.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.core.schema_change import ChangeCause, SchemaChange
from cdc_console.core.splits import BinlogSplit, TableStreamFilter
from cdc_console.errors import SchemaChangedError
from cdc_console.mysql import charsets, library_events, window_walk
from cdc_console.mysql.binlog import read_window_events
from cdc_console.mysql.connection import connect
from cdc_console.mysql.position import current_position
from cdc_console.mysql.schema import load_table_schema
from cdc_console.mysql.window_walk import RowEvent
from cdc_console.source.binlog_reader import BinlogSplitReader
from cdc_console.values.canonical import RowNormalizer
from tests.conftest import CDC_USER, SourceDb
from tests.integration.harness import (
    JobProcess,
    Writer,
    events,
    load,
    mirror_rows,
    running,
    source_rows,
    wait_for,
    write_config,
)
from tests.integration.test_table_control import (
    all_in,
    assert_converged,
    caught_up_now,
    cli,
    create_table,
    tables_state,
)
from tests.integration.test_verify import verify

pytestmark = pytest.mark.mysql


def _position(db: SourceDb) -> BinlogOffset:
    conn = connect(db.source_config())
    try:
        return current_position(conn)
    finally:
        conn.close()


@pytest.fixture
def two_tables(source_db: SourceDb) -> Iterator[SourceDb]:
    source_db.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(300), b TEXT)",
        "CREATE TABLE other (id INT PRIMARY KEY, v VARCHAR(20))",
        "INSERT INTO t VALUES (1, 'one', 'blob one'), (2, 'two', 'blob two'), (3, 'x', 'y')",
    )
    yield source_db


def _read(
    db: SourceDb, start: BinlogOffset, *, handler: bool = True
) -> tuple[list[RowEvent], dict[TableId, SchemaChange]]:
    held: dict[TableId, SchemaChange] = {}

    def on_change(table: TableId, change: SchemaChange) -> None:
        held.setdefault(table, change)

    tables = [TableId(db.name, "t"), TableId(db.name, "other")]
    events = list(
        read_window_events(
            db.source_config(),
            5409,
            start,
            _position(db),
            tables,
            {tables[0]: ["id", "a", "b"], tables[1]: ["id", "v"]},
            on_change if handler else None,
        )
    )
    return events, held


def _other_rows(db: SourceDb, events: list[RowEvent]) -> list[tuple[str, object]]:
    return [
        (e.kind, (r.get("values") or r["after_values"])["v"])
        for e in events
        if e.table_id.table == "other"
        for r in e.rows
    ]


@pytest.mark.parametrize(
    ("setting", "statements", "cause"),
    [
        (
            "SET SESSION binlog_format = 'STATEMENT'",
            ["UPDATE t SET a = 'stmt' WHERE id = 1", "DELETE FROM t WHERE id = 3"],
            ChangeCause.STATEMENT,
        ),
        (
            "SET SESSION binlog_format = 'STATEMENT'",
            ["INSERT INTO `{db}`.t VALUES (9, 'qualified', NULL)"],
            ChangeCause.STATEMENT,
        ),
        (
            "SET SESSION binlog_row_image = 'MINIMAL'",
            ["UPDATE t SET a = 'minimal' WHERE id = 2"],
            ChangeCause.PARTIAL_IMAGE,
        ),
        (
            "SET SESSION binlog_row_image = 'NOBLOB'",
            ["UPDATE t SET a = 'noblob' WHERE id = 2"],
            ChangeCause.PARTIAL_IMAGE,
        ),
    ],
    ids=["statement-dml", "statement-qualified", "minimal", "noblob"],
)
def test_a_change_logged_without_full_rows_holds_its_table_and_only_it(
    two_tables: SourceDb, setting: str, statements: list[str], cause: ChangeCause
) -> None:
    db = two_tables
    start = _position(db)
    db.execute("INSERT INTO other VALUES (1, 'before')")
    db.execute(setting, *(s.format(db=db.name) for s in statements))
    db.execute("INSERT INTO other VALUES (2, 'after')", "UPDATE t SET a = 'row' WHERE id = 2")
    events, held = _read(db, start)

    change = held[TableId(db.name, "t")]
    assert change.cause is cause
    assert TableId(db.name, "other") not in held
    # nothing of t from the hold on; the other table's rows on both sides of it come through
    assert not [e for e in events if e.table_id.table == "t"]
    assert _other_rows(db, events) == [("insert", "before"), ("insert", "after")]
    if cause is ChangeCause.STATEMENT:
        assert statements[0].split()[0] in change.what and "binlog_format" in change.what
    else:
        assert "binlog_row_image" in change.what
    # the hold is at a transaction start: a place a reader can resume from
    assert change.position <= change.after

    with pytest.raises(SchemaChangedError, match=r"\.t (was changed by|had a row logged)"):
        _read(db, start, handler=False)


def test_statement_dml_on_another_table_holds_nothing(two_tables: SourceDb) -> None:
    db = two_tables
    db.execute("CREATE TABLE uncaptured (id INT PRIMARY KEY)")
    start = _position(db)
    db.execute(
        "SET SESSION binlog_format = 'STATEMENT'",
        "INSERT INTO uncaptured VALUES (1)",
        "UPDATE uncaptured SET id = 2",
    )
    db.execute("INSERT INTO other VALUES (1, 'rows')")
    events, held = _read(db, start)
    assert held == {}
    assert _other_rows(db, events) == [("insert", "rows")]


@pytest.mark.parametrize("created", ["before the window", "inside the window"])
def test_statement_dml_whose_trigger_or_function_writes_a_captured_table_holds_it(
    two_tables: SourceDb, created: str
) -> None:
    """Statement logging replays triggers and stored functions from the outer statement alone:
    the table they write is named by no event, and is held all the same, found through the
    catalogue or through the ``CREATE`` read in the window itself."""
    db = two_tables
    db.execute("CREATE TABLE audit_src (id INT PRIMARY KEY)", "CREATE TABLE fn_src (id INT)")
    definitions = [
        "CREATE TRIGGER audit_src_ai AFTER INSERT ON audit_src FOR EACH ROW "
        "BEGIN IF NEW.id > 0 THEN INSERT INTO t (id, a) VALUES (NEW.id + 100, 'trigger'); "
        "END IF; END",
        "CREATE FUNCTION bump(n INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA "
        "BEGIN UPDATE t SET a = 'function' WHERE id = n; RETURN n; END",
    ]
    if created == "before the window":
        # information_schema.TRIGGERS shows a table's triggers only to a user with the
        # TRIGGER privilege on it; without it only the window's own CREATE TRIGGER is seen
        db.sandbox.execute(f"GRANT TRIGGER ON `{db.name}`.* TO '{CDC_USER}'@'127.0.0.1'")
        db.execute(*definitions)
    start = _position(db)
    if created == "inside the window":
        db.execute(*definitions)
    db.execute(
        "SET SESSION binlog_format = 'STATEMENT'",
        "INSERT INTO audit_src VALUES (5)",
        "INSERT INTO fn_src VALUES (bump(1))",
    )
    db.execute("INSERT INTO other VALUES (1, 'rows')")
    events, held = _read(db, start)

    change = held[TableId(db.name, "t")]
    assert change.cause is ChangeCause.STATEMENT
    assert "INSERT INTO audit_src" in change.what and "trigger or stored function" in change.what
    assert TableId(db.name, "other") not in held
    assert _other_rows(db, events) == [("insert", "rows")]

    # the function alone reaches t as well
    db.execute("DROP TRIGGER audit_src_ai")
    start = _position(db)
    db.execute("SET SESSION binlog_format = 'STATEMENT'", "INSERT INTO fn_src VALUES (bump(2))")
    _, held = _read(db, start)
    assert "bump(?)" in held[TableId(db.name, "t")].what  # the statement, without its values


def test_compressed_events_decode_as_their_plain_twins(two_tables: SourceDb) -> None:
    """``log_bin_compress``: rows (insert, update, delete) and a statement, compressed by the
    server; the rows decode to what the same statements give uncompressed."""
    db = two_tables
    statements = [
        "INSERT INTO t VALUES (10, REPEAT('x', 200), REPEAT('é', 300)), (11, 'k', NULL)",
        "UPDATE t SET a = REPEAT('y', 150) WHERE id IN (1, 10)",
        "DELETE FROM t WHERE id = 11",
    ]
    restore = "INSERT INTO t VALUES (1, 'one', 'blob one') ON DUPLICATE KEY UPDATE a = 'one'"

    def rows_of(events: list[RowEvent]) -> list[tuple[str, object]]:
        return [(e.kind, r) for e in events if e.table_id.table == "t" for r in e.rows]

    start = _position(db)
    db.execute(*statements)
    plain, held = _read(db, start)
    assert held == {}
    db.execute("DELETE FROM t WHERE id >= 10", restore)

    db.sandbox.execute(
        "SET GLOBAL log_bin_compress_min_len = 10", "SET GLOBAL log_bin_compress = ON"
    )
    try:
        start = _position(db)
        db.execute(*statements)
        db.execute("SET SESSION binlog_format = 'STATEMENT'", "UPDATE t SET b = REPEAT('z', 64)")
        compressed, held = _read(db, start)
    finally:
        db.sandbox.execute("SET GLOBAL log_bin_compress = OFF")
    assert rows_of(compressed) == rows_of(plain)
    assert len(rows_of(plain)) == 5
    # the compressed statement is read too: it names t, which is held at it
    assert held[TableId(db.name, "t")].cause is ChangeCause.STATEMENT
    assert "UPDATE t SET b = REPEAT(?, ?)" in held[TableId(db.name, "t")].what


def test_an_undecodable_row_holds_its_table_only(
    two_tables: SourceDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = two_tables
    monkeypatch.setattr(window_walk, "_UNDECODABLE_FOR_TESTS", f"{db.name}.t")
    start = _position(db)
    db.execute("UPDATE t SET a = 'bad' WHERE id = 1", "INSERT INTO other VALUES (5, 'fine')")
    events, held = _read(db, start)
    assert held[TableId(db.name, "t")].cause is ChangeCause.UNDECODABLE
    assert "CDC_TEST_UNDECODABLE" in held[TableId(db.name, "t")].what
    assert _other_rows(db, events) == [("insert", "fine")]


# --- the whole pipeline: a writer on t1 throughout, the loud cases on t2, a fault on t3 ---


def _journal(config: PipelineConfig) -> list[str]:
    return [e.message for e in events(config)]


@pytest.mark.spark
def test_writers_that_change_their_logging_never_leave_a_wrong_mirror_streaming(
    source_db: SourceDb, tmp_path: Path
) -> None:
    """Statement-logged DML, MINIMAL and NOBLOB images heal t2 online (read again, lock-free);
    compressed events are applied as rows; an undecodable change parks t3 alone, and its
    re-dump brings it back once the cause is gone. t1's writer never stops, the job never
    exits, and every table ends equal to its source."""
    db = source_db
    create_table(db, "t1", rows=3_000)
    for name in ("t2", "t3"):
        db.execute(
            f"CREATE TABLE {name} (id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL, "
            "amount DECIMAL(12,2) NOT NULL, note VARCHAR(40), memo TEXT)",
            f"INSERT INTO {name} SELECT seq, CONCAT('c', seq), seq / 100, NULL, "
            f"CONCAT('memo ', seq) FROM seq_1_to_2000",
        )
    names = ["t1", "t2", "t3"]
    config_path = write_config(
        db, tmp_path, tables=[f"{db.name}.{n}" for n in names], chunk_size=1_000
    )
    config = load(config_path)
    writer = Writer(db, "t1", [1, 1500, 2999], seed=11, rate=30)
    writer.start()
    job = JobProcess(config_path, env={"CDC_TEST_UNDECODABLE": f"{db.name}.t3"})

    def t2_equal() -> bool:
        return mirror_rows(config, db.name, "t2", "id") == source_rows(db, "t2", "id") and all_in(
            config, Lifecycle.STREAMING, ["t2"]
        )

    def t1_moves() -> None:
        applied = tables_state(config)["t1"].events_applied
        wait_for(
            lambda: tables_state(config)["t1"].events_applied > applied, 60, "t1 streaming", job
        )

    try:
        with running(job):
            wait_for(lambda: all_in(config, Lifecycle.STREAMING, names), 240, "streaming", job)
            for setting, statements, reread in [
                (
                    "SET SESSION binlog_format = 'STATEMENT'",
                    [
                        "UPDATE t2 SET note = 'stmt' WHERE id <= 5",
                        "DELETE FROM t2 WHERE id BETWEEN 6 AND 8",
                        "INSERT INTO t2 VALUES (5001, 'new', 1.00, 'stmt insert', 'm')",
                    ],
                    True,
                ),
                # partial images that name their row: applied in place, exactly
                (
                    "SET SESSION binlog_row_image = 'MINIMAL'",
                    [
                        "UPDATE t2 SET note = 'min' WHERE id = 9",
                        "UPDATE t2 SET memo = 'min memo', amount = 7 WHERE id BETWEEN 50 AND 60",
                        "DELETE FROM t2 WHERE id IN (11, 61)",
                        "INSERT INTO t2 VALUES (5003, 'whole', 3.00, NULL, 'all columns')",
                        "UPDATE t2 SET note = 'again' WHERE id = 5003",
                    ],
                    False,
                ),
                (
                    "SET SESSION binlog_row_image = 'NOBLOB'",
                    [
                        "UPDATE t2 SET note = 'nob' WHERE id = 10",
                        "DELETE FROM t2 WHERE id = 62",
                        "UPDATE t2 SET memo = 'nob memo' WHERE id = 63",
                    ],
                    False,
                ),
                # ... and those that cannot be applied exactly: the table is read again
                (
                    "SET SESSION binlog_row_image = 'MINIMAL'",
                    ["INSERT INTO t2 (id, customer, amount) VALUES (5004, 'defaults', 4.00)"],
                    True,
                ),
                (
                    "SET SESSION binlog_row_image = 'MINIMAL'",
                    ["UPDATE t2 SET id = 6000 WHERE id = 64"],
                    True,
                ),
            ]:
                rereads = _rereads(config, "t2")
                db.execute(setting, *statements)
                wait_for(t2_equal, 180, f"t2 equal after {setting}: {statements[0]}", job)
                assert (_rereads(config, "t2") > rereads) is reread, (statements, _journal(config))
                t1_moves()
            status = cli(config_path, "status", "--no-probe")
            assert "changes not logged as rows" in status, status
            assert re.search(rf"{db.name}\.t2: \d+ statement", status), status
            assert re.search(rf"{db.name}\.t2: \d+ partial-image", status), status
            journal = _journal(config)
            healed = [m for m in journal if "reading it again online" in m and ".t2 " in m]
            assert any(
                "was changed by a statement" in m and "UPDATE t2 SET note" in m for m in healed
            ), healed
            assert any("had a row logged without all its columns" in m for m in healed), healed

            # a global setting changed while running is noticed within a minute and said
            db.sandbox.execute("SET GLOBAL binlog_row_image = 'MINIMAL'")
            try:
                wait_for(
                    lambda: (
                        "binlog_row_image is 'MINIMAL', not 'FULL'"
                        in cli(config_path, "status", "--no-probe")
                    ),
                    75,
                    "the setting noticed",
                    job,
                )
            finally:
                db.sandbox.execute("SET GLOBAL binlog_row_image = 'FULL'")
            assert any(
                "source setting binlog_row_image is 'MINIMAL', not 'FULL'" in m
                for m in _journal(config)
            )

            # compressed events: applied as rows, no re-read
            before = len([m for m in _journal(config) if "reading it again online" in m])
            db.sandbox.execute(
                "SET GLOBAL log_bin_compress_min_len = 10", "SET GLOBAL log_bin_compress = ON"
            )
            try:
                db.execute(
                    "UPDATE t2 SET memo = REPEAT('z', 300) WHERE id BETWEEN 20 AND 40",
                    "DELETE FROM t2 WHERE id BETWEEN 41 AND 45",
                    "INSERT INTO t2 VALUES (5002, 'zipped', 2.00, 'compressed', REPEAT('q', 500))",
                )
                wait_for(t2_equal, 120, "t2 after compressed events", job)
            finally:
                db.sandbox.execute("SET GLOBAL log_bin_compress = OFF")
            assert len([m for m in _journal(config) if "reading it again online" in m]) == before

            # one table's undecodable change parks it alone; the job keeps running
            db.execute("UPDATE t3 SET note = 'undecodable' WHERE id = 1")
            wait_for(lambda: all_in(config, Lifecycle.NEEDS_REDUMP, ["t3"]), 60, "t3 parked", job)
            parked = [m for m in _journal(config) if ".t3 " in m and "cannot be decoded" in m]
            assert parked and "Fix: cdc-console redump --table" in parked[-1], parked
            t1_moves()
            assert all_in(config, Lifecycle.STREAMING, ["t1", "t2"])
            assert job.proc is not None and job.proc.poll() is None
            cli(config_path, "stop", "--wait")
            assert job.wait(120) == 0, job.output()

        # the cause gone (here: the hook), the re-dump the message names brings t3 back
        job = JobProcess(config_path)
        with running(job):
            cli(config_path, "redump", "--table", f"{db.name}.t3", "--wait")
            wait_for(lambda: all_in(config, Lifecycle.STREAMING, names), 180, "t3 re-dumped", job)
            writer.stop()
            assert not writer.errors, writer.errors
            wait_for(lambda: caught_up_now(db, config, names), 120, "caught up", job)
            cli(config_path, "stop", "--wait")
            assert job.wait(120) == 0, job.output()
    finally:
        writer.stop()
    assert_converged(db, config, names)
    # verify folds the binlog past the mirror's position: partial images there too
    db.execute(
        "SET SESSION binlog_row_image = 'MINIMAL'",
        "UPDATE t2 SET note = 'after the stop' WHERE id BETWEEN 100 AND 110",
        "DELETE FROM t2 WHERE id = 111",
    )
    code, report = verify(config_path, "--table", f"{db.name}.t2")
    assert code == 0, report


def _rereads(config: PipelineConfig, table: str) -> int:
    """How often the journal says ``table`` was read again online."""
    return len(
        [m for m in _journal(config) if "reading it again online" in m and f".{table} " in m]
    )


def test_an_invalid_date_reads_as_null_in_the_binlog_as_in_the_snapshot(
    source_db: SourceDb,
) -> None:
    """``ALLOW_INVALID_DATES`` stores ``'2024-04-31'``; pymysql's snapshot read gives its text,
    and so does our binlog decoder (the library raises ``day is out of range for month``); the
    normaliser makes both None under the default rule."""
    db = source_db
    db.execute("CREATE TABLE d (id INT PRIMARY KEY, day DATE, at DATETIME)")
    start = _position(db)
    db.execute(
        "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
        "INSERT INTO d VALUES (1, '2024-04-31', '2023-02-30 10:00:00'), (2, '2024-04-30', NULL)",
        "UPDATE d SET day = '2021-02-29' WHERE id = 2",
    )
    table = TableId(db.name, "d")
    held: list[SchemaChange] = []
    events = list(
        read_window_events(
            db.source_config(),
            5409,
            start,
            _position(db),
            [table],
            {table: ["id", "day", "at"]},
            lambda _t, change: held.append(change),
        )
    )
    assert held == []
    inserted = [r["values"] for e in events if e.kind == "insert" for r in e.rows]
    updated = [r["after_values"] for e in events if e.kind == "update" for r in e.rows]
    assert [(r["id"], r["day"], r["at"]) for r in inserted] == [
        (1, "2024-04-31", "2023-02-30 10:00:00"),
        (2, datetime.date(2024, 4, 30), None),
    ]
    assert [(r["id"], r["day"]) for r in updated] == [(2, "2021-02-29")]
    # the snapshot's read of the same rows, through the same normaliser as the pipeline's
    conn = connect(db.source_config())
    try:
        normalizer = RowNormalizer(load_table_schema(conn, table))
        with conn.cursor() as cur:
            cur.execute(f"SELECT {normalizer.select_list} FROM `{db.name}`.d ORDER BY id")
            snapshot = [normalizer.snapshot_row(r) for r in cur.fetchall()]
    finally:
        conn.close()
    binlog = [
        normalizer.binlog_row(r["values"], r.get("none_sources"))
        for e in events
        if e.kind == "insert"
        for r in e.rows
    ]
    assert [row["day"] for row in snapshot] == [None, None]
    assert binlog[0] == snapshot[0]


# --- every character set the server lists, binlog against the server's own conversion ---

#: text in many scripts; what a set cannot hold the server turns into "?", on both paths
SCRIPTS = "é ß Ω Ж ש ع ก ა Ա 中文 カナ〜～＼¥ 한글 € ü ő ł č Ñ ™ ½"
#: a set the binlog reader is made not to decode here (the library has no codec for it either),
#: to show that such a set's table is held loudly rather than guessed at
NOT_DECODED = {"keybcs2"}


def _eucjpms_rows(db: SourceDb) -> dict[bytes, list[bytes]]:
    """eucjpms' characters (as the server converts them) grouped by their first byte or two."""
    conn = db.connect()
    try:
        table = charsets.eucjpms_table(conn)
    finally:
        conn.close()
    groups: dict[bytes, list[bytes]] = {}
    for unit in table:
        if len(unit) > 1:
            groups.setdefault(unit[: len(unit) - 1], []).append(unit)
    return groups


def test_every_character_set_decodes_in_the_binlog_as_the_server_converts_it(
    source_db: SourceDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One table per set the server lists, its key and value in that set: inserts, an update
    and a key change, replayed from the binlog, equal the snapshot's read of the same rows
    (the server's ``CONVERT(... USING utf8mb4)``); single-byte sets also carry every byte, and
    eucjpms (no Python codec has its Microsoft and NEC extensions) every character it has. A
    set left without a codec stays bytes, and the stream's reader holds its table rather than
    guess."""
    exact = library_events.python_codec
    monkeypatch.setattr(
        library_events,
        "python_codec",
        lambda charset, conn=None: None if charset in NOT_DECODED else exact(charset, conn),
    )
    db = source_db
    sets = [
        (str(name), int(maxlen))
        for name, _desc, _coll, maxlen in db.rows("SHOW CHARACTER SET")
        if name != "binary"
    ]
    assert len(sets) >= 30, sets
    for name, _ in sets:
        db.execute(
            f"CREATE TABLE `k_{name}` (k VARCHAR(40) CHARACTER SET {name} PRIMARY KEY, "
            f"v VARCHAR(200) CHARACTER SET {name})"
        )
    start = _position(db)
    for name, maxlen in sets:
        text = f"CONVERT(_utf8mb4'{SCRIPTS}' USING {name})"
        statements = [
            "SET SESSION sql_mode = ''",  # what a set cannot hold becomes "?", not an error
            f"INSERT INTO `k_{name}` VALUES (CONVERT('k1' USING {name}), {text}), "
            f"(CONVERT('k2' USING {name}), CONVERT('plain' USING {name}))",
            f"UPDATE `k_{name}` SET v = CONCAT(v, CONVERT('!' USING {name})) "
            f"WHERE k = CONVERT('k1' USING {name})",
            f"UPDATE `k_{name}` SET k = CONCAT(CONVERT('k2-' USING {name}), "
            f"CONVERT(_utf8mb4'Жé中' USING {name})) WHERE k = CONVERT('k2' USING {name})",
        ]
        if maxlen == 1:
            every_byte = "".join(f"{b:02X}" for b in range(128, 256))
            statements.append(
                f"INSERT INTO `k_{name}` VALUES (CONVERT('k3' USING {name}), "
                f"CONVERT(X'{every_byte}' USING {name}))"
            )
        if name == "eucjpms":
            # every character of it, a row per leading byte (its extensions included)
            statements.extend(
                f"INSERT INTO `k_{name}` VALUES (CONVERT('e{lead.hex()}' USING {name}), "
                f"CONVERT(X'{b''.join(units).hex()}' USING {name}))"
                for lead, units in _eucjpms_rows(db).items()
            )
        db.execute(*statements)
    tables = [TableId(db.name, f"k_{name}") for name, _ in sets]
    conn = connect(db.source_config())
    try:
        schemas = {t: load_table_schema(conn, t) for t in tables}
        snapshot: dict[TableId, list[dict[str, object]]] = {}
        for table, schema in schemas.items():
            normalizer = RowNormalizer(schema)
            with conn.cursor() as cur:
                cur.execute(f"SELECT {normalizer.select_list} FROM {table.quoted()}")
                snapshot[table] = sorted(
                    (normalizer.snapshot_row(r) for r in cur.fetchall()), key=lambda r: str(r["k"])
                )
    finally:
        conn.close()
    held: dict[TableId, SchemaChange] = {}
    replayed: dict[TableId, dict[object, dict[str, object]]] = {t: {} for t in tables}
    failed: dict[TableId, str] = {}
    for event in read_window_events(
        db.source_config(),
        5409,
        start,
        _position(db),
        tables,
        {t: ["k", "v"] for t in tables},
        lambda t, change: held.setdefault(t, change),
    ):
        normalizer = RowNormalizer(schemas[event.table_id])
        rows = replayed[event.table_id]
        for row in event.rows:
            try:
                if event.kind == "update":
                    before = normalizer.binlog_row(row["before_values"])
                    after = normalizer.binlog_row(row["after_values"])
                    rows.pop(str(before["k"]), None)
                    rows[str(after["k"])] = after
                else:
                    rows[str(normalizer.binlog_row(row["values"])["k"])] = normalizer.binlog_row(
                        row["values"]
                    )
            except Exception as exc:
                failed.setdefault(event.table_id, f"{type(exc).__name__}: {exc}")
    assert held == {}
    assert len(snapshot[TableId(db.name, "k_eucjpms")]) > 150  # a row per lead byte or two
    decoded = {t for t in tables if t.table[2:] not in NOT_DECODED}
    for table in sorted(decoded, key=str):
        assert table not in failed, (table, failed.get(table))
        mine = sorted(replayed[table].values(), key=lambda r: str(r["k"]))
        assert mine == snapshot[table], table
    # a set without an exact codec stays undecoded: its values do not convert (the job then
    # parks its table with the reason), never a guess
    assert failed == {}
    undecoded = sorted(set(tables) - decoded, key=str)
    for table in undecoded:
        assert all(isinstance(row["v"], bytes) for row in replayed[table].values()), replayed[table]
    # ... and the stream's reader holds such a table, loudly, while the others stream
    end = _position(db)
    reader = BinlogSplitReader(db.source_config(), schemas, 5409, park_on_schema_change=True)
    split = BinlogSplit(start, end, tuple(TableStreamFilter(t, start) for t in tables))
    emitted = {(r["database"], r["table"]) for r in reader.read_dicts(split)}
    assert set(reader.schema_changes) == {str(t) for t in undecoded}
    for change in reader.schema_changes.values():
        assert change.cause is ChangeCause.UNDECODABLE and "does not convert" in change.what
    assert emitted == {(t.database, t.table) for t in decoded}
