"""Table identity and column metadata: the value types every layer shares.

A ``TableSchema`` is what ``information_schema`` says about a captured table (read by
``cdc_console.mysql.schema.load_table_schema``); the snapshot path and the binlog path normalise
values through the same column metadata, and plans and the state database carry it in its dict
form (``schema_to_dict``). Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

from cdc_console.core.invalid_dates import InvalidDates, companion_name
from cdc_console.core.masks import ColumnMask
from cdc_console.core.mysqltypes import TypeFamily, family_of
from cdc_console.core.untyped import Loaded
from cdc_console.core.values import JSONObject, JSONValue

#: A counted table's mirror column holding how many source rows have the row's content
#: (``TableSchema.counted``); a source column of that name makes the table uncapturable.
COUNT_COLUMN = "_cdc_count"
#: A routed table's mirror columns naming the source table each row comes from
#: (``TableSchema.routed``): part of the mirror's key, as two shards may hold one id.
ORIGIN_DATABASE = "_cdc_database"
ORIGIN_TABLE = "_cdc_table"
ORIGIN_COLUMNS = (ORIGIN_DATABASE, ORIGIN_TABLE)


@dataclass(frozen=True, order=True)
class TableId:
    """``database.table``; ordered so plans and listings are deterministic.

    Its text (``str``) reads back through ``parse``: a part that a plain reading would take
    apart is written in backticks, as SQL writes it (`` `customer3.0`.customers ``), and a
    table name holding ``*`` too, so that the text pasted into ``source.tables`` names that
    table and no pattern.
    """

    database: str
    table: str

    @classmethod
    def parse(cls, text: str) -> TableId:
        name = parse_qualified(text)
        if name is None:
            raise ValueError(
                f"table name {text!r} must be 'database.table' (a part holding a dot in "
                "backticks: `db.1`.orders)"
            )
        return cls(name.database, name.table)

    def quoted(self) -> str:
        return f"{quote_ident(self.database)}.{quote_ident(self.table)}"

    def __str__(self) -> str:
        return f"{spell_database(self.database)}.{spell_table(self.table)}"


def param_safe(sql: str) -> str:
    """SQL text built from quoted names, made ready to carry ``%s`` parameters: the driver
    formats a statement that has parameters with ``%``, so a ``%`` in a name is doubled."""
    return sql.replace("%", "%%")


def quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def spell_database(name: str) -> str:
    """A database name as ``parse_qualified`` reads it back: in backticks where it holds a dot."""
    return quote_ident(name) if "." in name or name.startswith("`") or not name else name


def spell_table(name: str) -> str:
    """A table name as ``parse_qualified`` reads it back as that name, never as a pattern."""
    return quote_ident(name) if "*" in name or name.startswith("`") or not name else name


@dataclass(frozen=True)
class QualifiedName:
    """A ``database.table`` as written in a config or on a command line, with which of its
    parts were quoted (a quoted part is a name, never a pattern)."""

    database: str
    table: str
    database_quoted: bool = False
    table_quoted: bool = False


def _quoted_part(text: str, start: int) -> tuple[str, int] | None:
    """The backtick-quoted identifier at ``text[start]`` and the index after it."""
    out: list[str] = []
    i = start + 1
    while i < len(text):
        if text[i] == "`":
            if text[i + 1 : i + 2] == "`":
                out.append("`")
                i += 2
                continue
            return "".join(out), i + 1
        out.append(text[i])
        i += 1
    return None


def parse_qualified(text: str) -> QualifiedName | None:
    """``db.table``, where either part may be in backticks (``` ``` doubles a backtick inside);
    unquoted, the database ends at the first dot and the table is the rest. None when ``text``
    is not of that form."""
    if text.startswith("`"):
        quoted = _quoted_part(text, 0)
        if quoted is None or text[quoted[1] : quoted[1] + 1] != ".":
            return None
        database, rest, database_quoted = quoted[0], text[quoted[1] + 1 :], True
    else:
        database, sep, rest = text.partition(".")
        if not sep:
            return None
        database_quoted = False
    if rest.startswith("`"):
        quoted = _quoted_part(rest, 0)
        if quoted is None or quoted[1] != len(rest):
            return None
        table, table_quoted = quoted[0], True
    else:
        table, table_quoted = rest, False
    if not database or not table:
        return None
    return QualifiedName(database, table, database_quoted, table_quoted)


@dataclass(frozen=True)
class ColumnInfo:
    """One column as the server describes it (``information_schema.COLUMNS``)."""

    name: str
    data_type: str  # lower-case base type: int, bigint, decimal, varchar, datetime, ...
    column_type: str  # full type text: 'bigint(20) unsigned', "enum('a','b')", ...
    nullable: bool = True
    numeric_precision: int | None = None
    numeric_scale: int | None = None
    datetime_precision: int | None = None
    character_set: str | None = None
    collation: str | None = None
    enum_values: tuple[str, ...] = ()
    #: what a zero or invalid value of a DATE, DATETIME or TIMESTAMP column becomes
    #: (``core.invalid_dates``); configured, not read from the server
    invalid_dates: InvalidDates = InvalidDates.NULL
    #: what its values become in the mirror (``core.masks``); configured, None: themselves
    mask: ColumnMask | None = None

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type.lower()

    @property
    def family(self) -> TypeFamily | None:
        """How values of this column travel (``cdc_console.core.mysqltypes``); None: unsupported."""
        return family_of(self.data_type)


@dataclass(frozen=True)
class TableSchema:
    """A captured table: its columns in ordinal order, its key, and the column chunks split on.

    ``retired`` are columns the source dropped that its mirror keeps (null in every row written
    since): the mirror's columns are ``columns`` then ``retired``; the source is read with
    ``columns`` only.

    ``counted``: the table has no key that tells its rows apart (no primary key and no NOT NULL
    column with a UNIQUE index of its own), so duplicates are legal. Its rows are then
    identified by their whole content, and its mirror holds each distinct row once with its
    multiplicity in ``COUNT_COLUMN`` (``sinks.counted``).
    """

    table_id: TableId
    columns: tuple[ColumnInfo, ...]
    primary_key: tuple[str, ...]
    chunk_key: str
    extra: dict[str, JSONValue] = field(default_factory=dict, compare=False)
    retired: tuple[ColumnInfo, ...] = ()
    counted: bool = False
    #: every column of the source table in its order, when some are left out of the mirror
    #: (``[pipeline] exclude_columns``); empty when none is
    source_names: tuple[str, ...] = ()
    #: why the config's rules for the table cannot hold (a masked column no longer a
    #: character column, a missing mask key): the table is parked and nothing of it is read.
    #: Never stored: the rules are applied afresh at each start
    refused: str = field(default="", compare=False)
    #: the table is one of several routed into one mirror (``[sink] mirrors`` with a table
    #: pattern): its rows carry ``ORIGIN_COLUMNS`` with its own name, which join its key
    routed: bool = False

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @cached_property
    def companions(self) -> tuple[ColumnInfo, ...]:
        """The mirror's companion columns of the date columns ruled ``text``
        (``core.invalid_dates``): never read from the source, filled from their date column
        as rows are normalised. Derived from the rules, so never stored."""
        return companions_of(self.columns)

    @property
    def row_columns(self) -> tuple[ColumnInfo, ...]:
        """The columns a canonical row of the table holds: its source columns, then their
        companions, then, routed, its origin. ``columns`` is what the source has; this is
        what the mirror is given."""
        return (*self.columns, *self.companions, *self.origin_columns)

    @property
    def origin_columns(self) -> tuple[ColumnInfo, ...]:
        """A routed table's ``ORIGIN_COLUMNS`` (none otherwise)."""
        if not self.routed:
            return ()
        return tuple(
            ColumnInfo(
                name,
                "varchar",
                "varchar(64)",
                nullable=False,
                character_set="utf8mb4",
                collation="utf8mb4_bin",
            )
            for name in ORIGIN_COLUMNS
        )

    @property
    def origin(self) -> dict[str, str]:
        """The values of a routed table's origin columns in each of its rows."""
        if not self.routed:
            return {}
        return {ORIGIN_DATABASE: self.table_id.database, ORIGIN_TABLE: self.table_id.table}

    @property
    def row_names(self) -> list[str]:
        return [c.name for c in self.row_columns]

    @property
    def retired_row_columns(self) -> tuple[ColumnInfo, ...]:
        """The mirror's columns the source dropped (``retired``), with their companions."""
        return (*self.retired, *companions_of(self.retired))

    @property
    def left_out(self) -> tuple[str, ...]:
        """The source's columns never read nor mirrored (``[pipeline] exclude_columns``)."""
        kept = {c.name for c in self.columns}
        return tuple(n for n in self.source_names if n not in kept)

    @property
    def binlog_names(self) -> list[str]:
        """The columns a row event of the table carries, in order: the left-out ones too (the
        server writes whole rows; they are dropped as the images are decoded)."""
        return list(self.source_names) if self.source_names else self.column_names

    def column(self, name: str) -> ColumnInfo:
        for col in self.row_columns:
            if col.name == name:
                return col
        raise KeyError(f"{self.table_id} has no column {name!r}")

    @property
    def key_columns(self) -> tuple[str, ...]:
        """Columns that identify a row: the primary key, the unique chunk key, or (a counted
        table) every column."""
        origin = ORIGIN_COLUMNS if self.routed else ()
        if self.primary_key:
            return (*self.primary_key, *origin)
        if self.counted:
            return tuple(self.row_names)
        return (self.chunk_key, *origin)

    @property
    def uncaptured(self) -> str:
        """Why the table cannot be captured as it is (its first column of a type without a
        family), or "" when every column's type is captured."""
        for column in self.columns:
            if column.family is None:
                return f"column {column.name} has type {column.column_type}, which is not captured"
        if self.counted and COUNT_COLUMN in self.column_names:
            return (
                f"it has no unique key, so its mirror counts duplicate rows in a column "
                f"{COUNT_COLUMN}, which is also the name of one of its own columns"
            )
        taken = [n for n in ORIGIN_COLUMNS if n in self.column_names] if self.routed else []
        if taken:
            return (
                f"it is routed into a mirror with other tables, whose rows name their table in "
                f"a column {taken[0]}, which is also the name of one of its own columns"
            )
        return ""


