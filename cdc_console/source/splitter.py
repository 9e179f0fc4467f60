"""Splitting a table into snapshot chunks on its chunk key, as Flink CDC's ``MySqlChunkSplitter``.

Two strategies, chosen per table:

* **Evenly, by arithmetic.** An integer key whose values are spread about as densely as the rows
  (the distribution factor ``(max - min + 1) / rows`` lies within the configured bounds) is cut
  into ``[min + i*step, min + (i+1)*step)`` ranges without touching the data again. Python ints
  carry every value exactly, BIGINT UNSIGNED up to 2^64-1 included.
* **Unevenly, by asking the server.** Any other key (strings, decimals, dates, binary, or sparse
  integers) is walked with ``SELECT MAX(k) FROM (SELECT k ... WHERE k >= start ORDER BY k LIMIT n)``:
  each boundary is a value the server itself placed ``n`` rows further on. Every comparison that
  decides a boundary (has the walk advanced, has it reached the maximum) is made by the server too,
  because Python's ordering of strings is not the column's collation: under
  ``utf8mb4_general_ci`` 'a' and 'A' are equal and 'B' sorts after 'a'.

The first chunk starts at -inf and the last ends at +inf, so rows inserted after splitting, below
the old minimum or above the old maximum, still belong to a chunk. Only the first column of a
composite key is used; when one first-column value repeats more than ``chunk_size`` times its
chunk grows to hold all of them, since a range on one column cannot cut between equal values.

The splitter only reads (MIN/MAX, ORDER BY ... LIMIT, ``information_schema``): no lock, no write.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from fractions import Fraction

from cdc_console.core.chunk import ChunkRange
from cdc_console.core.mysqltypes import TypeFamily, is_enum
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema, param_safe, quote_ident
from cdc_console.core.splits import SnapshotSplit
from cdc_console.core.untyped import Connection, DriverRow
from cdc_console.core.values import RawKey
from cdc_console.errors import ConfigError
from cdc_console.mysql.key_weights import orderable

log = logging.getLogger(__name__)


EXACT_COUNT_BELOW = 100_000
"""Below this ``TABLE_ROWS`` estimate the splitter runs ``SELECT COUNT(*)`` instead.

