"""Preflight: everything the pipeline needs from the source, verified before anything is written.

A pipeline that starts against a misconfigured server fails late and confusingly: a STATEMENT
binlog yields no row events, a MINIMAL row image loses the columns an update did not touch, a
missing ``binlog_row_metadata = FULL`` makes the decoder name columns ``UNKNOWN_COL0``. Each check
here tests one requirement and, when it fails, says the exact statement to run on the server or
the config key to change. ``run`` calls ``preflight`` before creating the state file or the lake.

Privileges are tested by doing what needs them, not by parsing ``SHOW GRANTS``: grants through a
role do not show up as privilege names, MariaDB 10.5 renamed REPLICATION CLIENT to BINLOG MONITOR
(and reading binlog events no longer needs REPLICATION SLAVE there), and ``ALL PRIVILEGES`` hides
everything. REPLICATION SLAVE is tested with a real non-blocking binlog dump request (the one
thing only that privilege allows, on both flavours); ``SHOW GRANTS`` is only a fallback when that
test is inconclusive. Checks only read: no table lock, no write, nothing on disk.
"""

from __future__ import annotations

import contextlib
import logging
import re
import struct
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, replace
from typing import Literal

import pymysql

from cdc_console.config import PipelineConfig, SourceConfig, parse_table_pattern
from cdc_console.core.schema import COUNT_COLUMN, TableId, TableSchema, quote_ident
from cdc_console.core.untyped import Connection
from cdc_console.core.values import JSONObject
from cdc_console.errors import CdcError, ConfigError, SourceError, redact
from cdc_console.mysql.connection import connect, translate_error
from cdc_console.mysql.key_weights import orderable
from cdc_console.mysql.position import binary_logs, current_position
from cdc_console.mysql.probe import (
    ServerInfo,
    check_companions,
    chunk_key_for,
    expand_pattern,
    probe_server,
    with_columns_left_out,
    with_invalid_dates,
    with_masks,
    with_route,
)
from cdc_console.mysql.schema import load_table_schema
from cdc_console.mysql.source_load import ACCESS_DENIED, REPLICA_LAG, read_load, replica_lag

log = logging.getLogger(__name__)

Severity = Literal["error", "warning"]
Area = Literal["server", "privilege", "config"]

COM_BINLOG_DUMP = 0x12
BINLOG_DUMP_NON_BLOCK = 0x01
#: Error codes meaning "not allowed" (1045 can come back when a proxy re-authenticates).
_ACCESS_DENIED = (1044, 1045, 1142, 1143, 1227)
_MIN_RETENTION_SECONDS = 86400.0


@dataclass(frozen=True)
class CheckResult:
    """One requirement, whether it holds, and (when not) what to run or change to meet it.

    ``severity`` "error" blocks the pipeline; "warning" is shown but does not. ``area`` tells a
    server-side problem (fix on the server) from a config mistake (fix the TOML file).
    """

    name: str
    ok: bool
    detail: str
    fix: str = ""
    severity: Severity = "error"
    area: Area = "server"

    @property
    def blocking(self) -> bool:
        return not self.ok and self.severity == "error"

    def to_dict(self) -> JSONObject:
        return asdict(self)


def _ok(name: str, detail: str, area: Area = "server") -> CheckResult:
    return CheckResult(name, True, detail, "", "error", area)


def _fail(
    name: str, detail: str, fix: str, area: Area = "server", severity: Severity = "error"
) -> CheckResult:
    return CheckResult(name, False, redact(detail), redact(fix), severity, area)


def _my_cnf(line: str) -> str:
    return f"and add '{line}' under [mysqld] in my.cnf so it survives a restart"


def _account(conn: Connection, source: SourceConfig) -> str:
    """The account the server matched (``'cdc'@'%'``), for GRANT statements that work verbatim."""
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            row = cur.fetchone()
        user, _, host = str(row[0]).rpartition("@")
        if user:
            return f"'{user}'@'{host}'"
    except pymysql.err.MySQLError:
        pass
    return f"'{source.user}'@'%'"


