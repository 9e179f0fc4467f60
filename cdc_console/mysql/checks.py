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

import pymysql

from cdc_console.config import PipelineConfig, SourceConfig
from cdc_console.core.schema import TableId, TableSchema, quote_ident
from cdc_console.core.untyped import Connection
from cdc_console.errors import CdcError, ConfigError, SourceError, redact
from cdc_console.mysql.check_result import (
    ACCESS_DENIED_ERRORS,
    CheckResult,
    failed,
    my_cnf_line,
    passed,
)
from cdc_console.mysql.connection import connect, translate_error
from cdc_console.mysql.position import binary_logs, current_position
from cdc_console.mysql.probe import (
    ServerInfo,
    check_companions,
    chunk_key_for,
    probe_server,
    with_columns_left_out,
    with_invalid_dates,
    with_masks,
    with_route,
)
from cdc_console.mysql.schema import load_table_schema
from cdc_console.mysql.source_load import ACCESS_DENIED, REPLICA_LAG, read_load, replica_lag
from cdc_console.mysql.table_checks import checks_of_table, key_check, select_check

log = logging.getLogger(__name__)


COM_BINLOG_DUMP = 0x12
BINLOG_DUMP_NON_BLOCK = 0x01
_MIN_RETENTION_SECONDS = 86400.0


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
        return None, failed("connect", exc.message, exc.hint, area="config")
    except CdcError as exc:
        return None, failed("connect", exc.message, exc.hint)
    except pymysql.err.MySQLError as exc:
        error = translate_error(exc, source)
        return None, failed("connect", error.message, error.hint)
    return conn, passed("connect", f"connected as {where}")


def _server_check(server: ServerInfo) -> CheckResult:
    zone = server.variable("time_zone") or "?"
    if zone == "SYSTEM":
        zone = f"SYSTEM ({server.variable('system_time_zone') or '?'})"
    return passed("server", f"{server.label}; {server.gtid_summary}; time_zone {zone}")


def _log_bin_check(server: ServerInfo) -> CheckResult:
    value = (server.variable("log_bin") or "").upper()
    if value in ("ON", "1"):
        return passed("log_bin", "binary logging is on")
    return failed(
        "log_bin",
        f"binary logging is off (log_bin = {value or 'absent'}): there is no change stream to read",
        "log_bin cannot be switched on at runtime: add 'log_bin = binlog' and 'server_id = 1' "
        "under [mysqld] in my.cnf and restart the server",
    )


def _variable_check(server: ServerInfo, name: str, wanted: str, why: str) -> CheckResult:
    """``name`` must equal ``wanted``; its absence means a server too old for row-based CDC."""
    value = server.variable(name)
    if value is None:
        return failed(
            name,
            f"the server reports no {name} variable ({server.label}); {why}",
            "use MySQL 5.7+ or MariaDB 10.3+",
        )
    if value.upper() == wanted:
        return passed(name, f"{name} = {value}")
    return failed(
        name,
        f"{name} is {value}, must be {wanted}: {why}",
        f"SET GLOBAL {name} = '{wanted}'; (applies to new connections: reconnect the "
        f"applications) {my_cnf_line(f'{name} = {wanted}')}",
    )


def _row_metadata_check(server: ServerInfo) -> CheckResult:
    why = "without it binlog row events carry no column names"
    if server.variable("binlog_row_metadata") is None:
        return failed(
            "binlog_row_metadata",
            f"{server.label} predates binlog_row_metadata (MySQL 8.0.14, MariaDB 10.5): {why}, "
            "so columns map by position and a column added mid-stream goes unnoticed",
            "upgrade the server to MySQL 8.0.14+ or MariaDB 10.5+",
            severity="warning",
        )
    value = server.variable("binlog_row_metadata") or ""
    if value.upper() == "FULL":
        return passed("binlog_row_metadata", f"binlog_row_metadata = {value}")
    return failed(
        "binlog_row_metadata",
        f"binlog_row_metadata is {value}, must be FULL: {why}",
        "SET GLOBAL binlog_row_metadata = FULL; " + my_cnf_line("binlog_row_metadata = FULL"),
    )


def _server_id_check(server: ServerInfo, source: SourceConfig) -> CheckResult:
    text = server.variable("server_id")
    own = int(text) if text and text.isdigit() else None
    ids = source.server_ids
    if own == 0:
        return failed(
            "server_id",
            "the server's server_id is 0: it refuses binlog readers",
            "SET GLOBAL server_id = 1; " + my_cnf_line("server_id = 1"),
        )
    if own is not None and own in ids:
        return failed(
            "server_id",
            f"source.server_id range {ids.start}-{ids.stop - 1} includes the server's own "
            f"server_id {own}: every binlog reader needs an id unique in the replication topology",
            f'set source.server_id to a range that excludes {own}, e.g. "{own + 5400}-'
            f'{own + 5400 + len(ids) - 1}"',
            area="config",
        )
    return passed(
        "server_id",
        f"server_id {own if own is not None else '?'}; readers use {ids.start}-{ids.stop - 1}",
        area="config",
    )


