"""The project's fixture suite of tables, written from the server's own catalogue and the MariaDB
and MySQL documentation of data types, character sets and identifiers.

Each ``Fixture`` is one table: its DDL, and statements a writer runs against it (inserts of new
rows, updates and deletes of existing ones, each picking its row by the server's own order so
that no key has to be known in advance). Families:

- one table per character set ``SHOW CHARACTER SET`` lists, keyed by a VARCHAR in that set,
  its text taken from several scripts and converted by the server (what a set cannot hold
  becomes ``?``, under the writer's empty ``sql_mode``), with an ENUM and a SET of non-ASCII
  members in ten of them;
- one table per key type, values at and near the type's edges (integers signed and unsigned at
  their extremes, DECIMAL, DATE/DATETIME/TIMESTAMP/TIME, BINARY/VARBINARY, CHAR in a ``_ci`` and a
  ``_bin`` collation, ENUM, UUID, INET6), and composite keys mixing them;
- tables without a unique key: duplicates, a nullable UNIQUE column with several NULLs, a heap;
- names: a table and columns whose names hold spaces, dots, quotes, a backtick and ``%``;
- one wide table with every other type family (BIT, YEAR, FLOAT, DOUBLE, JSON, SET, blobs, long
  texts, zero dates under a permissive ``sql_mode``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from cdc_console.core.schema import quote_ident

SCRIPTS = "Aa Zz éÉ ßø ÆŒ Жж Ωω 中文 日本語 한국어 ไทย עברית عربي ◊€™"

#: an SQL literal of a key type, given a random source and a row number
Literal = Callable[[random.Random, int], str]

KEY_TYPES: dict[str, Literal] = {
    "TINYINT": lambda r, n: str([-128, 127, 0, -1][n] if n < 4 else r.randint(-128, 127)),
    "SMALLINT UNSIGNED": lambda r, n: str([0, 65535][n] if n < 2 else r.randint(0, 65535)),
    "INT": lambda r, n: str([-(2**31), 2**31 - 1][n] if n < 2 else r.randint(-(2**31), 2**31)),
    "BIGINT": lambda r, n: str(
        [-(2**63), 2**63 - 1][n] if n < 2 else r.randint(-(2**63), 2**63 - 1)
    ),
    "BIGINT UNSIGNED": lambda r, n: str(
        [0, 2**64 - 1, 2**63][n] if n < 3 else r.randint(0, 2**64 - 1)
    ),
    "DECIMAL(30,10)": lambda r, n: f"{r.uniform(-1e19, 1e19):.10f}",
    "DATE": lambda r, n: f"'{r.randint(1000, 9999)}-{r.randint(1, 12):02}-{r.randint(1, 28):02}'",
    "DATETIME(6)": lambda r, n: (
        f"'{r.randint(1000, 9999)}-{r.randint(1, 12):02}-{r.randint(1, 28):02} "
        f"{r.randint(0, 23):02}:{r.randint(0, 59):02}:{r.randint(0, 59):02}."
        f"{r.randint(0, 999999):06}'"
    ),
    "TIMESTAMP(3)": lambda r, n: f"FROM_UNIXTIME({r.randint(1, 2**31 - 2)}.{r.randint(0, 999):03})",
    "TIME(6)": lambda r, n: (
        f"'{r.choice(['-', ''])}{r.randint(0, 838)}:{r.randint(0, 59):02}:"
        f"{r.randint(0, 59):02}.{r.randint(0, 999999):06}'"
    ),
    "BINARY(4)": lambda r, n: "0x" + r.randbytes(r.choice([1, 4])).hex(),
    "VARBINARY(8)": lambda r, n: "0x" + r.randbytes(r.randint(1, 8)).hex(),
    "CHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_520_ci": lambda r, n: repr(
        "".join(r.choice("aAzZ éÉ_-") for _ in range(r.randint(1, 7))).strip() or "x"
    ),
    "VARCHAR(8) CHARACTER SET latin1 COLLATE latin1_swedish_ci": lambda r, n: repr(
        "".join(r.choice("aAåÅäÄöÖ zZ") for _ in range(r.randint(1, 7))).strip() or "x"
    ),
    "VARCHAR(8) CHARACTER SET gbk COLLATE gbk_chinese_ci": lambda r, n: repr(
        "".join(r.choice("a中文字Z ") for _ in range(r.randint(1, 6))).strip() or "x"
    ),
    "VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin": lambda r, n: repr(
        "".join(r.choice("aAzZ éÉ_") for _ in range(r.randint(1, 7))).strip() or "x"
    ),
    "ENUM('red','green','blue','x y')": lambda r, n: repr(
        r.choice(["red", "green", "blue", "x y"])
    ),
    "UUID": lambda r, n: repr(str(_uuid(r))),
    "INET6": lambda r, n: repr(
        ":".join(f"{r.choice([0, 0, 1, r.randrange(65536)]):x}" for _ in range(8))
    ),
}

#: composite keys always in the suite: (name, column types)
COMPOSITE_KEYS = {
    "int_ci": ("INT", "CHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_520_ci"),
    "date_binary": ("DATE", "BINARY(4)"),
    "u64_decimal": ("BIGINT UNSIGNED", "DECIMAL(30,10)"),
}


def composite_keys(seed: int, count: int = 3) -> dict[str, tuple[str, str]]:
    """``COMPOSITE_KEYS`` and ``count`` more, pairs of key types drawn with ``seed``: the same
    pairs in every run with one seed, others with another (``CDC_FIXTURE_SEED``)."""
    rng = random.Random(f"composite-{seed}")
    types = list(KEY_TYPES)
    drawn = {f"drawn_{i}": (rng.choice(types), rng.choice(types)) for i in range(count)}
    return {**COMPOSITE_KEYS, **drawn}


def _uuid(rng: random.Random) -> str:
    data = bytearray(rng.randbytes(16))
    data[6] = 0x40 | (data[6] & 0x0F)
    data[8] = 0x80 | (data[8] & 0x3F)
    text = data.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


@dataclass
class Fixture:
    """One table: ``create`` and ``rows`` (INSERT statements) make it; ``changes(rng)`` returns
    a writer's next statement against it."""

    name: str
    family: str
    create: str
    rows: list[str]
    changes: Callable[[random.Random], str]
    #: rows the writer's inserts number from (keys stay new)
    counter: list[int] = field(default_factory=lambda: [10_000])

    @property
    def quoted(self) -> str:
        return quote_ident(self.name)