def _connect_check(config: PipelineConfig) -> tuple[Connection | None, CheckResult]:
    source = config.source
    where = f"{source.user}@{source.host}:{source.port}"
    try:
        conn = connect(source)
    except ConfigError as exc:
        return None, _fail("connect", exc.message, exc.hint, area="config")
    except CdcError as exc:
        return None, _fail("connect", exc.message, exc.hint)
    except pymysql.err.MySQLError as exc:
        error = translate_error(exc, source)
        return None, _fail("connect", error.message, error.hint)
    return conn, _ok("connect", f"connected as {where}")


def _server_check(server: ServerInfo) -> CheckResult:
    zone = server.variable("time_zone") or "?"
    if zone == "SYSTEM":
        zone = f"SYSTEM ({server.variable('system_time_zone') or '?'})"
    return _ok("server", f"{server.label}; {server.gtid_summary}; time_zone {zone}")


def _log_bin_check(server: ServerInfo) -> CheckResult:
    value = (server.variable("log_bin") or "").upper()
    if value in ("ON", "1"):
        return _ok("log_bin", "binary logging is on")
    return _fail(
        "log_bin",
        f"binary logging is off (log_bin = {value or 'absent'}): there is no change stream to read",
        "log_bin cannot be switched on at runtime: add 'log_bin = binlog' and 'server_id = 1' "
        "under [mysqld] in my.cnf and restart the server",
    )


def _variable_check(server: ServerInfo, name: str, wanted: str, why: str) -> CheckResult:
    """``name`` must equal ``wanted``; its absence means a server too old for row-based CDC."""
    value = server.variable(name)
    if value is None:
        return _fail(
            name,
            f"the server reports no {name} variable ({server.label}); {why}",
            "use MySQL 5.7+ or MariaDB 10.3+",
        )
    if value.upper() == wanted:
        return _ok(name, f"{name} = {value}")
    return _fail(
        name,
        f"{name} is {value}, must be {wanted}: {why}",
        f"SET GLOBAL {name} = '{wanted}'; (applies to new connections: reconnect the "
        f"applications) {_my_cnf(f'{name} = {wanted}')}",
    )


def _row_metadata_check(server: ServerInfo) -> CheckResult:
    why = "without it binlog row events carry no column names"
    if server.variable("binlog_row_metadata") is None:
        return _fail(
            "binlog_row_metadata",
            f"{server.label} predates binlog_row_metadata (MySQL 8.0.14, MariaDB 10.5): {why}, "
            "so columns map by position and a column added mid-stream goes unnoticed",
            "upgrade the server to MySQL 8.0.14+ or MariaDB 10.5+",
            severity="warning",
        )
    value = server.variable("binlog_row_metadata") or ""
    if value.upper() == "FULL":
        return _ok("binlog_row_metadata", f"binlog_row_metadata = {value}")
    return _fail(
        "binlog_row_metadata",
        f"binlog_row_metadata is {value}, must be FULL: {why}",
        "SET GLOBAL binlog_row_metadata = FULL; " + _my_cnf("binlog_row_metadata = FULL"),
    )


def _server_id_check(server: ServerInfo, source: SourceConfig) -> CheckResult:
    text = server.variable("server_id")
    own = int(text) if text and text.isdigit() else None
    ids = source.server_ids
    if own == 0:
        return _fail(
            "server_id",
            "the server's server_id is 0: it refuses binlog readers",
            "SET GLOBAL server_id = 1; " + _my_cnf("server_id = 1"),
        )
    if own is not None and own in ids:
        return _fail(
            "server_id",
            f"source.server_id range {ids.start}-{ids.stop - 1} includes the server's own "
            f"server_id {own}: every binlog reader needs an id unique in the replication topology",
            f'set source.server_id to a range that excludes {own}, e.g. "{own + 5400}-'
            f'{own + 5400 + len(ids) - 1}"',
            area="config",
        )
    return _ok(
        "server_id",
        f"server_id {own if own is not None else '?'}; readers use {ids.start}-{ids.stop - 1}",
        area="config",
    )