InnoDB's estimate can be far off, or 0, for a table just bulk-loaded (statistics are recomputed
asynchronously) and MySQL 8 caches it for a day. For a small table that error decides between one
chunk and several, and counting it exactly costs milliseconds; for a large table the estimate only
nudges the step size, and counting would scan the whole index.
"""

FACTOR_SCALE = 10_000
"""The distribution factor is rounded up to 4 decimals, as Flink CDC rounds it."""


def is_integer_key(column: ColumnInfo) -> bool:
    return column.family is TypeFamily.INTEGER


def distribution_factor(min_key: int, max_key: int, rows: int) -> Fraction:
    """``(max - min + 1) / rows`` rounded up to 4 decimals: 1 means one key value per row.

    Exact rational arithmetic: near 2^64 a float would already have lost the low digits.
    """
    if rows <= 0:
        raise ValueError("distribution factor needs a positive row count")
    span = max_key - min_key + 1
    return Fraction(-(-span * FACTOR_SCALE // rows), FACTOR_SCALE)


def factor_within(factor: Fraction, lower: float, upper: float) -> bool:
    """Whether ``lower <= factor <= upper``, inclusive and exact.

    The bounds are read as the decimals the user wrote (``0.05``), not as their binary floats,
    which lie a hair off and would make a factor of exactly 0.05 fall outside.
    """
    if factor < Fraction(repr(lower)):
        return False
    return math.isinf(upper) or factor <= Fraction(repr(upper))


def even_step(factor: Fraction, chunk_size: int) -> int:
    """Key values per chunk so each chunk holds about ``chunk_size`` rows: ``factor * chunk_size``
    truncated, at least 1 (Flink CDC's dynamic chunk size)."""
    return max(int(factor * chunk_size), 1)


def even_boundaries(min_key: int, max_key: int, step: int) -> list[int]:
    """Inner boundaries ``min + step, min + 2*step, ...`` up to and including ``max``.

    A boundary equal to ``max`` is kept, giving a last chunk ``[max, +inf)``, exactly as Flink CDC
    does; no boundary ever exceeds ``max``, so none falls outside the column's type range.
    """
    if step < 1:
        raise ValueError("step must be at least 1")
    first = min_key + step
    if first > max_key:
        return []
    return list(range(first, max_key + 1, step))


def ranges_from_boundaries(boundaries: Sequence[RawKey]) -> list[ChunkRange]:
    """Contiguous ranges ``(-inf, b0), [b0, b1), ..., [bn, +inf)``; no boundaries gives one range."""
    edges: list[RawKey] = [None, *boundaries, None]
    return [ChunkRange(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def format_factor(factor: Fraction) -> str:
    return f"{float(factor):.4g}" if factor < 10**6 else f"{float(factor):.3e}"


#: rows, in chunks, the open last chunk may hold before it is split again (``split_tail``)
TAIL_GROWTH = 2


class ChunkSplitter:
    """Computes the snapshot splits of one table at a time over a read-only connection.

    ``conn`` is an autocommit pymysql connection. Splitting is not transactional: rows written
    meanwhile may make a chunk a little larger or smaller than ``chunk_size``, never lose a row,
    because the ranges are contiguous and unbounded at both ends.
    """

    def __init__(
        self,
        conn: Connection,
        chunk_size: int,
        distribution_factor_upper: float = 1000.0,
        distribution_factor_lower: float = 0.05,
    ) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        if not (
            0 <= distribution_factor_lower <= distribution_factor_upper
            and math.isfinite(distribution_factor_lower)
        ):
            raise ValueError(
                "distribution factor bounds must satisfy 0 <= lower <= upper, got "
                f"[{distribution_factor_lower}, {distribution_factor_upper}]"
            )
        self.conn = conn
        self.chunk_size = chunk_size
        #: how the last ``split`` chose its chunks, in words
        self.method = ""
        self.factor_upper = distribution_factor_upper
        self.factor_lower = distribution_factor_lower

    def split(self, schema: TableSchema) -> list[SnapshotSplit]:
        table = schema.table_id
        if not schema.chunk_key:
            raise ConfigError(
                f"{table} has no primary key to split its snapshot on",
                f'name a unique, indexed column: [snapshot] chunk_key = {{ "{table}" = "id" }}',
            )
        try:
            column = schema.column(schema.chunk_key)
        except KeyError:
            raise ConfigError(
                f"chunk key {schema.chunk_key!r} is not a column of {table}",
                f"fix [snapshot] chunk_key for {table}: one of {', '.join(schema.column_names)}",
            ) from None
        if column.nullable:
            log.warning(
                "split %s: chunk key %s is nullable; rows where it is NULL fall in no range "
                "and must be read with the first chunk",
                table,
                column.name,
            )
        ranges = self._split_ranges(schema, column)
        return [
            SnapshotSplit(table, number, column.name, chunk_range)
            for number, chunk_range in enumerate(ranges)
        ]

    def split_tail(self, schema: TableSchema, tail: ChunkRange) -> list[ChunkRange]:
        """The open last chunk ``[start, +inf)`` of a table that grew while it was being read,
        split again just before it is read; [] when it still holds at most ``TAIL_GROWTH``
        chunks' worth of rows (or cannot be split: a key ordered only by the server).

        Rows inserted above the maximum seen at splitting all land in that last chunk, so a
        table filling up during its snapshot would otherwise end in one chunk of any size.
        The new ranges cover exactly ``[start, +inf)``, the last again open-ended; nothing of
        the chunk was read yet, so nothing is lost or read twice.
        """
        if tail.end is not None:
            return []
        column = schema.column(schema.chunk_key)
        if column.family is TypeFamily.SET or is_enum(column.data_type):
            return []
        table = param_safe(schema.table_id.quoted())
        key = param_safe(quote_ident(column.name))
        where = "" if tail.start is None else f" WHERE {key} >= %s"
        args = () if tail.start is None else (tail.start,)
        limit = TAIL_GROWTH * self.chunk_size
        (rows,) = self._query_one(
            f"SELECT COUNT(*) FROM (SELECT 1 FROM {table}{where} LIMIT {limit + 1}) AS t", args
        )
        if int(rows) <= limit or not orderable(self.conn, column):
            return []
        low, high = self._query_one(f"SELECT MIN({key}), MAX({key}) FROM {table}{where}", args)
        if low is None:
            return []
        start = low if tail.start is None else tail.start
        boundaries = self._uneven_boundaries(schema, column, start, high)
        if not boundaries:
            return []
        log.info(
            "split %s: the open last chunk %s grew past %d rows; %d chunks now",
            schema.table_id,
            tail,
            limit,
            len(boundaries) + 1,
        )
        return [ChunkRange(tail.start, boundaries[0]), *ranges_from_boundaries(boundaries)[1:]]

    def _chose(self, method: str, boundaries: Sequence[RawKey]) -> list[ChunkRange]:
        """The ranges of ``boundaries``, with how they were chosen kept in ``method`` (``plan``
        shows it)."""
        self.method = method
        return ranges_from_boundaries(boundaries)

    def _split_ranges(self, schema: TableSchema, column: ColumnInfo) -> list[ChunkRange]:
        table = schema.table_id
        key = quote_ident(column.name)
        min_key, max_key, single = self._query_one(
            f"SELECT MIN({key}), MAX({key}), MIN({key}) = MAX({key}) FROM {table.quoted()}"
        )
        if min_key is None:
            log.info("split %s: empty table, one chunk (-inf, +inf)", table)
            return self._chose("empty table: one chunk", [])
        if single:
            log.info("split %s: one distinct %s value (%r), one chunk", table, column.name, min_key)
            return self._chose("one distinct key value: one chunk", [])

        unsplittable = self._unsplittable(table, column)
        if unsplittable is not None:
            return self._chose(unsplittable, [])
        if not is_integer_key(column):
            log.info(
                "split %s: unevenly by %s (%s key, boundaries from the server's order)",
                table,
                column.name,
                column.data_type,
            )
            return self._chose(
                "unevenly, boundaries from the server's order",
                self._uneven_boundaries(schema, column, min_key, max_key),
            )

        return self._integer_ranges(schema, column, int(min_key), int(max_key))

    def _unsplittable(self, table: TableId, column: ColumnInfo) -> str | None:
        """Why a key cannot be cut into ranges that keep every change in its chunk, if so."""
        if column.family is TypeFamily.SET or is_enum(column.data_type):
            # ORDER BY/MIN/MAX use the member number, which disagrees with k >= 'text'.
            log.warning(
                "split %s: %s is %s, sorted by member number but compared as text, so ranges on "
                "it would overlap; one chunk",
                table,
                column.name,
                column.data_type.upper(),
            )
            return f"{column.data_type.upper()} key: one chunk"
        if not orderable(self.conn, column):
            log.warning(
                "split %s: %s's collation %s orders values otherwise by the server's weights "
                "than by its comparisons, so a change could not be placed in its chunk; one "
                "chunk",
                table,
                column.name,
                column.collation,
            )
            return f"collation {column.collation} not orderable: one chunk"
        return None

    def _integer_ranges(
        self, schema: TableSchema, column: ColumnInfo, min_key: int, max_key: int
    ) -> list[ChunkRange]:
        """An integer key: even steps when the keys are dense enough, else the server's order."""
        table = schema.table_id
        rows, how = self._row_count(schema)
        if rows <= self.chunk_size:
            log.info(
                "split %s: %s rows (%s) fit in one chunk of %d, one chunk",
                table,
                rows,
                how,
                self.chunk_size,
            )
            return self._chose(f"{rows} rows ({how}) fit in one chunk", [])
        factor = distribution_factor(min_key, max_key, rows)
        if not factor_within(factor, self.factor_lower, self.factor_upper):
            log.info(
                "split %s: unevenly by %s (factor %s outside [%s, %s], %s rows %s)",
                table,
                column.name,
                format_factor(factor),
                self.factor_lower,
                self.factor_upper,
                rows,
                how,
            )
            return self._chose(
                f"unevenly: distribution factor {format_factor(factor)} out of bounds",
                self._uneven_boundaries(schema, column, min_key, max_key),
            )
        step = even_step(factor, self.chunk_size)
        ranges = self._chose(
            f"evenly: step {step} over keys {min_key}..{max_key} ({rows} rows {how})",
            even_boundaries(min_key, max_key, step),
        )
        log.info(
            "split %s: evenly by %s, factor %s, step %d, %d chunks (%s rows %s, keys %d..%d)",
            table,
            column.name,
            format_factor(factor),
            step,
            len(ranges),
            rows,
            how,
            min_key,
            max_key,
        )
        return ranges

    def _row_count(self, schema: TableSchema) -> tuple[int, str]:
        """The table's row count and how it was obtained (see ``EXACT_COUNT_BELOW``)."""
        table = schema.table_id
        (estimate,) = self._query_one(
            "SELECT TABLE_ROWS FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (table.database, table.table),
        ) or (None,)
        if estimate is not None and int(estimate) >= EXACT_COUNT_BELOW:
            return int(estimate), "estimated"
        (count,) = self._query_one(f"SELECT COUNT(*) FROM {table.quoted()}")
        return int(count), "counted"

    def _uneven_boundaries(
        self, schema: TableSchema, column: ColumnInfo, min_key: RawKey, max_key: RawKey
    ) -> list[RawKey]:
        """Walk the key in server order, ``chunk_size`` rows at a time.

        Each step asks for the largest of the next ``chunk_size`` keys from the current start.
        When that reaches the maximum seen before splitting, the rest of the table fits in one
        chunk and the walk ends with ``[start, +inf)``; rows inserted above the maximum meanwhile
        do not prolong it. When it equals the start (the start value repeats at least
        ``chunk_size`` times, as the first column of a composite key may), the boundary becomes the
        next greater value instead, even if that is the maximum itself: the chunk of the repeated
        value is already full, and the maximum's rows go to a chunk of their own (Flink CDC merges
        them into the full one). The equality and end tests are SQL comparisons against the
        column, so they follow its collation (``'a' = 'A'`` under ``*_ci``, trailing spaces under
        PAD SPACE).
        """
        table = param_safe(schema.table_id.quoted())
        key = param_safe(quote_ident(column.name))
        next_max_sql = (
            f"SELECT e, e > %s, e >= %s FROM (SELECT MAX({key}) AS e FROM "
            f"(SELECT {key} FROM {table} WHERE {key} >= %s ORDER BY {key} LIMIT {self.chunk_size})"
            " AS s) AS t"
        )
        next_greater_sql = (
            f"SELECT e, e > %s FROM (SELECT MIN({key}) AS e FROM {table} WHERE {key} > %s) AS t"
        )
        boundaries: list[RawKey] = []
        start = min_key
        queries = 0
        while True:
            end, advanced, stop = self._query_one(next_max_sql, (start, max_key, start))
            queries += 1
            if end is not None and not advanced:
                end, stop = self._query_one(next_greater_sql, (max_key, start))
                queries += 1
            if end is None or stop:
                break
            if end == start:
                # Sending the same value again would get the same answer forever: the client's
                # copy of the key is lossy (FLOAT arrives rounded to 6 digits) and lies below it.
                log.warning(
                    "split %s: %s value %r does not round-trip through the client; the last "
                    "chunk takes the rest of the table",
                    schema.table_id,
                    column.name,
                    end,
                )
                break
            boundaries.append(end)
            start = end
            if len(boundaries) % 100 == 0:
                log.debug(
                    "split %s: %d boundaries so far, at %r", schema.table_id, len(boundaries), end
                )
        log.info(
            "split %s: %d chunks by %s in %d queries",
            schema.table_id,
            len(boundaries) + 1,
            column.name,
            queries,
        )
        return boundaries

    def _query_one(self, sql: str, args: object = None) -> DriverRow:
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            row: DriverRow = cur.fetchone()  # MIN/MAX/COUNT: always one row
            return row
