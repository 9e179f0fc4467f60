"""The config's values of a shape of their own: table lists and patterns, server ids and
hosts, load limits, and the per-table rules (invalid dates, mirrors, left-out and masked
columns)."""

from __future__ import annotations

import re
from functools import partial

from cdc_console.config.model import (
    CHANGELOG_DIR,
    MirrorPlaces,
    TablePattern,
)
from cdc_console.config.reading import (
    _or_problem,
    _problem,
    _typed,
)
from cdc_console.core.invalid_dates import DATE_FAMILIES, InvalidDateRules, InvalidDates
from cdc_console.core.masks import MaskKind
from cdc_console.core.schema import TableId, parse_qualified
from cdc_console.core.untyped import TomlTable
from cdc_console.errors import ConfigError


def parse_table_pattern(text: str) -> TablePattern:
    """``db.table``, ``db.orders_*``, or with a part in backticks where it holds a dot, a
    backtick or a ``*`` that is part of the name: `` `customer3.0`.`orders*` ``."""
    name = parse_qualified(text)
    if name is None or ("*" in name.database and not name.database_quoted):
        raise ConfigError(
            f"source.tables entry {text!r} is not 'database.table'",
            'list tables as "db.table" or "db.*" (\'*\' only in the table part); write a name '
            "holding a dot, a backtick or a '*' in backticks, as SQL does: "
            '"`customer3.0`.orders"',
        )
    return TablePattern(name.database, name.table, literal=name.table_quoted)


def _max_load(value: TomlTable) -> tuple[tuple[str, float], ...]:
    """``max_load = { Threads_running = 50, replica_lag = 30 }``: names as the server spells
    them, each limit a number above 0."""
    limits: list[tuple[str, float]] = []
    for name, limit in value.items():
        where = f"source.max_load.{name}"
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
            _problem(
                ConfigError(
                    f"source.max_load names {name!r}, which is not a status variable's name",
                    "name a global status variable (SHOW GLOBAL STATUS), e.g. "
                    "max_load = { Threads_running = 50 }, or replica_lag",
                )
            )
            continue
        if isinstance(limit, bool) or not isinstance(limit, int | float):
            _problem(ConfigError(f"{where} must be a number, not {limit!r}", f"set {where} = 50"))
            continue
        if limit <= 0:
            _problem(ConfigError(f"{where} must be above 0 (got {limit:g})", f"set {where} = 50"))
            continue
        limits.append((name, float(limit)))
    return tuple(limits)