def _retention_check(server: ServerInfo) -> CheckResult:
    seconds = server.binlog_retention_seconds
    if seconds is None:
        purge = "unknown" if server.binlog_purge_unknown else "never by age"
        return _ok("binlog_retention", f"binlogs purged: {purge}")
    hours = seconds / 3600.0
    if seconds < _MIN_RETENTION_SECONDS:
        # Servers before MySQL 8.0 / MariaDB 10.6 only know the days form.
        setting = (
            "binlog_expire_logs_seconds = 604800"
            if server.variable("binlog_expire_logs_seconds") is not None
            else "expire_logs_days = 7"
        )
        return _fail(
            "binlog_retention",
            f"binlogs are purged after {hours:.1f} h: a snapshot or an outage longer than that "
            "loses the position and forces a fresh snapshot",
            f"SET GLOBAL {setting}; " + _my_cnf(setting),
            severity="warning",
        )
    return _ok("binlog_retention", f"binlogs kept {hours:.0f} h")


def _max_load_check(
    conn: Connection, source: SourceConfig, server: ServerInfo, account: str
) -> CheckResult:
    """Every figure ``source.max_load`` names is one the server reports: a misspelt name would
    otherwise never throttle anything."""
    limits = dict(source.max_load)
    values = read_load(conn, limits)
    missing = [name for name in limits if name not in values]
    if missing:
        why = ""
        fix = (
            "name global status variables the server lists (SHOW GLOBAL STATUS), e.g. "
            "Threads_running, and replica_lag only on a replica"
        )
        if any(n.lower() == REPLICA_LAG for n in missing):
            try:
                why = " (it replicates from no primary)" if replica_lag(conn) is None else ""
            except pymysql.err.OperationalError as exc:
                if exc.args[0] not in ACCESS_DENIED:
                    raise
                privilege = "SLAVE MONITOR" if server.flavour == "mariadb" else "REPLICATION CLIENT"
                why = f" (the source user may not read the replica's status: {exc.args[1]})"
                fix = f"GRANT {privilege} ON *.* TO {account}, or drop replica_lag"
        return _fail(
            "max_load",
            f"source.max_load names {', '.join(missing)}, which the server does not report{why}",
            fix,
            area="config",
        )
    shown = ", ".join(f"{n} {values[n]:g} (limit {limit:g})" for n, limit in limits.items())
    return _ok("max_load", f"chunk reads yield above the limits: now {shown}", area="config")


def _global_privileges(conn: Connection) -> set[str]:
    """Privilege names granted ``ON *.*`` to the current user, upper case (a fallback only)."""
    names: set[str] = set()
    with conn.cursor() as cur:
        cur.execute("SHOW GRANTS FOR CURRENT_USER()")
        for (line,) in cur.fetchall():
            match = re.match(r"GRANT (.+?) ON \*\.\* TO ", str(line))
            if match:
                names.update(p.strip().upper() for p in match.group(1).split(","))
    return names


def _trigger_schemas(conn: Connection) -> tuple[bool, set[str]]:
    """Where SHOW GRANTS gives the TRIGGER privilege: everywhere, and the schemas named."""
    everywhere, schemas = False, set()
    with conn.cursor() as cur:
        cur.execute("SHOW GRANTS FOR CURRENT_USER()")
        for (line,) in cur.fetchall():
            match = re.match(r"GRANT (.+?) ON (\S+) TO ", str(line))
            if not match:
                continue
            names = {p.strip().upper() for p in match.group(1).split(",")}
            if not names & {"TRIGGER", "ALL PRIVILEGES", "ALL"}:
                continue
            target = match.group(2)
            if target == "*.*":
                everywhere = True
            elif target.endswith(".*"):
                schemas.add(target[:-2].strip("`").replace("``", "`").replace("\\_", "_"))
    return everywhere, schemas


