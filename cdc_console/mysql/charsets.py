"""Every character set the server lists, decoded from binlog bytes exactly as the server converts.

A binlog row image holds a string column's bytes in the column's own character set; the snapshot
reads the same column converted by the server (the connection is utf8mb4). The two agree only if
the reader decodes those bytes the way the server converts them, and Python's codecs do not:

- pymysqlreplication picks a codec by the MySQL name, and ten of the server's names (``ucs2``,
  ``macce``, ``armscii8``, ``geostd8``, ``keybcs2``, ``dec8``, ``hp8``, ``swe7``, ``eucjpms``,
  ``utf16le``) have none, so their values came back as bytes;
- MySQL's ``utf16``, ``ucs2`` and ``utf32`` are big-endian without a byte-order mark, where
  Python's ``utf16``/``utf32`` guess the order;
- for single-byte sets the tables differ: MySQL's ``latin1`` is cp1252 with the five undefined
  bytes mapped to C1 controls, its ``ascii`` turns bytes past 127 into ``?``, its ``hebrew``,
  ``greek``, ``tis620``, ``cp1250``, ``cp1251``, ``cp1256``, ``cp1257``, ``cp866``, ``koi8u``
  differ from Python's in a few bytes each (measured on MariaDB 10.11).

So every single-byte set is decoded with a 256-entry table taken from the server itself (one
``SELECT CONVERT(...)`` per set, once per process, on the reader's own connection), registered as
a Python codec ``mysql_<name>``; the Unicode sets map to their exact Python codecs; the other
multi-byte sets to the Python codec of the same standard, which a test holds to the server's
conversion for text in every script they carry. ``eucjpms`` (EUC-JP with Microsoft's and NEC's
extensions, which no Python codec has) is decoded unit by unit with a table of its every
character taken from the server the same way (``EUCJPMS_UNITS``: one byte below 0x80, 0x8E and a
half-width kana byte, two bytes 0xA1-0xFE, 0x8F and two such bytes). A byte sequence outside
those tables fails to decode, and its table parks rather than guess.
"""

from __future__ import annotations

import codecs
import threading
from typing import TYPE_CHECKING

import pymysql.cursors

from cdc_console.core.untyped import Connection

if TYPE_CHECKING:
    from typing_extensions import Buffer

#: MySQL's multi-byte sets -> the Python codec that decodes their bytes as the server does
MULTI_BYTE = {
    "utf8mb4": "utf-8",
    "utf8mb3": "utf-8",
    "utf8": "utf-8",
    "utf16": "utf-16-be",
    "ucs2": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
    "big5": "big5",
    "sjis": "shift_jis",
    "cp932": "cp932",
    "ujis": "euc_jp",
    "euckr": "euc_kr",
    "gb2312": "gb2312",
    "gbk": "gbk",
    "gb18030": "gb18030",
}
PREFIX = "mysql_"

_tables: dict[str, str] = {}
#: eucjpms' units (bytes) -> the character the server converts each to
_eucjpms: dict[bytes, str] = {}
_single_byte: set[str] = set()
_lock = threading.Lock()


def _search(name: str) -> codecs.CodecInfo | None:
    normalized = name.replace("-", "_").lower()
    if not normalized.startswith(PREFIX):
        return None
    if normalized == PREFIX + "eucjpms" and _eucjpms:
        return _eucjpms_codec()
    table = _tables.get(normalized[len(PREFIX) :])
    if table is None:
        return None
    encoding_table = codecs.charmap_build(table)

    def decode(data: Buffer, errors: str = "strict", /) -> tuple[str, int]:
        return codecs.charmap_decode(data, errors, table)

    def encode(text: str, errors: str = "strict", /) -> tuple[bytes, int]:
        return codecs.charmap_encode(text, errors, encoding_table)

    return codecs.CodecInfo(encode, decode, name=normalized)


def _eucjpms_units(data: bytes | bytearray | memoryview, errors: str) -> tuple[str, int]:
    """Decode eucjpms bytes unit by unit with the server's own table (module docstring)."""
    raw = bytes(data)
    out: list[str] = []
    i = 0
    while i < len(raw):
        first = raw[i]
        width = 1 if first < 0x80 else 3 if first == 0x8F else 2
        char = _eucjpms.get(raw[i : i + width])
        if char is None:
            if errors != "ignore":
                raise UnicodeDecodeError(
                    "mysql_eucjpms", raw, i, i + width, "not a character the server converts"
                )
            char = ""
        out.append(char)
        i += width
    return "".join(out), len(raw)