def _retention_check(server: ServerInfo) -> CheckResult:
    seconds = server.binlog_retention_seconds
    if seconds is None:
        purge = "unknown" if server.binlog_purge_unknown else "never by age"
        return passed("binlog_retention", f"binlogs purged: {purge}")
    hours = seconds / 3600.0
    if seconds < _MIN_RETENTION_SECONDS:
        # Servers before MySQL 8.0 / MariaDB 10.6 only know the days form.
        setting = (
            "binlog_expire_logs_seconds = 604800"
            if server.variable("binlog_expire_logs_seconds") is not None
            else "expire_logs_days = 7"
        )
        return failed(
            "binlog_retention",
            f"binlogs are purged after {hours:.1f} h: a snapshot or an outage longer than that "
            "loses the position and forces a fresh snapshot",
            f"SET GLOBAL {setting}; " + my_cnf_line(setting),
            severity="warning",
        )
    return passed("binlog_retention", f"binlogs kept {hours:.0f} h")


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
        return failed(
            "max_load",
            f"source.max_load names {', '.join(missing)}, which the server does not report{why}",
            fix,
            area="config",
        )
    shown = ", ".join(f"{n} {values[n]:g} (limit {limit:g})" for n, limit in limits.items())
    return passed("max_load", f"chunk reads yield above the limits: now {shown}", area="config")


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
        return passed(name, "the reader sees the triggers of every captured schema", "privilege")
    # Not a warning: with least privilege it is always so, and it matters only once a writer
    # leaves ROW logging, which the job itself reports as it happens.
    return passed(
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
        return (False if code in ACCESS_DENIED_ERRORS else None), text
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
        return passed(name, "the server accepted a binlog dump request", area="privilege")
    if allowed is False:
        return failed(
            name,
            f"{account} lacks REPLICATION SLAVE, needed to read the binlog: the server refused a "
            f"binlog dump ({error})",
            fix,
            area="privilege",
        )
    granted = _global_privileges(conn)
    if granted & {"REPLICATION SLAVE", "ALL PRIVILEGES", "ALL"}:
        return passed(name, f"granted (SHOW GRANTS); a test dump failed: {error}", area="privilege")
    return failed(
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
        return failed(
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
        return failed(name, f"{exc.message} (as {account}); {why}", fix, area="privilege")
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args else None
        text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        if code in ACCESS_DENIED_ERRORS:
            return failed(name, f"{account} lacks {privilege}: {text}; {why}", fix, "privilege")
        return failed(name, f"cannot read the binlog position: {text}", "", "privilege")
    return passed(
        name,
        f"binlog position {position.file}:{position.pos}; {len(files)} binlog file(s) on the server",
        area="privilege",
    )


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
    pipeline's state holds: one of them gone from the source is a warning (``table_gone``),
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
        tables, table_results = checks_of_table(conn, config, account, known)
        results += table_results
        if tables:
            results.append(_trigger_check(conn, tables, account))
    except pymysql.err.MySQLError as exc:
        error = translate_error(exc, config.source)
        results.append(failed("source", error.message, error.hint))
        return None, [], results
    finally:
        conn.close()
    return server, tables, results


def format_failures(results: list[CheckResult]) -> str:
    lines = [
        f"  ✗ {r.name}: {r.detail}" + (f"\n      fix: {r.fix}" if r.fix else "") for r in results
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
    blocking = [r for r in results if r.blocking]
    if not blocking and server is not None:
        loaded = {t.table_id for t in tables}
        gone = [
            t
            for t in sorted(known)
            if t not in loaded and any(p.matches(t.database, t.table) for p in config.source.tables)
        ]
        return server, tables, gone
    kind: type[CdcError] = (
        ConfigError if blocking and all(r.area == "config" for r in blocking) else SourceError
    )
    if len(blocking) == 1:
        raise kind(blocking[0].detail, blocking[0].fix)
    raise kind(
        f"{len(blocking)} preflight checks failed:\n{format_failures(blocking)}",
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
    for result in (select_check(conn, table_id, account), key_check(schema, configured)):
        if result.blocking:
            raise SourceError(result.detail, result.fix or "")
    return schema