#: ENUM and SET members each of these sets can hold, beyond ASCII
MEMBERS = {
    "latin1": ["é", "ß", "a b"],
    "cp1251": ["Ж", "ж", "я"],
    "greek": ["Ω", "ω", "ά"],
    "sjis": ["カナ", "日本", "ｱ"],
    "gbk": ["中文", "字", "ａ"],
    "big5": ["中文", "字"],
    "ucs2": ["é", "中", "Ж"],
    "utf16": ["é", "中", "𝄞"],
    "utf32": ["é", "中", "𝄞"],
    "eucjpms": ["カナ", "①", "髙"],
}


def writer_mix(
    fixture: Fixture,
    insert: Callable[[random.Random, int], str],
    *others: Callable[[random.Random], str],
) -> Callable[[random.Random], str]:
    """A writer's next statement: two in five insert a new row (numbered past the fixture's
    own), the rest are one of ``others`` at random."""

    def change(rng: random.Random) -> str:
        if rng.random() < 0.4:
            fixture.counter[0] += 1
            return insert(rng, fixture.counter[0])
        return rng.choice(others)(rng)

    return change


def charset_fixture(charset: str, rows: int) -> Fixture:
    """A table in ``charset``; where ``MEMBERS`` has some, an ENUM and a SET in it too."""
    name = f"cs_{charset}"
    table = quote_ident(name)
    members = MEMBERS.get(charset, [])
    literals = ", ".join(f"'{m}'" for m in members)
    extra = (
        f", e ENUM({literals}) CHARACTER SET {charset}, s SET({literals}) CHARACTER SET {charset}"
        if members
        else ""
    )

    def text(n: int) -> str:
        start = n % len(SCRIPTS)
        return f"CONVERT(_utf8mb4'{SCRIPTS[start:] + SCRIPTS[:start]}' USING {charset})"

    def insert(n: int) -> str:
        key = f"CONVERT(_utf8mb4'k{n} {SCRIPTS[n % 20]}' USING {charset})"
        more = ""
        if members:
            chosen = ",".join(m for i, m in enumerate(members) if (n >> i) & 1)
            more = f", '{members[n % len(members)]}', '{chosen}'"
        return f"INSERT IGNORE INTO {table} VALUES ({key}, {text(n)}{more})"

    fixture = Fixture(
        name,
        "charset",
        f"CREATE TABLE {table} (k VARCHAR(24) CHARACTER SET {charset} NOT NULL PRIMARY KEY, "
        f"v TEXT CHARACTER SET {charset}{extra})",
        [insert(n) for n in range(rows)],
        lambda r: "",
    )

    fixture.changes = writer_mix(
        fixture,
        lambda r, n: insert(n),
        lambda r: f"UPDATE {table} SET v = {text(r.randrange(99))} ORDER BY k LIMIT 1",
        lambda r: f"DELETE FROM {table} ORDER BY k DESC LIMIT 1",
    )
    return fixture