def _eucjpms_codec() -> codecs.CodecInfo:
    reverse = {char: unit for unit, char in _eucjpms.items()}

    def decode(data: Buffer, errors: str = "strict", /) -> tuple[str, int]:
        return _eucjpms_units(memoryview(data).tobytes(), errors)

    def encode(text: str, errors: str = "strict", /) -> tuple[bytes, int]:
        try:
            return b"".join(reverse[c] for c in text), len(text)
        except KeyError as exc:
            raise UnicodeEncodeError("mysql_eucjpms", text, 0, len(text), str(exc)) from None

    return codecs.CodecInfo(encode, decode, name=PREFIX + "eucjpms")


codecs.register(_search)

_TRAIL = [f"{b:02X}" for b in range(0xA1, 0xFF)]
#: eucjpms' units by their leading bytes: (prefix, the byte lists that follow it)
EUCJPMS_UNITS = (
    ("", [[f"{b:02X}" for b in range(0x80)]]),
    ("8E", [[f"{b:02X}" for b in range(0xA1, 0xE0)]]),
    ("", [_TRAIL, _TRAIL]),
    ("8F", [_TRAIL, _TRAIL]),
)


def eucjpms_table(conn: Connection) -> dict[bytes, str]:
    """Every eucjpms unit and the character the server converts it to, asked of the server
    (four queries); a unit it converts to ``?`` or to nothing is not a character."""
    table: dict[bytes, str] = {}
    for prefix, parts in EUCJPMS_UNITS:
        derived = [
            "(" + " UNION ALL ".join(f"SELECT '{h}' AS h" for h in part) + f") AS p{n}"
            for n, part in enumerate(parts)
        ]
        hexes = " , ".join(f"p{n}.h" for n in range(len(parts)))
        unit = f"CONCAT('{prefix}', {hexes})"
        sql = (
            f"SELECT {unit}, CONVERT(CONVERT(UNHEX({unit}) USING eucjpms) USING utf8mb4) "
            f"FROM {' CROSS JOIN '.join(derived)}"
        )
        with conn.cursor(pymysql.cursors.Cursor) as cur:
            cur.execute(sql)
            for hexed, char in cur.fetchall():
                text = char.decode() if isinstance(char, bytes | bytearray) else char
                unit_bytes = bytes.fromhex(str(hexed))
                if text and (text != "?" or unit_bytes == b"?") and len(text) == 1:
                    table[unit_bytes] = text
    return table


def _single_byte_sets(conn: Connection) -> set[str]:
    if not _single_byte:
        with conn.cursor(pymysql.cursors.Cursor) as cur:
            cur.execute("SHOW CHARACTER SET")
            for row in cur.fetchall():
                name, maxlen = str(row[0]).lower(), int(row[3])
                if maxlen == 1 and name != "binary":
                    _single_byte.add(name)
    return _single_byte


def server_table(conn: Connection, charset: str) -> str:
    """The 256 characters the server converts each byte of ``charset`` to."""
    columns = ", ".join(
        f"CONVERT(CONVERT(X'{b:02X}' USING {charset}) USING utf8mb4)" for b in range(256)
    )
    with conn.cursor(pymysql.cursors.Cursor) as cur:
        cur.execute(f"SELECT {columns}")
        row = cur.fetchone()
    chars = [str(c) if c is not None else "\ufffe" for c in row]
    if any(len(c) != 1 for c in chars):
        raise ValueError(f"the server converts a byte of {charset} to more than one character")
    return "".join(chars)


def python_codec(charset: str | None, conn: Connection | None = None) -> str | None:
    """The Python codec that decodes ``charset``'s bytes as the server converts them: a
    single-byte set's (or eucjpms') table is fetched on ``conn`` the first time (once per
    process); None for no charset or ``binary``."""
    if charset is None:
        return None
    name = charset.lower()
    known = MULTI_BYTE.get(name)
    if known is not None:
        return known
    if name in _tables or (name == "eucjpms" and _eucjpms):
        return PREFIX + name
    if conn is None:
        return None
    with _lock:
        if name in _tables:
            return PREFIX + name
        if name == "eucjpms":
            if not _eucjpms:
                _eucjpms.update(eucjpms_table(conn))
            return PREFIX + name
        if name not in _single_byte_sets(conn):
            return None
        _tables[name] = server_table(conn, name)
    return PREFIX + name