def _trigger_check(conn: Connection, tables: list[TableSchema], account: str) -> CheckResult:
    """Whether the reader can see the triggers of the captured schemas: a statement logged as
    SQL text whose trigger writes a captured table is noticed only through them."""
    name = "triggers visible"
    everywhere, granted = _trigger_schemas(conn)
    schemas = sorted({t.table_id.database for t in tables})
    unseen = [] if everywhere else [s for s in schemas if s not in granted]
    if not unseen:
        return _ok(name, "the reader sees the triggers of every captured schema", "privilege")
    # Not a warning: with least privilege it is always so, and it matters only once a writer
    # leaves ROW logging, which the job itself reports as it happens.
    return _ok(
        name,
        f"no: {account} cannot see the triggers of {', '.join(unseen)} "
        "(information_schema.TRIGGERS needs the TRIGGER privilege), so a DML logged as SQL "
        "text (a session whose binlog_format is STATEMENT or MIXED) that fires a trigger "
        "writing a captured table would go unnoticed; keep writers on ROW, or "
        + " ".join(f"GRANT TRIGGER ON {quote_ident(s)}.* TO {account};" for s in unseen)
        + " (TRIGGER also allows creating and dropping triggers)",
        "privilege",
    )


def try_binlog_dump(source: SourceConfig) -> tuple[bool | None, str]:
    """Ask the server for a binlog stream and read its first answer, then hang up.

    ``(True, "")``: the server started sending (REPLICATION SLAVE held); ``(False, error)``: it
    refused for lack of privilege; ``(None, error)``: it failed for another reason (binary logging
    off, a proxy that does not relay dumps), so the privilege is not known.

    The request is what ``mysqlbinlog`` sends without ``--stop-never``: server id 0 and the
    non-blocking flag, so the server never mistakes it for a replica and never disconnects a
    pipeline reader that uses a configured server id. An empty file name means "the oldest binlog";
    only its first packet (a rotate event) is read.
    """
    conn = connect(source, read_timeout=source.connect_timeout)
    try:
        with conn.cursor() as cur:
            # Announce checksum support, else a CRC32 binlog makes the server refuse the dump.
            cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
            cur.execute("SET @mariadb_slave_capability = 4")
        request = struct.pack("<IHI", 4, BINLOG_DUMP_NON_BLOCK, 0)
        conn._execute_command(COM_BINLOG_DUMP, request)
        conn._read_packet()
        return True, ""
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args else None
        text = redact(str(exc.args[1]) if len(exc.args) > 1 else str(exc))
        return (False if code in _ACCESS_DENIED else None), text
    finally:
        # A half-read dump may leave the socket unusable for COM_QUIT; it is closed either way.
        with contextlib.suppress(Exception):
            conn.close()


def _replication_slave_check(
    conn: Connection, source: SourceConfig, account: str, binlog_on: bool
) -> CheckResult:
    name = "privilege REPLICATION SLAVE"
    fix = f"GRANT REPLICATION SLAVE ON *.* TO {account};"
    allowed, error = try_binlog_dump(source)
    if allowed:
        return _ok(name, "the server accepted a binlog dump request", area="privilege")
    if allowed is False:
        return _fail(
            name,
            f"{account} lacks REPLICATION SLAVE, needed to read the binlog: the server refused a "
            f"binlog dump ({error})",
            fix,
            area="privilege",
        )
    granted = _global_privileges(conn)
    if granted & {"REPLICATION SLAVE", "ALL PRIVILEGES", "ALL"}:
        return _ok(name, f"granted (SHOW GRANTS); a test dump failed: {error}", area="privilege")
    return _fail(
        name,
        f"not verified: a test binlog dump failed ({error}) and SHOW GRANTS does not list "
        "REPLICATION SLAVE (it may come through a role)"
        + ("" if binlog_on else "; binary logging is off"),
        fix if binlog_on else "enable log_bin, then re-run the check",
        area="privilege",
        severity="warning",
    )


