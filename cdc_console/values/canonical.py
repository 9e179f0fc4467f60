"""One canonical value per stored value, whichever path read it.

This is the *One canonical value* invariant (README, "The invariants").

A row reaches the pipeline two ways: the snapshot SELECT (pymysql, default converters, session
``time_zone = '+00:00'``) and the binlog (pymysqlreplication 1.0.17, ``binlog_row_metadata=FULL``).
The two drivers disagree on the Python shape of almost every non-trivial type, and the sink merges
rows from both by key, so any disagreement shows up as a phantom update or a row that never
converges. This module maps both shapes onto one canonical, JSON-friendly value per SQL type; the
Delta sink is built on exactly this contract:

===================================  =============================================================
SQL type                             canonical value
===================================  =============================================================
NULL                                 ``None``
tinyint … bigint (±unsigned), year   ``int``
decimal(p, s)                        ``str`` with exactly ``s`` fraction digits, no exponent, no
                                     ``-0``
float                                ``float`` holding the exact float32 value
double                               ``float`` (``-0.0`` folded to ``0.0``, as for float)
bit(n)                               ``int``
char/varchar/*text/enum              ``str`` (CHAR without trailing spaces)
set                                  ``str``: members in definition order joined by ``,``
binary/varbinary/*blob/geometry      ``str``: standard base64 of the bytes (BINARY(n) zero-padded
                                     to n bytes)
date                                 ``"YYYY-MM-DD"``; zero/invalid dates -> the column's rule
datetime(p)                          ``"YYYY-MM-DD HH:MM:SS[.f{p}]"``; zero/invalid -> its rule
timestamp(p)                         the UTC instant, same text plus ``"Z"``; zero -> its rule
time(p)                              ``"[-]HH:MM:SS[.f{p}]"``, hours up to 838
json                                 ``json.dumps(v, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False)``
===================================  =============================================================

What each driver really returns, and how the two are reconciled, is each family's business: one
codec object per family (``values.codecs``) holds its snapshot (text protocol) and binlog-image
converters, its chunk-key forms, its SELECT expression and its sink type, with the quirks of each
driver it undoes named in its module's docstring. This module turns whole rows through them.

A type with no family raises :class:`UnsupportedColumnType` when the normalizer is built, so a
divergence is a clear start-up error rather than a silently drifting mirror.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from cdc_console.core.invalid_dates import InvalidDates, companion_name, zero_text
from cdc_console.core.masks import masker
from cdc_console.core.mysqltypes import TypeFamily, UnsupportedColumnType
from cdc_console.core.schema import ColumnInfo, TableSchema, quote_ident
from cdc_console.core.untyped import DriverValue
from cdc_console.core.values import CanonicalRow, CanonicalValue, RawKey
from cdc_console.values.codecs import (
    EMPTY_SET_SOURCE,
    EPOCH,
    INVALID_DATE_SOURCES,
    JSON_NULL_SOURCE,
    ColumnPlan,
    Converter,
    KeyConverter,
    codec_of,
    precision_of,
)

__all__ = [
    "EMPTY_SET_SOURCE",
    "JSON_NULL_SOURCE",
    "CanonicalRow",
    "CanonicalValue",
    "RawKey",
    "RowNormalizer",
    "UnsupportedColumnType",
    "canonical_chunk_key",
    "chunk_key_converter",
    "invalid_date_text",
    "normalize_value",
    "raw_chunk_key",
    "select_expression",
    "snapshot_converter",
]


def invalid_date_text(value: DriverValue) -> str | None:
    """The source's text of a date column's driver value when it is an invalid date (the
    drivers hand those back as the server's text), else None: a ``text`` companion's value."""
    return value if type(value) is str else None


class _Companion:
    """Fills a ``text``-ruled date column's companion (``core.invalid_dates``) from the
    column's driver value: the source's text where the date is invalid, else None.

    pymysql hands back the server's own text for a date Python cannot hold, and the binlog
    decoders build the same text from the image's date parts (``mysql.row_images``); the
    binlog's zero TIMESTAMP is epoch 0, whose text is the zero value's.
    """

    def __init__(self, column: ColumnInfo) -> None:
        self.source = column.name
        self.name = companion_name(column.name)
        family = codec_of(column).family
        self.zero = (
            zero_text(family, precision_of(column)) if family is TypeFamily.TIMESTAMP else None
        )

    def snapshot(self, value: DriverValue) -> str | None:
        return invalid_date_text(value)

    def binlog(self, value: DriverValue, why: str | None) -> str | None:
        if type(value) is str:
            return value
        if self.zero is not None and value == EPOCH:
            return self.zero
        if value is None and why in INVALID_DATE_SOURCES:
            raise ValueError(
                f"column {self.source!r} holds an invalid date, and the decoder that read it "
                "from the binlog gave no text for it (the table's events went through "
                "python-mysql-replication: a column in a pre-5.6 temporal format, or an event of "
                "a kind left to it), so "
                'its invalid_dates rule \'text\' cannot hold: rule it "null" or "sentinel", or '
                "rebuild the table in today's formats (ALTER TABLE ... FORCE)"
            )
        return None


@lru_cache(maxsize=4096)
def _plan(column: ColumnInfo) -> ColumnPlan:
    """The column's family plan, its converters wrapped by the column's mask, if any."""
    plan = codec_of(column).plan(column)
    if column.mask is None:
        return plan
    mask = masker(column.mask)

    def masked(base: Converter | None) -> Converter:
        if base is None:
            return mask
        return lambda value: mask(base(value))

    return ColumnPlan(masked(plan.snapshot), masked(plan.binlog))


@lru_cache(maxsize=4096)
def _key_plan(column: ColumnInfo, binlog: bool) -> KeyConverter | None:
    return codec_of(column).key(column, _plan(column), binlog)


# --------------------------------------------------------------------------- public API


def normalize_value(
    column: ColumnInfo, value: DriverValue, *, binlog: bool = False, none_source: str | None = None
) -> CanonicalValue:
    """The canonical value of one raw driver value; :class:`RowNormalizer` uses the same plans.

    ``binlog`` says the value came from pymysqlreplication (it needs the TIME2 repair and the
    NULL-vs-empty-SET rules); ``none_source`` is the decoder's ``none_sources`` entry for a
    ``None`` value, which tells an empty SET or a JSON ``null`` from NULL.
    """
    plan = _plan(column)
    if value is None:
        if binlog and plan.is_set and none_source == EMPTY_SET_SOURCE:
            return ""
        if binlog and plan.is_json and none_source == JSON_NULL_SOURCE:
            return "null"
        if binlog and none_source in INVALID_DATE_SOURCES:
            return plan.invalid_date
        return plan.binlog_not_null if binlog else None
    conv = plan.binlog if binlog else plan.snapshot
    return value if conv is None else conv(value)


def snapshot_converter(column: ColumnInfo) -> Converter | None:
    """The snapshot path's converter of one column's non-NULL driver values (None: identity),
    as :class:`RowNormalizer` applies it; for callers that convert a column at a time."""
    return _plan(column).snapshot


def chunk_key_converter(column: ColumnInfo, *, binlog: bool = False) -> KeyConverter:
    """The function :func:`raw_chunk_key` applies, for callers that convert many keys."""
    conv = _key_plan(column, binlog)
    if conv is None:
        return _identity
    return _none_safe(conv)


def _identity(value: RawKey) -> RawKey:
    return value


def _none_safe(conv: KeyConverter) -> KeyConverter:
    def wrapped(value: DriverValue) -> RawKey:
        return None if value is None else conv(value)

    return wrapped


def raw_chunk_key(column: ColumnInfo, value: DriverValue, *, binlog: bool = False) -> RawKey:
    """A raw driver value as a Python object comparable with chunk boundaries.

    Chunk boundaries come from the server through pymysql; a key decoded from the binlog must be
    placed among them, so both shapes map to one comparable type: ``int`` for integers, YEAR and
    BIT, ``Decimal``, ``float``, ``str`` for character types (SET as its member text), ``bytes``
    for binary types (BINARY(n) zero-padded), ``date``/``datetime`` (TIMESTAMP as naive UTC;
    zero dates -> ``None``) and ``timedelta`` for TIME. Ordering by collation is
    :mod:`cdc_console.core.keys`' job, not this function's.
    """
    if value is None:
        return None
    conv = _key_plan(column, binlog)
    return value if conv is None else conv(value)


def select_expression(column: ColumnInfo) -> str:
    """The snapshot SELECT item for one column, aliased to the column's name (FLOAT and DOUBLE
    are read as ``col + 0e0``, exact where the server's FLOAT text is not: ``codecs.numbers``)."""
    if column.family is None:
        return quote_ident(column.name)
    return codec_of(column).select_expression(column)


class RowNormalizer:
    """Canonical rows of one table from either path, with the per-column work planned once.

    ``__init__`` resolves one converter per column and keeps only the non-identity ones, so a row
    costs one ``dict(zip())`` plus one call per column that needs converting (integers and
    character columns cost nothing beyond the dict).
    """

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self._names: tuple[str, ...] = tuple(c.name for c in schema.columns)
        self._name_set = frozenset(self._names)
        #: columns the binlog's images carry that are never mirrored: dropped here, so their
        #: values never leave the reader
        self._left_out = frozenset(schema.left_out)
        plans = [(c.name, _plan(c)) for c in schema.columns]
        self._snapshot_convs: tuple[tuple[str, Converter], ...] = tuple(
            (name, plan.snapshot) for name, plan in plans if plan.snapshot is not None
        )
        self._binlog_convs: tuple[tuple[str, Converter], ...] = tuple(
            (name, plan.binlog) for name, plan in plans if plan.binlog is not None
        )
        # Columns where a binlog None may stand for a non-NULL value (empty SET, JSON null).
        self._set_columns: frozenset[str] = frozenset(n for n, p in plans if p.is_set)
        self._json_columns: frozenset[str] = frozenset(n for n, p in plans if p.is_json)
        self._binlog_nones: tuple[tuple[str, CanonicalValue], ...] = tuple(
            (name, plan.binlog_not_null)
            for name, plan in plans
            if plan.binlog_not_null is not None or plan.is_set or plan.is_json
        )
        # Date columns whose rule keeps an invalid date as a value (a sentinel), not NULL.
        self._invalid_dates: tuple[tuple[str, CanonicalValue], ...] = tuple(
            (name, plan.invalid_date) for name, plan in plans if plan.invalid_date is not None
        )
        # Date columns whose rule keeps an invalid date's text in a companion column.
        self._companions: tuple[_Companion, ...] = tuple(
            _Companion(c) for c in schema.columns if c.invalid_dates is InvalidDates.TEXT
        )
        # A routed table's rows name it (``TableSchema.origin``).
        self._origin: dict[str, str] = schema.origin
        self._key_names: tuple[str, ...] = tuple(schema.key_columns)
        missing = [k for k in self._key_names if k not in schema.row_names]
        if missing:
            raise ValueError(f"{schema.table_id}: key columns {missing} are not table columns")
        #: the snapshot SELECT list, in schema column order (see :func:`select_expression`)
        self.select_list: str = ", ".join(select_expression(c) for c in schema.columns)

    @property
    def column_names(self) -> tuple[str, ...]:
        return self._names

    def snapshot_row(self, values: Sequence[DriverValue]) -> CanonicalRow:
        """A pymysql row tuple, in schema column order (``SELECT {select_list}``) -> canonical."""
        if len(values) != len(self._names):
            raise ValueError(
                f"{self.schema.table_id}: snapshot row has {len(values)} values for "
                f"{len(self._names)} columns"
            )
        row = dict(zip(self._names, values, strict=False))
        for companion in self._companions:
            row[companion.name] = companion.snapshot(row[companion.source])
        for name, conv in self._snapshot_convs:
            value = row[name]
            if value is not None:
                row[name] = conv(value)
        if self._origin:
            row.update(self._origin)
        return row

    def binlog_row(
        self, values: Mapping[str, DriverValue], none_sources: Mapping[str, str] | None = None
    ) -> CanonicalRow:
        """A decoded row image (``row["values"]``, ``row["after_values"]``…) -> canonical.

        Pass the matching ``none_sources`` (``row["none_sources"]``, ``row["after_none_sources"]``)
        so an empty SET in a nullable column is told from NULL; without it such a value reads as
        NULL (a NOT NULL SET column is always right).
        """
        try:
            row = {name: values[name] for name in self._names}
        except KeyError as exc:
            raise ValueError(
                f"{self.schema.table_id}: binlog row lacks column {exc.args[0]!r} (has "
                f"{sorted(values)}); the table changed, or the server runs without "
                "binlog_row_metadata=FULL"
            ) from None
        return self._binlog(row, none_sources)

    def binlog_columns(
        self, values: Mapping[str, DriverValue], none_sources: Mapping[str, str] | None = None
    ) -> CanonicalRow:
        """``binlog_row`` of a partial image (``mysql.partial_images``): only the columns it
        holds, in schema order; a column the table does not have is an error."""
        unknown = [
            name for name in values if name not in self._name_set and name not in self._left_out
        ]
        if unknown:
            raise ValueError(f"{self.schema.table_id}: binlog row has no column {unknown[0]!r}")
        return self._binlog({n: values[n] for n in self._names if n in values}, none_sources)

    def _binlog(
        self, row: dict[str, DriverValue], none_sources: Mapping[str, str] | None
    ) -> CanonicalRow:
        whole = len(row) == len(self._names)
        for companion in self._companions:
            if whole or companion.source in row:
                why = none_sources.get(companion.source) if none_sources is not None else None
                row[companion.name] = companion.binlog(row[companion.source], why)
        for name, conv in self._binlog_convs:
            if not whole and name not in row:
                continue
            value = row[name]
            if value is not None:
                row[name] = conv(value)
        for name, not_null in self._binlog_nones:
            if not whole and name not in row:
                continue
            if row[name] is None:
                why = none_sources.get(name) if none_sources is not None else None
                if why == EMPTY_SET_SOURCE and name in self._set_columns:
                    row[name] = ""
                elif why == JSON_NULL_SOURCE and name in self._json_columns:
                    row[name] = "null"
                elif not_null is not None:
                    row[name] = not_null
        if none_sources is not None:
            for name, invalid in self._invalid_dates:
                if row.get(name, 0) is None and none_sources.get(name) in INVALID_DATE_SOURCES:
                    row[name] = invalid
        if self._origin:
            row.update(self._origin)
        return row

    def key_of(self, row: Mapping[str, CanonicalValue]) -> tuple[CanonicalValue, ...]:
        """The canonical values of the key columns of a canonical row, in key order."""
        return tuple(row[name] for name in self._key_names)


def canonical_chunk_key(column: ColumnInfo, value: CanonicalValue) -> RawKey:
    """The inverse of normalisation for a chunk key: canonical value -> ``raw_chunk_key`` shape.

    A range replace (re-dump) must place the sink's keys, which hold canonical values (decimal
    text, ISO date text, base64 for binary), among the chunk boundaries, which are raw driver
    values; this maps the canonical form back so ``ChunkRange.contains`` can compare them.
    """
    if value is None:
        return None
    inverse = codec_of(column).canonical_key(column)
    if inverse is None:
        return raw_chunk_key(column, value)
    return inverse(value)
