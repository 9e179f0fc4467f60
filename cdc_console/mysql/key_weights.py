"""Chunk keys in a collation Python cannot emulate, ordered by the server's own weights.

The chunk boundaries come from the server's ``ORDER BY``; a key decoded from the binlog is
placed in a chunk here, by comparison with those boundaries. ``core.keys.KeyOrder`` emulates
binary and ``utf8mb4_bin``-like orders exactly, but UCA collations (MySQL 8's default
``utf8mb4_0900_ai_ci``, MariaDB's ``unicode``/``uca1400``), the national 8-bit ones (MariaDB's
default ``latin1_swedish_ci``) and the rest only approximately: measured on mixed letters and
punctuation, 15 to 20% of comparisons came out otherwise than the server's ``STRCMP``, which
would put a change in the wrong chunk and lose it or apply it twice. For those the sort key is
the server's ``WEIGHT_STRING`` of the value in the column's collation (bytes that compare as
the collation does), trailing spaces stripped first where the collation pads, cached per value.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import cast

from cdc_console.config import SourceConfig
from cdc_console.core.keys import KeyOrder, SortKey
from cdc_console.core.schema import ColumnInfo
from cdc_console.core.untyped import Connection
from cdc_console.core.values import RawKey
from cdc_console.mysql.connection import close_quietly, connect
from cdc_console.mysql.retry import call_with_retry

#: values asked for in one query
_BATCH = 256
#: weights kept per collation before the cache starts over
_CACHED = 200_000
#: one per server and collation in a process, so that windows share what earlier ones asked
_SHARED: dict[tuple[str, int, str, str, str], ServerWeights] = {}


class ServerWeights:
    """``WEIGHT_STRING`` of values in one charset and collation, cached."""

    def __init__(self, source: SourceConfig, charset: str, collation: str) -> None:
        self._source = source
        self._value = f"CONVERT(%s USING {charset}) COLLATE {collation}"
        self._expression = f"WEIGHT_STRING({self._value})"
        self._pads: bool | None = None
        self._conn: Connection | None = None
        self._cache: dict[str, bytes] = {}
        self._lock = threading.RLock()

    def _cursor_rows(self, sql: str, args: list[str]) -> tuple[object, ...]:
        """One row of ``sql``; a transient fault is waited out as every source read is (a
        longer outage raises ``SourceUnreachableError``, a fault of the job, not the table)."""

        def run() -> tuple[object, ...]:
            if self._conn is None:
                self._conn = connect(self._source)
            with self._conn.cursor() as cur:
                cur.execute(sql, args)
                return tuple(cur.fetchone())

        def drop(_: BaseException) -> None:
            close_quietly(self._conn)
            self._conn = None

        return call_with_retry(
            run,
            what="collation weights",
            outage_seconds=self._source.outage_seconds,
            on_failure=drop,
        )

    def _strip(self, text: str) -> str:
        if self._pads is None:  # PAD SPACE: 'a' = 'a ' in this collation
            (equal,) = self._cursor_rows(f"SELECT {self._value} = {self._value}", ["a", "a "])
            self._pads = bool(equal)
        return text.rstrip(" ") if self._pads else text

    def prefetch(self, values: Iterable[RawKey]) -> None:
        """Weights of every value not cached yet, in as few queries as it takes."""
        texts = (v if isinstance(v, str) else str(v) for v in values)
        wanted = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if len(self._cache) + len(wanted) > _CACHED:
            self._cache.clear()
        for start in range(0, len(wanted), _BATCH):
            part = wanted[start : start + _BATCH]
            sql = "SELECT " + ", ".join([self._expression] * len(part))
            with self._lock:  # one connection, shared by the threads of a process
                found = self._cursor_rows(sql, [self._strip(t) for t in part])
            for text, weight in zip(part, found, strict=True):
                self._cache[text] = weight if isinstance(weight, bytes) else b""

    def weight(self, value: RawKey) -> SortKey:
        text = value if isinstance(value, str) else str(value)
        found = self._cache.get(text)
        if found is None:
            self.prefetch([text])
            found = self._cache[text]
        return cast(SortKey, found)

    def close(self) -> None:
        close_quietly(self._conn)
        self._conn = None


def key_order(column: ColumnInfo, source: SourceConfig | None) -> KeyOrder:
    """The order of ``column``'s chunk keys as the server sorts them: Python's own where it is
    exact, else the server's weights (``source`` None: the approximation, for offline use)."""
    order = KeyOrder.for_column(column)
    if order.exact or source is None or not column.character_set or not column.collation:
        return order
    shared = (source.host, source.port, source.user, column.character_set, column.collation)
    weights = _SHARED.get(shared)
    if weights is None:
        weights = _SHARED[shared] = ServerWeights(source, column.character_set, column.collation)
    return KeyOrder(weights.weight, f"{column.collation} (server weights)", True, weights.prefetch)