def _position_check(
    conn: Connection, server: ServerInfo, account: str, binlog_on: bool
) -> CheckResult:
    privilege = (
        "BINLOG MONITOR"
        if server.is_mariadb and server.version >= (10, 5, 2)
        else "REPLICATION CLIENT"
    )
    name = f"privilege {privilege}"
    if not binlog_on:
        return _fail(
            name,
            "not verified: binary logging is off",
            "enable log_bin, then re-run the check",
            area="privilege",
            severity="warning",
        )
    fix = f"GRANT {privilege} ON *.* TO {account};"
    why = "needed to read the binlog position (the snapshot watermarks) and the binlog file list"
    try:
        position = current_position(conn)
        files = binary_logs(conn)
    except SourceError as exc:
        return _fail(name, f"{exc.message} (as {account}); {why}", fix, area="privilege")
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args else None
        text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        if code in _ACCESS_DENIED:
            return _fail(name, f"{account} lacks {privilege}: {text}; {why}", fix, "privilege")
        return _fail(name, f"cannot read the binlog position: {text}", "", "privilege")
    return _ok(
        name,
        f"binlog position {position.file}:{position.pos}; {len(files)} binlog file(s) on the server",
        area="privilege",
    )


def _order_check(conn: Connection, schema: TableSchema) -> list[CheckResult]:
    """A warning when the chunk key cannot be ordered outside the server, so that the table is
    read as one chunk (``mysql.key_weights``); nothing when it can."""
    column = schema.column(schema.chunk_key)
    if orderable(conn, column):
        return []
    table_id = schema.table_id
    return [
        _fail(
            f"order {table_id}",
            f"{table_id}'s chunk key {column.name} is in collation {column.collation}, whose "
            "server weights disagree with its own comparisons: the snapshot reads the table as "
            "one chunk (correct, but one long read)",
            f"chunk on another unique column (snapshot.chunk_key), or ALTER TABLE "
            f"{table_id.quoted()} MODIFY {quote_ident(column.name)} ... COLLATE <another>",
            area="config",
            severity="warning",
        )
    ]


def _key_check(schema: TableSchema, configured: str | None) -> CheckResult:
    table_id = schema.table_id
    name = f"key {table_id}"
    setting = f'snapshot.chunk_key = {{ "{table_id}" = "<column>" }}'
    if configured is not None and configured.lower() not in {
        n.lower() for n in schema.column_names
    }:
        return _fail(
            name,
            f"snapshot.chunk_key names column {configured!r}, which {table_id} does not have "
            f"(columns: {', '.join(schema.column_names)})",
            f"correct the column name in snapshot.chunk_key for {table_id}",
            area="config",
        )
    if schema.primary_key:
        detail = f"primary key ({', '.join(schema.primary_key)}), chunks on {schema.chunk_key}"
        if configured is not None and schema.column(schema.chunk_key).nullable:
            return _fail(
                name,
                f"{detail}: chunk key column {schema.chunk_key} is nullable, and rows whose chunk key is "
                "NULL are all read with the first chunk",
                f"choose a NOT NULL column in snapshot.chunk_key for {table_id}, or remove the entry "
                "to chunk on the primary key",
                area="config",
                severity="warning",
            )
        return _ok(name, detail, area="config")
    if not schema.counted:
        how = "configured" if configured is not None else "its own UNIQUE index"
        return _ok(
            name, f"no primary key; rows told apart by {schema.chunk_key} ({how})", area="config"
        )
    column = schema.column(schema.chunk_key)
    detail = (
        f"no unique key: rows are told apart by their whole content, duplicates counted "
        f"({COUNT_COLUMN} in the mirror); chunks on {column.name}"
    )
    if column.nullable:
        return _fail(
            name,
            f"{detail}, which is nullable: rows where it is NULL are all read with the first chunk",
            f"if many rows have no {column.name}, set {setting} to a NOT NULL column",
            area="config",
            severity="warning",
        )
    return _ok(name, detail, area="config")