def key_fixture(index: int, key_type: str, rows: int, seed: int) -> Fixture:
    name = f"key_{index:02}"
    table = quote_ident(name)
    literal = KEY_TYPES[key_type]
    rng = random.Random(f"{seed}-{key_type}")

    def insert(r: random.Random, n: int) -> str:
        return f"INSERT IGNORE INTO {table} VALUES ({literal(r, n)}, {n})"

    fixture = Fixture(
        name,
        "key",
        f"CREATE TABLE {table} (k {key_type} NOT NULL PRIMARY KEY, n INT)",
        [insert(rng, n) for n in range(rows)],
        lambda r: "",
    )

    fixture.changes = writer_mix(
        fixture,
        insert,
        lambda r: f"UPDATE {table} SET n = n + 1 ORDER BY k LIMIT 1",
        # a key change: the row moves to another chunk
        lambda r: f"UPDATE IGNORE {table} SET k = {literal(r, 99)} ORDER BY k DESC LIMIT 1",
        lambda r: f"DELETE FROM {table} ORDER BY n DESC LIMIT 1",
    )
    return fixture


def composite_fixture(name: str, types: tuple[str, str], rows: int, seed: int) -> Fixture:
    table = quote_ident(f"ck_{name}")
    first, second = (KEY_TYPES[t] for t in types)
    rng = random.Random(f"{seed}-{name}")

    def insert(r: random.Random, n: int) -> str:
        a = first(r, n) if r.random() < 0.7 else first(r, 0)  # repeats in the first column
        return f"INSERT IGNORE INTO {table} VALUES ({a}, {second(r, n)}, {n})"

    fixture = Fixture(
        f"ck_{name}",
        "key",
        f"CREATE TABLE {table} (a {types[0]} NOT NULL, b {types[1]} NOT NULL, n INT, "
        "PRIMARY KEY (a, b))",
        [insert(rng, n) for n in range(rows)],
        lambda r: "",
    )

    fixture.changes = writer_mix(
        fixture,
        insert,
        lambda r: f"UPDATE {table} SET n = n + 1 ORDER BY a, b LIMIT 1",
        lambda r: f"DELETE FROM {table} ORDER BY n DESC LIMIT 1",
    )
    return fixture


def counted_fixtures(rows: int) -> list[Fixture]:
    """Tables without a unique key."""
    logs = Fixture(
        "nk_logs",
        "counted",
        "CREATE TABLE nk_logs (ts INT NOT NULL, level VARCHAR(8) NOT NULL, msg VARCHAR(20), "
        "KEY (ts))",
        [
            f"INSERT INTO nk_logs VALUES ({n // 4}, 'info', {'NULL' if n % 5 == 0 else repr('m')})"
            for n in range(rows)
        ],
        lambda r: r.choice(
            [
                f"INSERT INTO nk_logs VALUES ({r.randrange(rows // 4)}, 'info', 'm')",
                f"DELETE FROM nk_logs WHERE ts = {r.randrange(rows // 4)} LIMIT 1",
                f"UPDATE nk_logs SET msg = 'u' WHERE ts = {r.randrange(rows // 4)} LIMIT 1",
            ]
        ),
    )
    links = Fixture(
        "nk_links",
        "counted",
        "CREATE TABLE nk_links (a INT NULL, b INT NOT NULL, UNIQUE KEY (a))",
        [
            f"INSERT INTO nk_links VALUES ({'NULL' if n % 3 == 0 else n}, {n % 2})"
            for n in range(rows)
        ],
        lambda r: r.choice(
            [
                f"INSERT INTO nk_links VALUES (NULL, {r.randrange(2)})",
                "DELETE FROM nk_links WHERE a IS NULL LIMIT 1",
                "UPDATE nk_links SET b = 1 - b WHERE a IS NULL LIMIT 1",
            ]
        ),
    )
    heap = Fixture(
        "nk_heap",
        "counted",
        "CREATE TABLE nk_heap (x VARCHAR(10) NULL, y DOUBLE NULL)",
        [
            f"INSERT INTO nk_heap VALUES ({'NULL' if n % 4 == 0 else repr(f'k{n % 7}')}, {n % 3})"
            for n in range(rows)
        ],
        lambda r: r.choice(
            [
                f"INSERT INTO nk_heap VALUES (NULL, {r.randrange(3)})",
                f"DELETE FROM nk_heap WHERE x IS NULL AND y = {r.randrange(3)} LIMIT 1",
                f"UPDATE nk_heap SET x = NULL WHERE x = 'k{r.randrange(7)}' LIMIT 1",
            ]
        ),
    )
    return [logs, links, heap]