def companion_column(column: ColumnInfo) -> ColumnInfo:
    """The string column of the mirror that holds ``column``'s invalid dates as the source
    wrote them (``core.invalid_dates``)."""
    return ColumnInfo(
        companion_name(column.name),
        "varchar",
        "varchar(32)",
        character_set="utf8mb4",
        collation="utf8mb4_bin",
    )


def companions_of(columns: Iterable[ColumnInfo]) -> tuple[ColumnInfo, ...]:
    return tuple(companion_column(c) for c in columns if c.invalid_dates is InvalidDates.TEXT)


def enum_values_of(column_type: str) -> tuple[str, ...]:
    """Parse ``enum('a','b''c')`` / ``set(...)`` into its member list, in definition order."""
    inner = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    values: list[str] = []
    i = 0
    while i < len(inner):
        if inner[i] == "'":
            j = i + 1
            buf = []
            while j < len(inner):
                if inner[j] == "'" and j + 1 < len(inner) and inner[j + 1] == "'":
                    buf.append("'")
                    j += 2
                    continue
                if inner[j] == "'":
                    break
                if inner[j] == "\\" and j + 1 < len(inner):
                    buf.append(inner[j + 1])
                    j += 2
                    continue
                buf.append(inner[j])
                j += 1
            values.append("".join(buf))
            i = j + 1
        else:
            i += 1
    return tuple(values)