def _hosts(value: object, default_port: int) -> tuple[tuple[str, int], ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        _problem(
            ConfigError(
                'source.hosts must be a list of "host:port" strings',
                'write it as hosts = ["db1:3306", "db2:3306"] (the first is tried first)',
            )
        )
        return ()
    endpoints: list[tuple[str, int]] = []
    for entry in value:
        host, sep, port = entry.rpartition(":")
        if not sep:
            host, port = entry, str(default_port)
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            _problem(
                ConfigError(
                    f"source.hosts entry {entry!r} is not host:port",
                    'write it as "db1.example.com:3306"',
                )
            )
            continue
        endpoints.append((host, int(port)))
    return tuple(endpoints)


def _server_ids(value: object) -> tuple[int, int]:
    text = str(value)
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not match:
        _problem(
            ConfigError(
                f"source.server_id {text!r} is neither a number nor a range",
                'write server_id = "5400-5404" (one id per concurrent binlog reader)',
            )
        )
        return 5400, 5404
    low = int(match.group(1))
    high = int(match.group(2) or low)
    if low == 0 or high < low:
        _problem(
            ConfigError(
                f"source.server_id range {text!r} is empty or includes 0",
                "use a range of positive ids unique among the server's replicas, low-high",
            )
        )
        return 5400, 5404
    return low, high


def _invalid_date_rule(value: object, where: str) -> InvalidDates:
    choices = ", ".join(f'"{r}"' for r in InvalidDates)
    if isinstance(value, str) and value in set(InvalidDates):
        return InvalidDates(value)
    _problem(
        ConfigError(f"{where} must be one of {choices}, not {value!r}", f'write {where} = "null"')
    )
    return InvalidDates.NULL


def _invalid_dates(pipe: TomlTable) -> InvalidDateRules:
    """``invalid_dates = "sentinel"`` (every date type) or ``{ date = "sentinel", ... }``;
    ``invalid_dates_for = { "db.t" = "sentinel", "db.u" = { shipped = "sentinel" } }``."""
    default = _typed(pipe, "pipeline", "invalid_dates", (str, dict), "null")
    if isinstance(default, str):
        rule = _invalid_date_rule(default, "pipeline.invalid_dates")
        by_family = dict.fromkeys(DATE_FAMILIES.values(), rule)
    else:
        by_family = {}
        for name, value in default.items():
            if name not in DATE_FAMILIES:
                _problem(
                    ConfigError(
                        f"pipeline.invalid_dates has a rule for {name!r}, which is not one of "
                        f"{', '.join(DATE_FAMILIES)}",
                        'write invalid_dates = { date = "sentinel" }',
                    )
                )
                continue
            by_family[DATE_FAMILIES[name]] = _invalid_date_rule(
                value, f"pipeline.invalid_dates.{name}"
            )
    by_table: dict[str, dict[str, InvalidDates]] = {}
    for table_name, value in _typed(pipe, "pipeline", "invalid_dates_for", dict, {}).items():
        _or_problem(partial(parse_table_pattern, table_name), None)
        where = f'pipeline.invalid_dates_for."{table_name}"'
        if isinstance(value, dict):
            by_table[table_name] = {
                str(column): _invalid_date_rule(rule, f"{where}.{column}")
                for column, rule in value.items()
            }
        else:
            by_table[table_name] = {"*": _invalid_date_rule(value, where)}
    return InvalidDateRules(by_family, by_table)


def _mirrors(snk: TomlTable) -> MirrorPlaces:
    """``mirrors = { "shop.users" = "analytics/users", "user_*.user_table_*" = "crm/users" }``:
    a place and a name, each a folder; a table pattern routes every table it matches there."""
    found: dict[TableId, str] = {}
    routes: list[tuple[TablePattern, str]] = []
    taken: dict[str, str] = {}
    for table_name, value in _typed(snk, "sink", "mirrors", dict, {}).items():
        where = f'sink.mirrors."{table_name}"'
        example = f'write mirrors = {{ "{table_name}" = "analytics/users" }}'
        name = parse_qualified(table_name)
        if name is None:
            _problem(ConfigError(f"{where}: {table_name!r} is not a db.table name", example))
            continue
        pattern = TablePattern(
            name.database,
            name.table,
            literal=name.table_quoted,
            database_glob="*" in name.database and not name.database_quoted,
        )
        parts = value.split("/") if isinstance(value, str) else []
        if len(parts) != 2 or not all(p.strip() for p in parts) or parts[0] == CHANGELOG_DIR:
            _problem(
                ConfigError(
                    f'{where} must be a place and a name, as "analytics/users", not {value!r}'
                    + (
                        f" ({CHANGELOG_DIR} holds the change feed)"
                        if parts[:1] == [CHANGELOG_DIR]
                        else ""
                    ),
                    example,
                )
            )
            continue
        if value in taken:
            _problem(
                ConfigError(
                    f"{where} is {value!r}, the mirror of {taken[value]} too: a mirror holds "
                    "one table, or the tables of one pattern",
                    "give each table a mirror of its own, or route them with one pattern "
                    '("db_*.t_*")',
                )
            )
            continue
        taken[value] = table_name
        if pattern.is_pattern:
            routes.append((pattern, value))
        else:
            found[TableId(pattern.database, pattern.table)] = value
    return MirrorPlaces(found, tuple(routes))


def _exclude_columns(pipe: TomlTable) -> dict[str, tuple[str, ...]]:
    """``exclude_columns = { "shop.customers" = ["ssn", "birth_date"], "shop.*" = ["secret"] }``."""
    found: dict[str, tuple[str, ...]] = {}
    for table_name, value in _typed(pipe, "pipeline", "exclude_columns", dict, {}).items():
        _or_problem(partial(parse_table_pattern, table_name), None)
        where = f'pipeline.exclude_columns."{table_name}"'
        if not isinstance(value, list) or not all(isinstance(c, str) and c for c in value):
            _problem(
                ConfigError(
                    f"{where} must be a list of column names, not {value!r}",
                    f'write exclude_columns = {{ "{table_name}" = ["ssn"] }}',
                )
            )
            continue
        found[table_name] = tuple(value)
    return found


def _mask_columns(pipe: TomlTable) -> dict[str, dict[str, MaskKind]]:
    """``mask_columns = { "shop.customers" = { email = "sha256", phone = "redact" } }``."""
    choices = ", ".join(f'"{k}"' for k in MaskKind)
    found: dict[str, dict[str, MaskKind]] = {}
    for table_name, value in _typed(pipe, "pipeline", "mask_columns", dict, {}).items():
        _or_problem(partial(parse_table_pattern, table_name), None)
        where = f'pipeline.mask_columns."{table_name}"'
        if not isinstance(value, dict):
            _problem(
                ConfigError(
                    f"{where} must map column names to a mask, not {value!r}",
                    f'write mask_columns = {{ "{table_name}" = {{ email = "sha256" }} }}',
                )
            )
            continue
        masks: dict[str, MaskKind] = {}
        for column, kind in value.items():
            if not isinstance(kind, str) or kind not in set(MaskKind):
                _problem(
                    ConfigError(
                        f"{where}.{column} must be one of {choices}, not {kind!r}",
                        f'write {column} = "sha256" (a keyed hash) or "redact"',
                    )
                )
                continue
            masks[str(column)] = MaskKind(kind)
        found[table_name] = masks
    return found