ODD_COLUMNS = ["order id", "a.b", 'say "hi"', "it's", "back`tick", "naïve €", "select", "%"]


def names_fixture(rows: int) -> Fixture:
    name = "odd name.`%"
    table = quote_ident(name)
    key, *others = (quote_ident(c) for c in ODD_COLUMNS)
    columns = ", ".join(f"{c} VARCHAR(12)" for c in others)
    values = ", ".join(f"'v{i}'" for i in range(len(others)))

    def insert(n: int) -> str:
        return f"INSERT INTO {table} VALUES ({n}, {values})"

    fixture = Fixture(
        name,
        "name",
        f"CREATE TABLE {table} ({key} INT NOT NULL PRIMARY KEY, {columns})",
        [insert(n) for n in range(rows)],
        lambda r: "",
    )

    fixture.changes = writer_mix(
        fixture,
        lambda r, n: insert(n),
        lambda r: f"UPDATE {table} SET {others[0]} = 'u{r.randrange(9)}' ORDER BY {key} LIMIT 1",
        lambda r: f"DELETE FROM {table} ORDER BY {key} DESC LIMIT 1",
    )
    return fixture


def wide_fixture(rows: int) -> Fixture:
    """Every other type family at its edges, zero dates included."""

    def insert(n: int) -> str:
        return (
            "INSERT INTO wide VALUES ("
            f"{n}, b'{n % 2}01', {1901 + n % 254}, {n}.5e0, -{n}.25e300, "
            f'\'{{"n": {n}, "a": [1, "é", null]}}\', '
            f"'{['a', 'a,b', 'c', ''][n % 4]}', x'{n:04x}00ff', REPEAT('é', {n % 50}), "
            f"{'0' if n % 5 == 0 else repr('2024-02-29')}, "
            f"{repr('0000-00-00 00:00:00') if n % 7 == 0 else repr('2038-01-19 03:14:07.499999')}"
            ")"
        )

    fixture = Fixture(
        "wide",
        "type",
        "CREATE TABLE wide (id INT PRIMARY KEY, bits BIT(3), y YEAR, f FLOAT, d DOUBLE, "
        "j JSON, s SET('a','b','c'), bl LONGBLOB, t MEDIUMTEXT, dt DATE, ts DATETIME(6))",
        [insert(n) for n in range(rows)],
        lambda r: "",
    )

    fixture.changes = writer_mix(
        fixture,
        lambda r, n: insert(n % 100_000),
        lambda r: "UPDATE wide SET j = JSON_SET(j, '$.n', 0), f = f + 1 ORDER BY id LIMIT 1",
        lambda r: "DELETE FROM wide ORDER BY id DESC LIMIT 1",
    )
    return fixture


def catalogue(charsets: list[str], rows: int = 24, seed: int = 30) -> list[Fixture]:
    """Every fixture: ``charsets`` from the server's ``SHOW CHARACTER SET``."""
    found = [charset_fixture(c, rows) for c in charsets]
    found += [key_fixture(i, t, rows, seed) for i, t in enumerate(KEY_TYPES)]
    found += [composite_fixture(n, ts, rows, seed) for n, ts in composite_keys(seed).items()]
    found += counted_fixtures(rows)
    found += [names_fixture(rows), wide_fixture(rows)]
    return found