def _select_check(conn: Connection, table_id: TableId, account: str) -> CheckResult:
    name = f"select {table_id}"
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT 1 FROM {table_id.quoted()} LIMIT 0")
            cur.fetchall()
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args else None
        text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        fix = f"GRANT SELECT ON {table_id.quoted()} TO {account};" if code in _ACCESS_DENIED else ""
        return _fail(name, f"cannot read {table_id}: {text}", fix, area="privilege")
    return _ok(name, "readable", area="privilege")


def _unused_chunk_keys(config: PipelineConfig, tables: list[TableSchema]) -> list[CheckResult]:
    """A chunk_key entry that matches no captured table is most likely a typo: say so."""
    results = []
    for entry in config.snapshot.chunk_key:
        try:
            pattern = parse_table_pattern(entry)
        except ConfigError as exc:
            results.append(_fail(f"chunk_key {entry}", exc.message, exc.hint, area="config"))
            continue
        if any(pattern.matches(t.table_id.database, t.table_id.table) for t in tables):
            continue
        results.append(
            _fail(
                f"chunk_key {entry}",
                f"snapshot.chunk_key names {entry}, which matches none of the captured tables",
                "correct the table name in snapshot.chunk_key or remove the entry",
                area="config",
                severity="warning",
            )
        )
    return results


def _gone(table_id: TableId) -> CheckResult:
    """A table the pipeline captured that the source no longer has: a state, not a mistake."""
    return _fail(
        f"gone {table_id}",
        f"{table_id} was captured but is gone from the source (dropped or renamed); the job "
        "keeps it parked (NEEDS_REDUMP) with its mirror as it was, and captures the others",
        f"re-create it and run 'cdc-console redump --table {table_id}', or leave it out of "
        "source.tables",
        area="config",
        severity="warning",
    )


def _table_checks(
    conn: Connection, config: PipelineConfig, account: str, known: Collection[TableId] = ()
) -> tuple[list[TableSchema], list[CheckResult]]:
    results: list[CheckResult] = []
    tables: list[TableSchema] = []
    loaded: list[TableSchema] = []
    seen: set[TableId] = set()
    overrides = config.snapshot.chunk_key
    for pattern in config.source.tables:
        try:
            table_ids = expand_pattern(conn, pattern, account)
        except ConfigError as exc:
            matched = [t for t in sorted(known) if pattern.matches(t.database, t.table)]
            if matched:
                results += [_gone(t) for t in matched]
            else:
                results.append(_fail(f"table {pattern}", exc.message, exc.hint, area="config"))
            continue
        results += [
            _gone(t)
            for t in sorted(known)
            if pattern.matches(t.database, t.table) and t not in table_ids
        ]
        fresh = [t for t in table_ids if t not in seen]
        seen.update(fresh)
        names = ", ".join(t.table for t in table_ids[:8]) + (", ..." if len(table_ids) > 8 else "")
        results.append(
            _ok(f"table {pattern}", f"{len(table_ids)} table(s): {names}", area="config")
        )
        for table_id in fresh:
            configured = chunk_key_for(table_id, overrides)
            try:
                schema = with_invalid_dates(
                    load_table_schema(conn, table_id, configured), config.invalid_dates
                )
                try:
                    schema = with_columns_left_out(schema, config.exclude_columns)
                    schema = with_masks(schema, config.mask_columns, config.mask_key_env)
                    schema = check_companions(schema)
                    schema = with_route(schema, config.sink.mirrors)
                except ConfigError as exc:
                    # one table's rule that cannot hold (a masked column retyped while the job
                    # was down, a key missing) parks that table, never the others, and never
                    # lets its values out unshaped: the job reads nothing of it
                    results.append(
                        _fail(
                            f"table {table_id}",
                            f"{exc.message}; the job parks this table (NEEDS_REDUMP) and "
                            "captures the others",
                            exc.hint,
                            area="config",
                            severity="warning",
                        )
                    )
                    refused = replace(schema, refused=f"{exc.message} (fix: {exc.hint})")
                    loaded.append(refused)
                    tables.append(refused)  # registered, to be parked: not gone
                    continue
            except LookupError:
                results.append(
                    _fail(
                        f"table {table_id}",
                        f"{table_id} vanished or its columns are invisible to {account}",
                        f"GRANT SELECT ON {table_id.quoted()} TO {account};",
                        area="privilege",
                    )
                )
                continue
            loaded.append(schema)
            select = _select_check(conn, table_id, account)
            key = _key_check(schema, configured)
            results += [select, key]
            if not key.blocking and schema.chunk_key in schema.column_names:
                results += _order_check(conn, schema)
            if schema.uncaptured:
                results.append(
                    _fail(
                        f"types {table_id}",
                        f"{table_id}: {schema.uncaptured}; the job parks this table "
                        "(NEEDS_REDUMP) and captures the others",
                        f"change the column's type (ALTER TABLE {table_id.quoted()} MODIFY ...) "
                        f"and run 'cdc-console redump --table {table_id}', or leave the table "
                        "out of source.tables",
                        severity="warning",
                    )
                )
            if select.ok and not key.blocking:
                tables.append(schema)
    results += _unused_chunk_keys(config, loaded)
    tables, routes = _route_keys(config, tables)
    return tables, results + routes