_JSON_VALID = re.compile(r"\s*json_valid\s*\(\s*`((?:[^`]|``)+)`\s*\)\s*", re.IGNORECASE)


def json_valid_column(check_clause: str) -> str | None:
    """The column a ``json_valid(`col`)`` CHECK clause guards, or None for any other clause.

    MariaDB implements ``JSON`` as ``LONGTEXT`` plus exactly this column constraint, and reports
    only ``longtext`` in ``information_schema.COLUMNS``; the constraint is the one trace left of
    the declared type. Anything more elaborate than the bare call is not the JSON alias.
    """
    match = _JSON_VALID.fullmatch(check_clause)
    return match.group(1).replace("``", "`") if match else None


def mark_json_columns(
    columns: Iterable[ColumnInfo], check_clauses: Iterable[str]
) -> tuple[ColumnInfo, ...]:
    """Report ``longtext`` columns guarded by ``json_valid(col)`` as ``json``.

    Without this a MariaDB JSON column would be copied as plain text: the snapshot and the binlog
    agree on it, but the mirror would keep each writer's spacing and key order instead of the
    canonical JSON that a MySQL server's JSON column gets.
    """
    guarded = {name for name in map(json_valid_column, check_clauses) if name is not None}
    return tuple(
        replace(c, data_type="json") if c.data_type == "longtext" and c.name in guarded else c
        for c in columns
    )


