"""MariaDB's UUID, INET4 and INET6 captured as the text the server prints: the snapshot's text and
the binlog's bytes (formatted here as the server formats them) agree value for value, and a key
of these types orders as the server's ``ORDER BY`` does, through a snapshot in several chunks,
binlog changes and ``verify``.

Cases come from the server's own formatting rules (``Inet6::to_string``, ``UUID`` storage
order): zero-word runs of every length and place, IPv4-compatible and -mapped addresses, UUIDs
of each version and variant, the nil and max values.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from cdc_console.core.keys import KeyOrder, inet_sort_key
from cdc_console.core.schema import TableId
from cdc_console.mysql.binlog import read_window_events
from cdc_console.mysql.connection import connect
from cdc_console.mysql.position import current_position
from cdc_console.mysql.schema import load_table_schema
from cdc_console.values.canonical import RowNormalizer
from tests.conftest import SourceDb
from tests.integration.harness import JobProcess, caught_up, load, running, wait_for, write_config
from tests.integration.test_identifiers import tables_state
from tests.integration.test_verify import verify

pytestmark = pytest.mark.mysql


def inet6_cases(rng: random.Random) -> list[str]:
    """Addresses whose zero words fall everywhere the formatting rules branch on."""
    words = [
        [0] * 8,
        [0] * 7 + [1],
        [1] + [0] * 7,
        [0] * 6 + [0x0102, 0x0304],  # IPv4-compatible
        [0] * 5 + [0xFFFF, 0xC0A8, 0x0001],  # IPv4-mapped
        [0] * 5 + [0xFFFE, 0xC0A8, 0x0001],  # neither
        [1, 2, 3, 4, 5, 6, 7, 0],  # a single zero word at the end
        [1, 0, 2, 0, 0, 3, 0, 0],  # equal runs: the first is shortened
        [0x2001, 0xDB8, 0, 0, 1, 0, 0, 0],
        [0xFFFF] * 8,
    ]
    for _ in range(40):
        words.append([rng.choice([0, 0, 0, 1, 0xABCD, rng.randrange(65536)]) for _ in range(8)])
    return [":".join(f"{w:x}" for w in ws) for ws in words]


def uuid_cases(rng: random.Random) -> list[str]:
    found = ["00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff"]
    for version in range(0, 16):
        for variant in (0x0, 0x8, 0xC, 0xE):
            data = bytearray(rng.randbytes(16))
            data[6] = (version << 4) | (data[6] & 0x0F)
            data[8] = (variant << 4) | (data[8] & 0x0F)
            text = data.hex()
            found.append(f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}")
    # time-ordered v1 values a few ticks apart, whose storage order is by time
    for tick in range(8):
        found.append(f"{tick:08x}-0001-11ee-8000-0242ac120002")
    return found


def accepted(db: SourceDb, uuids: list[str]) -> list[str]:
    """The UUIDs the server takes: it refuses a value that would read back as one stored
    with its groups reversed (byte 6 >= 0x80 and byte 8 > 0)."""
    conn = db.connect()
    found = []
    try:
        with conn.cursor() as cur:
            for text in uuids:
                try:
                    cur.execute("SELECT CAST(%s AS UUID)", (text,))
                except Exception:
                    continue
                if cur.fetchone()[0] is not None:
                    found.append(text)
    finally:
        conn.close()
    return found


@pytest.fixture
def addresses(source_db: SourceDb) -> tuple[list[str], list[str]]:
    rng = random.Random(30)
    source_db.execute(
        "CREATE TABLE fb (u UUID NOT NULL PRIMARY KEY, a4 INET4 NULL, a6 INET6 NULL, "
        "note VARCHAR(20))"
    )
    uuids = accepted(source_db, uuid_cases(rng))
    assert len(uuids) > 40
    return uuids, inet6_cases(rng)


def test_snapshot_and_binlog_agree_and_keys_order_as_the_server(
    source_db: SourceDb, addresses: tuple[list[str], list[str]]
) -> None:
    uuids, inet6 = addresses
    rng = random.Random(7)
    rows = [
        (
            u,
            None if i % 9 == 0 else f"{i % 256}.{rng.randrange(256)}.0.{i % 3}",
            inet6[i % len(inet6)],
        )
        for i, u in enumerate(uuids)
    ]
    conn = connect(source_db.source_config())
    try:
        start = current_position(conn)
        source_db.execute(
            *(
                f"INSERT INTO fb VALUES ('{u}', {'NULL' if a4 is None else repr(a4)}, '{a6}', 'x')"
                for u, a4, a6 in rows
            ),
            "INSERT INTO fb VALUES ('12345678-1234-1234-1234-123456789abc', '0.0.0.0', '::', 'z')",
        )
        end = current_position(conn)
        table = TableId(source_db.name, "fb")
        schema = load_table_schema(conn, table)
        normalizer = RowNormalizer(schema)
        with conn.cursor() as cur:
            cur.execute(f"SELECT {normalizer.select_list} FROM {table.quoted()} ORDER BY u")
            snapshot = [normalizer.snapshot_row(r) for r in cur.fetchall()]
    finally:
        conn.close()
    assert schema.uncaptured == ""

    binlog = {}
    for event in read_window_events(
        source_db.source_config(), 5420, start, end, [table], {table: schema.column_names}
    ):
        for row in event.rows:
            image = normalizer.binlog_row(row["values"], row["none_sources"])
            binlog[image["u"]] = image
    by_key = {r["u"]: r for r in snapshot}
    assert binlog == by_key
    # the server's own text, not a reading of it: '::ffff:192.168.0.1', '1:2:3:4:5:6:7::'
    assert by_key[uuids[0]]["a6"] == "::"
    assert {"::ffff:192.168.0.1", "::1.2.3.4", "1:2:3:4:5:6:7::", "1:0:2::3:0:0"} <= {
        r["a6"] for r in snapshot
    }

    # the server's ORDER BY is the key order the chunks and the binlog filter go by
    order = KeyOrder.for_column(schema.column("u"))
    keys = [r["u"] for r in snapshot]
    assert sorted(keys, key=order.sort_key) == keys
    by_address = sorted(snapshot, key=lambda r: (inet_sort_key(r["a6"]), order.sort_key(r["u"])))
    conn = connect(source_db.source_config())
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT u FROM {table.quoted()} ORDER BY a6, u")
            served = [r[0] for r in cur.fetchall()]
    finally:
        conn.close()
    assert [r["u"] for r in by_address] == served


@pytest.mark.spark
def test_a_uuid_keyed_table_snapshots_in_chunks_streams_and_verifies(
    source_db: SourceDb, addresses: tuple[list[str], list[str]], tmp_path: Path
) -> None:
    uuids, inet6 = addresses
    source_db.execute(
        *(
            f"INSERT INTO fb VALUES ('{u}', '10.0.0.{i % 256}', '{inet6[i % len(inet6)]}', 's')"
            for i, u in enumerate(uuids)
        )
    )
    config_path = write_config(source_db, tmp_path, chunk_size=10)
    config = load(config_path)
    with running(JobProcess(config_path)) as job:
        wait_for(lambda: set(tables_state(config).values()) == {"STREAMING"}, 240, "streaming", job)
        source_db.execute(
            "INSERT INTO fb VALUES ('01234567-89ab-1def-8123-456789abcdef', '1.2.3.4', '::1', 'b')",
            f"UPDATE fb SET a6 = '1:0:2:0:0:3:0:0', note = 'u' WHERE u = '{uuids[5]}'",
            f"UPDATE fb SET u = 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa' WHERE u = '{uuids[7]}'",
            f"DELETE FROM fb WHERE u = '{uuids[9]}'",
        )
        wait_for(lambda: caught_up(source_db, config), 180, "the stream to catch up", job)
        code, report = verify(config_path)
        assert code == 0, json.dumps(report)[:3000]
    assert len(report["tables"][0]["chunks"]) >= 5