#: letters, cases, accents, scripts and punctuation the collation probe sorts
_PROBE_LETTERS = "aAbBzZoOeE éÉèåÅäÄöÖüÜßøØæÆñÑçÇœŒİıÿŸ-_.,'0129中文日本語ＡａЖжΩω"
_PROBE_WORDS = 40
_PROBE_EXPRESSIONS = 400
_AGREES: dict[tuple[str, str], bool] = {}


def _probe_words() -> list[str]:
    words: list[str] = []
    for n in range(_PROBE_WORDS * 3):
        size = 1 + n % 4
        word = "".join(_PROBE_LETTERS[(n * 7 + i * 13) % len(_PROBE_LETTERS)] for i in range(size))
        words.append(word.rstrip(" ") or "x")  # trailing spaces: the pad rule, not the order
    return list(dict.fromkeys(words))


def orderable(conn: Connection, column: ColumnInfo) -> bool:
    """Whether a chunk key of ``column`` can be placed among chunk boundaries outside the
    server: by Python's order where it is exact, else by the server's weights where they agree
    with its comparisons. A key that cannot is read as one chunk (``check`` warns)."""
    if KeyOrder.for_column(column).exact:
        return True
    if not column.character_set or not column.collation:
        return False
    return weights_agree(conn, column.character_set, column.collation)


def weights_agree(conn: Connection, charset: str, collation: str) -> bool:
    """Whether the server's ``WEIGHT_STRING`` orders values as its own comparisons do in this
    collation, over probe words it can hold (cached per collation). On MariaDB 10.11 five of
    322 do not (``big5_chinese_ci`` and its NO PAD twin, the three ``latin7`` ones): a chunk
    key in those is read as one chunk."""
    known = _AGREES.get((charset, collation))
    if known is not None:
        return known
    value = f"CONVERT(%s USING {charset}) COLLATE {collation}"
    with conn.cursor() as cur:
        words = _probe_words()
        held = "CONVERT(CONVERT(%s USING {}) USING utf8mb4) = %s COLLATE utf8mb4_bin"
        cur.execute(
            "SELECT " + ", ".join([held.format(charset)] * len(words)),
            [x for w in words for x in (w, w)],
        )
        kept = [w for w, ok in zip(words, cur.fetchone(), strict=True) if ok][:_PROBE_WORDS]
        cur.execute("SELECT " + ", ".join([f"WEIGHT_STRING({value})"] * len(kept)), kept)
        weights = [bytes(w or b"") for w in cur.fetchone()]
        pairs = [(i, j) for i in range(len(kept)) for j in range(i + 1, len(kept))]
        agree = True
        for start in range(0, len(pairs), _PROBE_EXPRESSIONS):
            part = pairs[start : start + _PROBE_EXPRESSIONS]
            cur.execute(
                "SELECT " + ", ".join([f"STRCMP({value}, {value})"] * len(part)),
                [x for i, j in part for x in (kept[i], kept[j])],
            )
            for (i, j), said in zip(part, cur.fetchone(), strict=True):
                a, b = weights[i], weights[j]
                if said is not None and int(said) != (a > b) - (a < b):
                    agree = False
    _AGREES[(charset, collation)] = agree
    return agree