def _column_to_dict(c: ColumnInfo) -> JSONObject:
    """``invalid_dates`` appears only when it is not the default, so the schemas stored before
    the rule existed read as equal to today's."""
    data: JSONObject = {
        "name": c.name,
        "data_type": c.data_type,
        "column_type": c.column_type,
        "nullable": c.nullable,
        "numeric_precision": c.numeric_precision,
        "numeric_scale": c.numeric_scale,
        "datetime_precision": c.datetime_precision,
        "character_set": c.character_set,
        "collation": c.collation,
        "enum_values": list(c.enum_values),
    }
    if c.invalid_dates is not InvalidDates.NULL:
        data["invalid_dates"] = str(c.invalid_dates)
    if c.mask is not None:
        data["mask"] = c.mask.to_dict()
    return data


def _column_from_dict(c: Mapping[str, Loaded]) -> ColumnInfo:
    rule = InvalidDates(str(c.get("invalid_dates", InvalidDates.NULL)))
    mask = c.get("mask")
    return ColumnInfo(
        **{
            **c,
            "enum_values": tuple(c.get("enum_values", ())),
            "invalid_dates": rule,
            "mask": ColumnMask.from_dict(mask) if mask else None,
        }
    )


def schema_to_dict(schema: TableSchema) -> JSONObject:
    """Plain-dict form, so the schema a snapshot was read with travels in plans and state.
    ``retired`` appears only when there are retired columns."""
    data: JSONObject = {
        "table": str(schema.table_id),
        "columns": [_column_to_dict(c) for c in schema.columns],
        "primary_key": list(schema.primary_key),
        "chunk_key": schema.chunk_key,
    }
    if schema.retired:
        data["retired"] = [_column_to_dict(c) for c in schema.retired]
    if schema.counted:
        data["counted"] = True
    if schema.source_names:
        data["source_names"] = list(schema.source_names)
    if schema.routed:
        data["routed"] = True
    return data


def schema_from_dict(data: Mapping[str, Loaded]) -> TableSchema:
    return TableSchema(
        TableId.parse(data["table"]),
        tuple(_column_from_dict(c) for c in data["columns"]),
        tuple(data["primary_key"]),
        data["chunk_key"],
        retired=tuple(_column_from_dict(c) for c in data.get("retired", ())),
        counted=bool(data.get("counted", False)),
        source_names=tuple(str(n) for n in data.get("source_names", ())),
        routed=bool(data.get("routed", False)),
    )