def _route_keys(
    config: PipelineConfig, tables: list[TableSchema]
) -> tuple[list[TableSchema], list[CheckResult]]:
    """The tables one ``[sink] mirrors`` pattern routes into one mirror must tell their rows
    apart by the same key (columns of the same names and types): the mirror's files are
    searched by it. A table whose key differs from the first one's (by name) is parked."""
    first: dict[str, tuple[TableId, tuple[tuple[str, str], ...]]] = {}
    results: list[CheckResult] = []
    kept: list[TableSchema] = []
    for schema in sorted(tables, key=lambda t: t.table_id):
        if not schema.routed or schema.refused:
            kept.append(schema)
            continue
        place = config.sink.mirrors[schema.table_id]
        key = tuple(
            (n, schema.column(n).column_type.lower())
            for n in schema.key_columns
            if n not in schema.origin
        )
        reference = first.setdefault(place, (schema.table_id, key))
        if reference[1] == key:
            kept.append(schema)
            continue
        why = (
            f"{schema.table_id} is routed into {place} with the key "
            f"{', '.join(f'{n} {t}' for n, t in key)}, where {reference[0]} has "
            f"{', '.join(f'{n} {t}' for n, t in reference[1])}"
        )
        fix = "route only tables of one key there (a narrower pattern), or give it its own mirror"
        results.append(
            _fail(
                f"route {schema.table_id}",
                f"{why}; the job parks this table (NEEDS_REDUMP) and captures the others",
                fix,
                area="config",
                severity="warning",
            )
        )
        kept.append(replace(schema, refused=f"{why} (fix: {fix})"))
    order = {t.table_id: i for i, t in enumerate(tables)}
    return sorted(kept, key=lambda t: order[t.table_id]), results


def run_checks(
    config: PipelineConfig, known: Collection[TableId] = ()
) -> tuple[ServerInfo | None, list[TableSchema], list[CheckResult]]:
    """Run every check in order; never raises for a failed requirement, reports it instead.

    Order: connect, server, log_bin, binlog_format, binlog_row_image, binlog_row_metadata,
    server_id, binlog_retention, REPLICATION SLAVE, REPLICATION CLIENT / BINLOG MONITOR, the
    figures ``source.max_load`` names (when it names any), then per
    ``source.tables`` entry: it names tables, and per table: SELECT works, a key to chunk on.
    When the connection fails nothing else can be checked: ``(None, [], [that failure])``.
    The returned schemas are the tables that passed their checks. ``known`` are the tables the
    pipeline's state holds: one of them gone from the source is a warning (``_gone``),
    not a config mistake, so that one dropped table never keeps the others from starting.
    """
    conn, connected = _connect_check(config)
    if conn is None:
        return None, [], [connected]
    results = [connected]
    try:
        server = probe_server(conn)
        account = _account(conn, config.source)
        binlog_on = (server.variable("log_bin") or "").upper() in ("ON", "1")
        steps: list[Callable[[], CheckResult]] = [
            lambda: _server_check(server),
            lambda: _log_bin_check(server),
            lambda: _variable_check(
                server,
                "binlog_format",
                "ROW",
                "STATEMENT and MIXED binlogs carry SQL text, not the changed rows",
            ),
            lambda: _variable_check(
                server,
                "binlog_row_image",
                "FULL",
                "with a partial image an update event lacks the columns it did not change",
            ),
            lambda: _row_metadata_check(server),
            lambda: _server_id_check(server, config.source),
            lambda: _retention_check(server),
            lambda: _replication_slave_check(conn, config.source, account, binlog_on),
            lambda: _position_check(conn, server, account, binlog_on),
        ]
        if config.source.max_load:
            steps.append(lambda: _max_load_check(conn, config.source, server, account))
        results += [step() for step in steps]
        tables, table_results = _table_checks(conn, config, account, known)
        results += table_results
        if tables:
            results.append(_trigger_check(conn, tables, account))
    except pymysql.err.MySQLError as exc:
        error = translate_error(exc, config.source)
        results.append(_fail("source", error.message, error.hint))
        return None, [], results
    finally:
        conn.close()
    return server, tables, results


