"""What the source server is and which tables the config names: probed, never assumed.

MariaDB and MySQL differ in version numbering, in which binlog variables exist
(``binlog_row_metadata`` only since MySQL 8.0.14 / MariaDB 10.5.0) and in how GTIDs are reported,
so everything here is read from the server and absent variables are tolerated rather than treated
as errors: the caller (the preflight checks) decides what an absence means.

Variables are read with ``SHOW GLOBAL VARIABLES``: it needs no privilege, works on every version of
both servers, and returns nothing (instead of failing) for a name the server does not know, which
``SELECT @@name`` would turn into an error. ``GLOBAL`` matters because our connections set the
session ``time_zone`` to UTC; the server's own zone is what DATETIME values were written in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from cdc_console.config import MirrorPlaces, TablePattern, parse_table_pattern
from cdc_console.core.invalid_dates import COMPANION_SUFFIX, InvalidDateRules, InvalidDates
from cdc_console.core.masks import MaskKeyMissing, MaskKind, column_mask
from cdc_console.core.mysqltypes import TypeFamily
from cdc_console.core.schema import COUNT_COLUMN, ColumnInfo, TableId, TableSchema, quote_ident
from cdc_console.core.untyped import Connection
from cdc_console.core.values import JSONObject
from cdc_console.errors import ConfigError
from cdc_console.mysql.expiry import expiry
from cdc_console.mysql.schema import list_tables

#: Global variables the pipeline depends on or shows; any of them may be missing on a given server.
PROBED_VARIABLES = (
    "log_bin",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "binlog_checksum",
    "server_id",
    # MySQL GTIDs
    "gtid_mode",
    "enforce_gtid_consistency",
    # MariaDB GTIDs
    "gtid_domain_id",
    "gtid_strict_mode",
    "gtid_binlog_pos",
    # binlog retention: MySQL 8 / MariaDB 10.6 have the seconds form, older servers only days
    "expire_logs_days",
    "binlog_expire_logs_seconds",
    "time_zone",
    "system_time_zone",
)

V = TypeVar("V")

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class ServerInfo:
    """The source server as probed: flavour, version and the binlog-relevant global variables."""

    flavour: str  # "mariadb" or "mysql"
    version: tuple[int, int, int]
    version_text: str
    version_comment: str = ""
    variables: dict[str, str] = field(default_factory=dict)

    @property
    def is_mariadb(self) -> bool:
        return self.flavour == "mariadb"

    def variable(self, name: str) -> str | None:
        """The global value of ``name``, or ``None`` when this server has no such variable."""
        return self.variables.get(name)

    @property
    def label(self) -> str:
        """Human description, e.g. ``MariaDB 10.11.19 (Debian 12)``."""
        name = "MariaDB" if self.is_mariadb else "MySQL"
        version = ".".join(str(part) for part in self.version)
        return f"{name} {version}" + (f" ({self.version_comment})" if self.version_comment else "")

    @property
    def gtid_summary(self) -> str:
        """How the server tracks GTIDs, for display: MariaDB always has them, MySQL only if on."""
        if self.is_mariadb:
            pos = self.variable("gtid_binlog_pos")
            strict = self.variable("gtid_strict_mode")
            return f"MariaDB GTID, binlog pos {pos or '(empty)'}, strict mode {strict or '?'}"
        mode = self.variable("gtid_mode")
        return f"gtid_mode {mode}" if mode is not None else "no GTID support"

    @property
    def binlog_retention_seconds(self) -> float | None:
        """How long the server keeps binlogs; ``None`` when it never purges them by age.

        ``binlog_expire_logs_seconds`` wins when non-zero (MySQL 8 makes it the primary setting
        and ignores ``expire_logs_days`` then; MariaDB 10.6 keeps the two in sync).
        """
        return expiry(self.variables)[0]

    @property
    def binlog_purge_unknown(self) -> bool:
        """True when neither retention variable exists: purging by age cannot be ruled out."""
        return (
            self.variable("binlog_expire_logs_seconds") is None
            and self.variable("expire_logs_days") is None
        )

    def to_dict(self) -> JSONObject:
        return {
            "flavour": self.flavour,
            "version": list(self.version),
            "version_text": self.version_text,
            "version_comment": self.version_comment,
            "variables": dict(self.variables),
        }


def parse_version(text: str) -> tuple[int, int, int]:
    """``10.11.19-MariaDB-0+deb12u1-log`` -> ``(10, 11, 19)``; ``(0, 0, 0)`` if unparseable."""
    match = _VERSION.search(text)
    if match is None:
        return (0, 0, 0)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3)))


def probe_server(conn: Connection) -> ServerInfo:
    """Flavour, version and binlog variables of the server behind ``conn`` (any privilege level).

    The flavour comes from the version text or the version comment ("mariadb.org binary
    distribution"); Debian's build says only "Debian 12" in the comment, but always has
    "MariaDB" in ``VERSION()``.
    """
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION(), @@version_comment")
        row = cur.fetchone()
        version_text = str(row[0]) if row and row[0] is not None else ""
        comment = str(row[1]) if row and row[1] is not None else ""
        names = ", ".join(f"'{name}'" for name in PROBED_VARIABLES)
        cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
        variables = {str(name).lower(): str(value) for name, value in cur.fetchall()}
    flavour = "mariadb" if "mariadb" in f"{version_text} {comment}".lower() else "mysql"
    return ServerInfo(
        flavour=flavour,
        version=parse_version(version_text),
        version_text=version_text,
        version_comment=comment,
        variables=variables,
    )


def has_glob(pattern: TablePattern) -> bool:
    return pattern.is_pattern


def rules_for(table_id: TableId, rules: Mapping[str, V]) -> list[V]:
    """The values of the per-table ``rules`` (keyed by ``db.table`` or a pattern) that apply
    to ``table_id``: the matching patterns' in the config's order, then the exact entry's, so
    that applied in turn the exact entry wins."""
    exact = str(table_id)
    found = []
    for text, value in rules.items():
        if text == exact:
            continue
        try:
            pattern = parse_table_pattern(text)
        except ConfigError:
            continue  # the config's own checks name it
        if pattern.matches(table_id.database, table_id.table):
            found.append(value)
    if exact in rules:
        found.append(rules[exact])
    return found


def chunk_key_for(table_id: TableId, overrides: Mapping[str, str]) -> str | None:
    """The configured chunk key for a table: an exact ``db.table`` entry wins over a pattern."""
    exact = overrides.get(str(table_id))
    if exact is not None:
        return exact
    return next(iter(rules_for(table_id, overrides)), None)


def with_invalid_dates(schema: TableSchema, rules: InvalidDateRules) -> TableSchema:
    """``schema`` with each date column's rule (``core.invalid_dates``): an exact ``db.table``
    entry of ``invalid_dates_for`` wins over a pattern, as for ``chunk_key``."""
    table: dict[str, InvalidDates] = {}
    for columns in rules_for(schema.table_id, rules.by_table):
        table.update(columns)

    def ruled(column: ColumnInfo) -> ColumnInfo:
        rule = rules.rule(column.family, column.name, table)
        return column if rule is column.invalid_dates else replace(column, invalid_dates=rule)

    return replace(
        schema,
        columns=tuple(map(ruled, schema.columns)),
        retired=tuple(map(ruled, schema.retired)),
    )


def with_route(schema: TableSchema, places: MirrorPlaces) -> TableSchema:
    """``schema`` marked routed when ``[sink] mirrors`` routes it, by a table pattern, into a
    mirror it shares with other tables (its rows then carry their origin)."""
    routed = places.routed(schema.table_id)
    return schema if routed == schema.routed else replace(schema, routed=routed)


def check_companions(schema: TableSchema) -> TableSchema:
    """``schema`` when each companion its ``text``-ruled date columns give the mirror
    (``core.invalid_dates``) has a name of its own; else ``ConfigError`` naming the clash (the
    mirror would hold two columns of one name)."""
    taken = {n.lower() for n in (*schema.binlog_names, COUNT_COLUMN)}
    for companion in schema.companions:
        if companion.name.lower() in taken:
            date = companion.name[: -len(COMPANION_SUFFIX)]
            raise ConfigError(
                f'pipeline.invalid_dates rules {date} of {schema.table_id} "text", whose '
                f"companion column {companion.name} would take the name of one of its columns",
                f'rule {date} "null" or "sentinel" for {schema.table_id} (invalid_dates_for)',
            )
    return schema


def columns_left_out(table_id: TableId, rules: Mapping[str, tuple[str, ...]]) -> set[str]:
    """The columns ``[pipeline] exclude_columns`` leaves out of ``table_id``: those of every
    entry whose table pattern matches it (names as the server spells them, in any case)."""
    return {c.lower() for columns in rules_for(table_id, rules) for c in columns}


def with_columns_left_out(schema: TableSchema, rules: Mapping[str, tuple[str, ...]]) -> TableSchema:
    """``schema`` without the columns ``[pipeline] exclude_columns`` leaves out, which are then
    never selected, dropped from the binlog's images as they are decoded, and absent from the
    mirror, its change feed and ``verify``. A column that tells rows apart (the key, the
    chunk key) cannot be left out: ``ConfigError``. Names the table lacks are skipped (a
    pattern may cover tables without them)."""
    _named_columns_exist(schema, rules.get(str(schema.table_id), ()), "exclude_columns")
    wanted = columns_left_out(schema.table_id, rules)
    if not wanted:
        return schema
    names = [c.name for c in schema.columns]
    dropped = [n for n in names if n.lower() in wanted]
    if not dropped:
        return schema
    needed = set(schema.primary_key) | {schema.chunk_key}
    if keys := [n for n in dropped if n in needed]:
        raise ConfigError(
            f"pipeline.exclude_columns leaves out {keys[0]} of {schema.table_id}, which tells "
            "its rows apart (its key or chunk key)",
            f"remove {keys[0]} from exclude_columns for {schema.table_id}",
        )
    return replace(
        schema,
        columns=tuple(c for c in schema.columns if c.name not in dropped),
        source_names=tuple(names),
    )


def _named_columns_exist(schema: TableSchema, named: Iterable[str], key: str) -> None:
    """A column an exact ``db.table`` entry names must be one of the table's: a misspelt
    name would leave the column it meant mirrored as it is (a pattern may cover tables
    without it)."""
    have = schema.binlog_names  # a column left out is the table's too (masked, it stays out)
    missing = [c for c in named if c.lower() not in {n.lower() for n in have}]
    if missing:
        raise ConfigError(
            f"pipeline.{key} names {missing[0]} of {schema.table_id}, which has no such column",
            f"correct the name (its columns: {', '.join(have)})",
        )


#: the families a mask takes: their canonical value is their text on every path
MASKABLE = frozenset({TypeFamily.CHAR, TypeFamily.STRING})


def with_masks(
    schema: TableSchema, rules: Mapping[str, Mapping[str, MaskKind]], key_env: str
) -> TableSchema:
    """``schema`` with each column ``[pipeline] mask_columns`` masks marked with its mask
    (``core.masks``): its values are masked as they are read, on both paths, before they leave
    the reader. Only a character column that does not tell rows apart can be masked, and a
    ``sha256`` mask needs its key in ``key_env``: ``ConfigError`` otherwise. An exact
    ``db.table`` entry wins over a pattern; names the table lacks are skipped."""
    _named_columns_exist(schema, tuple(rules.get(str(schema.table_id), ())), "mask_columns")
    wanted: dict[str, MaskKind] = {}
    for columns in rules_for(schema.table_id, rules):
        wanted.update({c.lower(): k for c, k in columns.items()})
    if not wanted:
        return schema
    # a keyless (counted) table's rows are told apart by their whole content: masked, they
    # still are (equal values mask alike), so only its chunk key must stay as it is
    needed = set(schema.primary_key) | {schema.chunk_key}
    masked: list[ColumnInfo] = []
    for column in schema.columns:
        kind = wanted.get(column.name.lower())
        if kind is None:
            masked.append(column)
            continue
        where = f"pipeline.mask_columns masks {column.name} of {schema.table_id}"
        if column.name in needed:
            raise ConfigError(
                f"{where}, which tells its rows apart (its key or chunk key)",
                f"remove {column.name} from mask_columns for {schema.table_id}",
            )
        if column.family not in MASKABLE:
            raise ConfigError(
                f"{where}, a {column.column_type} column: only character columns are masked",
                f"leave {column.name} out instead (exclude_columns), or remove its mask",
            )
        try:
            mask = column_mask(kind, key_env)
        except MaskKeyMissing:
            raise ConfigError(
                f"{where} with a keyed hash, and ${key_env} (its key) is not set",
                f"export {key_env}=<a long random secret>, the same wherever this pipeline "
                "runs (equal values then hash alike), or set [pipeline] mask_key_env",
            ) from None
        masked.append(replace(column, mask=mask))
    return replace(schema, columns=tuple(masked))


def expand_pattern(
    conn: Connection, pattern: TablePattern, account: str = "the source user"
) -> list[TableId]:
    """The tables one ``source.tables`` entry names, sorted; ``ConfigError`` if it names none.

    ``information_schema`` only lists tables the connected user holds some privilege on, so
    "does not exist" may also mean "is invisible to this user": the message says both, and the
    fix names ``account`` (``'cdc'@'%'`` when the caller knows it) in the GRANT statement.
    """
    if not has_glob(pattern):
        table_id = TableId(pattern.database, pattern.table)
        present = list_tables(conn, pattern.database)
        found = [name for name in present if name == pattern.table]
        if not found:
            cased = [n for n in present if n.lower() == pattern.table.lower()]
            if cased:
                named = TableId(pattern.database, cased[0])
                raise ConfigError(
                    f"table {table_id} (source.tables) does not exist; {named} does (table "
                    "names are case-sensitive on this server)",
                    f'write "{named}" in source.tables',
                )
            raise ConfigError(
                f"table {table_id} (source.tables) does not exist, is a view, or the source "
                "user cannot see it",
                f"correct the name in source.tables, or if it exists: "
                f"GRANT SELECT ON {table_id.quoted()} TO {account};",
            )
        return [table_id]
    tables = list_tables(conn, pattern.database)
    if not tables:
        raise ConfigError(
            f"source.tables entry '{pattern}': database {pattern.database} has no tables (or "
            "does not exist, or the source user cannot see it)",
            "correct the database name in source.tables, or if it has tables: GRANT SELECT ON "
            f"{quote_ident(pattern.database)}.* TO {account};",
        )
    matched = [TableId(pattern.database, t) for t in tables if pattern.matches(pattern.database, t)]
    if not matched:
        raise ConfigError(
            f"source.tables entry '{pattern}' matches none of the {len(tables)} tables in "
            f"{pattern.database}",
            f"correct the pattern in source.tables (tables there: {', '.join(tables[:10])}"
            + (", ..." if len(tables) > 10 else "")
            + ")",
        )
    return matched