def format_failures(failed: list[CheckResult]) -> str:
    lines = [
        f"  ✗ {r.name}: {r.detail}" + (f"\n      fix: {r.fix}" if r.fix else "") for r in failed
    ]
    return "\n".join(lines)


def preflight(
    config: PipelineConfig, known: Collection[TableId] = ()
) -> tuple[ServerInfo, list[TableSchema], list[TableId]]:
    """Run the checks; raise listing every blocking failure, else return the server, the
    tables and the ``known`` tables gone from the source.

    Raises ``ConfigError`` when every blocking failure is a config mistake (the TOML file is the
    thing to edit), ``SourceError`` otherwise. Warnings are logged and do not block.
    """
    server, tables, results = run_checks(config, known)
    for result in results:
        if not result.ok and not result.blocking:
            log.warning("preflight: %s: %s (fix: %s)", result.name, result.detail, result.fix)
    failed = [r for r in results if r.blocking]
    if not failed and server is not None:
        loaded = {t.table_id for t in tables}
        gone = [
            t
            for t in sorted(known)
            if t not in loaded and any(p.matches(t.database, t.table) for p in config.source.tables)
        ]
        return server, tables, gone
    kind: type[CdcError] = (
        ConfigError if failed and all(r.area == "config" for r in failed) else SourceError
    )
    if len(failed) == 1:
        raise kind(failed[0].detail, failed[0].fix)
    raise kind(
        f"{len(failed)} preflight checks failed:\n{format_failures(failed)}",
        "fix each item above, then run 'cdc-console check --config <file>' again",
    )


def check_table(conn: Connection, config: PipelineConfig, table_id: TableId) -> TableSchema:
    """The schema of one table to start capturing (``add-table``), or the reason it cannot be.

    Runs the same per-table checks as preflight (it exists, SELECT works, it has a key to chunk
    on) and raises ``SourceError`` with the statement or setting that fixes the first failure.
    """
    account = _account(conn, config.source)
    configured = chunk_key_for(table_id, config.snapshot.chunk_key)
    try:
        schema = with_invalid_dates(
            load_table_schema(conn, table_id, configured), config.invalid_dates
        )
        schema = with_columns_left_out(schema, config.exclude_columns)
        schema = with_masks(schema, config.mask_columns, config.mask_key_env)
        schema = check_companions(schema)
        schema = with_route(schema, config.sink.mirrors)
    except ConfigError as exc:
        raise SourceError(exc.message, exc.hint) from None
    except LookupError:
        raise SourceError(
            f"{table_id} does not exist on the source server, or {account} cannot see it",
            f"check the name; if it exists: GRANT SELECT ON {table_id.quoted()} TO {account};",
        ) from None
    for result in (_select_check(conn, table_id, account), _key_check(schema, configured)):
        if result.blocking:
            raise SourceError(result.detail, result.fix or "")
    return schema
