"""The pipeline's TOML config: the user-facing contract.

Relative paths resolve against the config file's folder so a config works from any working
directory. Every error names the offending key and the fix. The source password is never part of
the config: ``password_env`` names the environment variable that holds it, and the value is read
only when a connection is opened.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TypeVar, cast, overload

from cdc_console.core import thresholds
from cdc_console.core.batch_budget import BatchBudget
from cdc_console.core.invalid_dates import DATE_FAMILIES, InvalidDateRules, InvalidDates
from cdc_console.core.masks import MaskKind
from cdc_console.core.options import (
    HIDDEN_VALUES,
    REFUSED,
    SECTIONS,
    DatetimeType,
    Kind,
    LogFormat,
    Option,
    SchemaChanges,
    SinkKind,
    SnapshotWrites,
    SourcePosition,
    StartupMode,
    keys,
    option,
)
from cdc_console.core.schema import TableId, parse_qualified, spell_database
from cdc_console.core.untyped import TomlTable
from cdc_console.errors import ConfigError, register_secret

_T = TypeVar("_T")
_U = TypeVar("_U")
_V = TypeVar("_V")
_D = TypeVar("_D")


@dataclass(frozen=True)
class TablePattern:
    """A ``source.tables`` entry: one table, or with ``*`` in an unquoted table part, the
    tables of one database whose names fit. ``*`` is the only special character: a table named
    ``special[1]?`` is matched by that text exactly."""

    database: str
    table: str
    #: the table part was quoted: a name, never a pattern
    literal: bool = False
    #: the database part is a pattern too (``[sink] mirrors`` routes: ``user_*.user_table_*``)
    database_glob: bool = False

    @property
    def is_pattern(self) -> bool:
        return self.database_glob or (not self.literal and "*" in self.table)

    def matches(self, database: str, table: str) -> bool:
        if not (
            _glob(self.database, database) if self.database_glob else database == self.database
        ):
            return False
        if self.literal or "*" not in self.table:
            return table == self.table
        return _glob(self.table, table)

    def __str__(self) -> str:
        if self.database_glob:
            return f"{self.database}.{self.table}"
        if self.is_pattern:
            return f"{spell_database(self.database)}.{self.table}"
        return str(TableId(self.database, self.table))


def _glob(pattern: str, name: str) -> bool:
    """``name`` fits ``pattern``, where ``*`` stands for any text and nothing else is special."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), name, re.S) is not None


@dataclass(frozen=True)
class SourceConfig:
    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "cdc"
    password_env: str = "CDC_SOURCE_PASSWORD"
    tables: tuple[TablePattern, ...] = ()
    server_id_min: int = 5400
    server_id_max: int = 5404
    time_zone: str | None = None
    connect_timeout: float = 10.0
    #: how long a transient fault is waited out (``[pipeline] source_outage_seconds``); it
    #: travels with the source so executors' readers wait exactly as long as the planner
    outage_seconds: float = 600.0
    #: ``source.hosts``: servers tried in order (a primary and its replicas); empty: host:port
    hosts: tuple[tuple[str, int], ...] = ()
    #: ``source.position``: follow a failover by GTID ("auto", "gtid") or never ("file")
    position: SourcePosition = SourcePosition.AUTO
    #: ``source.max_load``: chunk reads yield while a figure is above its limit
    #: (``source.throttle``): a global status variable's name or ``replica_lag`` -> the limit
    max_load: tuple[tuple[str, float], ...] = ()

    def password(self) -> str:
        """The password, from the environment; registered so it is scrubbed from all output."""
        value = os.environ.get(self.password_env)
        if value is None:
            raise ConfigError(
                f"environment variable {self.password_env} (source.password_env) is not set",
                f"export {self.password_env}=... before running, or set source.password_env to the "
                "variable that holds the password",
            )
        register_secret(value)
        return value

    def connection_kwargs(self) -> dict[str, str | int | float]:
        """pymysql keyword arguments, without the password (added at connect time)."""
        return {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "connect_timeout": self.connect_timeout,
        }

    def endpoints(self) -> tuple[tuple[str, int], ...]:
        """The servers to try, in order."""
        return self.hosts or ((self.host, self.port),)

    def pinned(self, host: str, port: int) -> SourceConfig:
        """This source on one server only: what executors get, so they read the server the
        planner planned against, never another one of the list."""
        return replace(self, host=host, port=port, hosts=())

    @property
    def server_ids(self) -> range:
        return range(self.server_id_min, self.server_id_max + 1)


#: rows a micro-batch's chunks add up to when ``chunks_per_batch`` is not set
BATCH_TARGET_ROWS = 512 * 1024
MAX_AUTO_CHUNKS_PER_BATCH = 64


@dataclass(frozen=True)
class SnapshotConfig:
    chunk_size: int = 8096
    parallelism: int = 2
    chunk_key: dict[str, str] = field(default_factory=dict)
    startup_mode: StartupMode = StartupMode.INITIAL
    distribution_factor_upper: float = 1000.0
    distribution_factor_lower: float = 0.05
    #: chunks per micro-batch; None: enough for ~512k rows (``splits_per_batch``)
    chunks_per_batch: int | None = None
    #: chunk work a batch may add while other tables stream (``core.batch_budget``); 0: no cap
    batch_seconds_while_streaming: float = 1.0

    @property
    def splits_per_batch(self) -> int:
        """Chunks per micro-batch: ``chunks_per_batch``, or enough for ~512k rows.

        Every micro-batch costs a fixed second or so (planning, Spark's scheduling, a Delta
        commit per table) while the readers wait, so small batches made a snapshot mostly
        overhead. The batch is held by the driver while it is applied: lower
        ``chunks_per_batch`` for wide rows.
        """
        if self.chunks_per_batch is not None:
            return self.chunks_per_batch
        by_rows = BATCH_TARGET_ROWS // max(1, self.chunk_size)
        return max(2 * self.parallelism, min(MAX_AUTO_CHUNKS_PER_BATCH, by_rows))

    @property
    def batch_budget(self) -> BatchBudget:
        """How many chunks a batch may carry while other tables stream: at least one, at most
        ``splits_per_batch`` (the job plans by it, and forecasts go by it)."""
        return BatchBudget(
            self.batch_seconds_while_streaming, floor=1, ceiling=self.splits_per_batch
        )


@dataclass(frozen=True, eq=False)
class MirrorPlaces(Mapping[TableId, str]):
    """``[sink] mirrors``: where a table's mirror is, as ``place/name`` under the lake's root,
    by the table's ``db.table`` (``named``), or by a table pattern (``routes``): every table a
    pattern matches is routed into its one mirror (their rows name their table, which joins
    the mirror's key: ``TableSchema.routed``). A table named on its own wins over a pattern.
    Iterating gives the named tables only (the routed ones are known once listed)."""

    named: Mapping[TableId, str] = field(default_factory=dict)
    routes: tuple[tuple[TablePattern, str], ...] = ()

    def __getitem__(self, table_id: TableId) -> str:
        named = self.named.get(table_id)
        if named is not None:
            return named
        for pattern, place in self.routes:
            if pattern.matches(table_id.database, table_id.table):
                return place
        raise KeyError(table_id)

    def __iter__(self) -> Iterator[TableId]:
        return iter(self.named)

    def __len__(self) -> int:
        return len(self.named)

    def __bool__(self) -> bool:
        return bool(self.named or self.routes)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MirrorPlaces):
            return dict(self.named) == dict(other.named) and self.routes == other.routes
        if isinstance(other, Mapping):
            return not self.routes and dict(self.named) == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def routed(self, table_id: TableId) -> bool:
        """Whether ``table_id`` shares a mirror by a route (not named on its own)."""
        return table_id not in self.named and table_id in self


@dataclass(frozen=True)
class SinkConfig:
    kind: SinkKind = SinkKind.DELTA
    path: Path = Path("lake")
    changelog: bool = True
    #: ``[sink] mirrors``: a table's mirror at ``<path>/<place>/<name>`` instead of its own
    #: ``<db>/<table>`` (``sinks.lake_layout``), by the table's ``db.table`` or a pattern
    mirrors: MirrorPlaces = field(default_factory=MirrorPlaces)


@dataclass(frozen=True)
class LakeConfig:
    """How the Delta mirrors are laid out and kept (Delta sink only).

    A MERGE rewrites every data file that holds a changed key, so ``target_file_size`` bounds
    the rows copied per changed row: small files make a change cheap, large files make a scan
    cheap. Maintenance (compaction of small files, vacuum of files no version within the
    retention references) runs in the job between batches every ``optimize_every`` /
    ``vacuum_every`` seconds (0: never) and on demand with ``cdc-console lake``.
    """

    #: ~7k rows of a typical row: a snapshot chunk; measured at 1M rows, 50 random changes a
    #: batch: 6.2k rows copied per changed row (1 MiB files: 14k; one file: 20k)
    target_file_size: int = 256 << 10
    optimize_every: float = 600.0
    vacuum_every: float = 600.0
    #: Not Delta's week: a CDC mirror rewrites files every batch, and disk holds about
    #: live data + rewrite rate x retention (a batch a second rewrote ~1 MB/s on the demo)
    vacuum_retention_hours: float = 1.0
    #: a version whose files are vacuumed cannot be read anyway, and a MERGE's log entry is
    #: ~25 KB (file stats): a day of a commit a second is ~2 GB of log for one table
    log_retention_hours: float = 1.0
    checkpoint_interval: int = 100
    change_data_feed: bool = True
    #: new mirrors are merge-on-read (``sinks.delta_dv``): a batch marks the old versions of
    #: its changed rows in deletion vectors and appends the new ones, instead of rewriting
    #: every file it touches (reader 3 / writer 7 with the ``deletionVectors`` feature). Off
    #: by default where ``datetime = "timestamp"`` asks for mirrors protocol-1 readers open
    #: (None: that default; ``merge_on_read`` says what it comes to).
    deletion_vectors: bool | None = None

    @property
    def merge_on_read(self) -> bool:
        if self.deletion_vectors is not None:
            return self.deletion_vectors
        return self.datetime != DatetimeType.TIMESTAMP

    #: how DATETIME is stored: "timestamp_ntz" (exact; reader 3 / writer 7) or "timestamp"
    #: (the wall clock as UTC, for readers that only open protocol 1)
    datetime: DatetimeType = DatetimeType.TIMESTAMP_NTZ
    #: who writes a first snapshot's data files: "executors" (where each chunk is read; the
    #: driver commits only their add actions) or "driver" (rows travel through Spark to it).
    #: Executors need the lake path too: on a cluster, shared storage.
    snapshot_writes: SnapshotWrites = SnapshotWrites.EXECUTORS


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[2]"
    trigger_seconds: float = 1.0
    checkpoint: Path = Path("checkpoints")
    ui_port: int | None = None
    conf: dict[str, str] = field(default_factory=dict)
    #: map a class-data-sharing archive of Spark's classes into the driver JVM (built once per
    #: machine and Spark/JDK; see ``spark/class_archive.py``): a session starts in half the time
    class_archive: bool = True
    #: plan a batch as soon as the binlog moves, instead of at the next trigger; an idle
    #: pipeline still looks no more often than ``trigger_seconds`` (``spark.planner``)
    wake_on_data: bool = False


@dataclass(frozen=True)
class ConsoleConfig:
    """What the operations console colours and how often it looks: read by the console only.

    Lag is how far the committed position trails the server (event time); staleness is the age
    of the job's heartbeat and of the console's own last successful look. Above ``warn`` a number
    turns yellow, above ``alert`` red; a job that is alive but made no progress for
    ``stale_alert_seconds`` while lag grew shows as stalled.
    """

    refresh_seconds: float = 0.5
    lag_warn_seconds: float = thresholds.LAG.warn
    lag_alert_seconds: float = thresholds.LAG.alert
    stale_warn_seconds: float = thresholds.STALE.warn
    stale_alert_seconds: float = thresholds.STALE.alert
    purge_warn_hours: float = thresholds.PURGE.warn / 3600
    purge_alert_hours: float = thresholds.PURGE.alert / 3600
    job_log: Path | None = None


@dataclass(frozen=True)
class VerifyConfig:
    """How mirrors are verified against their source (``cdc-console verify``).

    ``every`` schedules a verification of every streaming table (0: only on demand);
    ``rows_per_second`` caps how fast the source is read (0: as fast as it goes), so a
    verification never competes with the stream for the server; ``hide_values`` are
    ``db.table.column`` patterns whose values a report never shows (it names the column only).
    """

    every: float = 0.0
    rows_per_second: int = 0
    hide_values: tuple[str, ...] = ("*password*", "*secret*", "*token*", "*.ssn", "*card*")


@dataclass(frozen=True)
class MetricsConfig:
    """Where the job serves Prometheus metrics, ``/healthz`` and ``/readyz``.

    On by default, on loopback only; ``listen = ""`` turns it off, ``"0.0.0.0:9464"`` exposes
    it (for a Prometheus on another host or a Kubernetes probe), port 0 takes any free port (the
    run's address is in ``status --json``).
    """

    listen: str = "127.0.0.1:9464"

    @property
    def address(self) -> tuple[str, int] | None:
        if not self.listen:
            return None
        host, _, port = self.listen.rpartition(":")
        return host or "0.0.0.0", int(port)


@dataclass(frozen=True)
class PipelineConfig:
    name: str
    path: Path | None
    source: SourceConfig
    snapshot: SnapshotConfig
    sink: SinkConfig
    state_path: Path
    spark: SparkConfig
    heartbeat_seconds: float = 5.0
    #: ``[pipeline] schema_changes``: "evolve" (apply a change that keeps the mirror exact,
    #: park the table otherwise), "park" the table whose shape changed (the others go on), or
    #: "stop" the whole job, as before
    schema_changes: SchemaChanges = SchemaChanges.EVOLVE
    #: ``[pipeline] log_format``: "text" (for people) or "json" (one object per line, for a log
    #: pipeline); ``run --log-format`` overrides it
    log_format: LogFormat = LogFormat.TEXT
    #: ``[pipeline] binlog_readers``: tasks that read one binlog window in parts, when it holds
    #: at least ``binlog_part_bytes`` per part (a catch-up); each needs a server id of its own
    binlog_readers: int = 2
    binlog_part_bytes: int = 2 << 20
    #: ``[pipeline] max_window_bytes``: a batch's binlog window ends at the first transaction
    #: starting this far past its start (``mysql.window_end``); a catch-up takes several batches
    #: instead of one held whole in the driver's memory
    max_window_bytes: int = 16 << 20
    #: ``[pipeline] invalid_dates`` and ``invalid_dates_for``: what a zero or invalid date
    #: becomes in the mirror, per date type and per table or column (``core.invalid_dates``)
    invalid_dates: InvalidDateRules = field(default_factory=InvalidDateRules)
    #: ``[pipeline] exclude_columns``: per table or pattern, columns never read nor mirrored
    exclude_columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: ``[pipeline] mask_columns``: per table or pattern, column -> mask (``core.masks``)
    mask_columns: dict[str, dict[str, MaskKind]] = field(default_factory=dict)
    #: ``[pipeline] mask_key_env``: the environment variable holding the ``sha256`` masks' key
    mask_key_env: str = "CDC_MASK_KEY"
    console: ConsoleConfig = field(default_factory=ConsoleConfig)
    lake: LakeConfig = field(default_factory=LakeConfig)
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)


#: the keys each section takes ("": the top of the file), from the option table
_KNOWN: dict[str, frozenset[str]] = {name: keys(name) for name in ("", *SECTIONS)}


#: problems found so far while ``config_from_dict`` validates a whole document; None: raise
_PROBLEMS: ContextVar[list[ConfigError] | None] = ContextVar("config_problems", default=None)


def _problem(error: ConfigError) -> None:
    """Note ``error`` and go on when a whole config is being validated, so every problem is
    reported at once; raise it otherwise."""
    found = _PROBLEMS.get()
    if found is None:
        raise error
    found.append(error)


def _or_problem(parse: Callable[[], _T], fallback: _T) -> _T:
    """``parse()``, or ``fallback`` once its ``ConfigError`` is noted (see ``_problem``): the
    rest of the document is still checked, though the config will be refused."""
    try:
        return parse()
    except ConfigError as exc:
        _problem(exc)
        return fallback


def _unknown_key(where: str, key: str) -> ConfigError:
    """The error for a key nobody reads, with the nearest valid one when there is one."""
    if where:
        valid = sorted(_KNOWN[where] - REFUSED.get(where, frozenset()))
        what, listed = f"unknown key {where}.{key}", f"valid in [{where}]: {', '.join(valid)}"
    else:
        valid = [f"[{name}]" for name in sorted(_KNOWN[""] - {"name"})]
        what, listed = f"unknown section or key {key!r}", f"valid sections: {' '.join(valid)}"
        key = f"[{key}]"
    near = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    return ConfigError(what, f"did you mean {near[0]}? ({listed})" if near else listed)


def _check_keys(doc: TomlTable) -> None:
    """Every unknown key of every section, before anything is parsed."""
    for key in sorted(set(doc) - _KNOWN[""]):
        _problem(_unknown_key("", key))
    for name in sorted(_KNOWN[""]):
        value = doc.get(name, {})
        if name != "name" and isinstance(value, dict):
            for key in sorted(set(value) - _KNOWN[name]):
                _problem(_unknown_key(name, key))


def _section(doc: TomlTable, name: str) -> TomlTable:
    """A section's known keys (unknown ones are reported by ``_check_keys``)."""
    value = doc.get(name, {})
    if not isinstance(value, dict):
        _problem(ConfigError(f"[{name}] must be a table", f"write it as a [{name}] section"))
        return {}
    if _PROBLEMS.get() is None:
        for key in sorted(set(value) - _KNOWN[name]):
            raise _unknown_key(name, key)
    return {k: v for k, v in value.items() if k in _KNOWN[name]}


@overload
def _typed(section: TomlTable, where: str, key: str, kind: type[_T], default: _D) -> _T | _D: ...
@overload
def _typed(
    section: TomlTable, where: str, key: str, kind: tuple[type[_T], type[_U]], default: _D
) -> _T | _U | _D: ...
@overload
def _typed(
    section: TomlTable,
    where: str,
    key: str,
    kind: tuple[type[_T], type[_U], type[_V]],
    default: _D,
) -> _T | _U | _V | _D: ...
def _typed(
    section: TomlTable, where: str, key: str, kind: type | tuple[type, ...], default: object
) -> object:
    """``section[key]`` when it is of ``kind``; otherwise the problem is noted and ``default``
    stands in."""
    return _read_typed(section, where, key, kind, default)


def _read_typed(
    section: TomlTable, where: str, key: str, kind: type | tuple[type, ...], default: object
) -> object:
    if key not in section:
        return default
    value = section[key]
    name = f"{where}.{key}" if where else key
    if isinstance(value, bool) and kind is not bool:
        _problem(
            ConfigError(
                f"{name} must be {_kind_name(kind)}, not a boolean",
                f"set {name} to {_kind_name(kind)}",
            )
        )
        return default
    if not isinstance(value, kind):
        _problem(
            ConfigError(
                f"{name} must be {_kind_name(kind)}, got {type(value).__name__}",
                f"set {name} to {_kind_name(kind)}",
            )
        )
        return default
    return value


_TOML_KINDS: dict[Kind, type | tuple[type, ...]] = {
    Kind.STRING: str,
    Kind.PATH: str,
    Kind.INTEGER: int,
    Kind.PORT: int,
    Kind.NUMBER: (int, float),
    Kind.BOOL: bool,
    Kind.SIZE: (int, str),
    Kind.DURATION: (int, float, str),
    Kind.CHOICE: str,
}


def _get(section: TomlTable, section_name: str, key: str, kind: type[_T]) -> _T:
    """``[section_name] key`` read as its option (``core.options``) declares it: of its kind,
    in its range, one of its choices; sizes in bytes and durations in seconds. Its default
    where the key is absent, and, once the problem is noted, where its value is refused.
    ``kind`` is what the caller holds it as (an option without a default: ``_maybe``)."""
    return cast(_T, _option_value(section, option(section_name, key)))


def _maybe(section: TomlTable, section_name: str, key: str, kind: type[_T]) -> _T | None:
    """``_get`` of an option whose default is None (unset)."""
    return cast("_T | None", _option_value(section, option(section_name, key)))


def _option_value(section: TomlTable, opt: Option) -> object:
    fallback = _plain(opt, opt.default)
    raw = _read_typed(section, opt.section, opt.key, _TOML_KINDS[opt.kind], None)
    if raw is None:
        return fallback
    value = _plain(opt, raw)
    if opt.kind is Kind.CHOICE:
        return _choice(opt, str(value), fallback)
    if opt.kind is Kind.PORT and isinstance(value, int) and not 0 < value < 65536:
        _problem(
            ConfigError(f"{opt.where} {value} is out of range", "use a TCP port from 1 to 65535")
        )
        return fallback
    if isinstance(value, int | float) and not _in_range(opt, value):
        return fallback
    return value


def _plain(opt: Option, value: object) -> object:
    """A TOML value of ``opt`` as the config holds it (None stays None)."""
    if opt.kind is Kind.NUMBER and isinstance(value, int | float):
        return float(value)
    if opt.kind is Kind.SIZE and isinstance(value, int | str):
        return parse_size(value, opt.where)
    if opt.kind is Kind.DURATION and isinstance(value, int | float | str):
        return parse_duration(value, opt.where)
    return value


def _choice(opt: Option, value: str, fallback: object) -> object:
    assert opt.choices is not None
    try:
        return opt.choices(value)
    except ValueError:
        words = ", ".join(opt.choices)
        _problem(
            ConfigError(
                f"{opt.where} {value!r} is not one of {words}",
                f"set {opt.key} = {opt.suggestion()} ({opt.doc})"
                if opt.doc
                else f"set {opt.key} = {opt.suggestion()}",
            )
        )
        return fallback


def _in_range(opt: Option, value: float) -> bool:
    """Whether ``value`` is in ``opt``'s range; the problem noted when it is not."""
    fix = f"set {opt.where} = {opt.suggestion()}"
    shown = f"{value} bytes" if opt.kind is Kind.SIZE else f"{value:g}"
    if opt.above is not None and not value > opt.above:
        _problem(ConfigError(f"{opt.where} must be above {opt.above:g} (got {value:g})", fix))
        return False
    if opt.at_least is not None and value < opt.at_least:
        if opt.at_least == 0:
            _problem(ConfigError(f"{opt.where} {shown} is negative", fix))
        elif opt.kind is Kind.SIZE:
            _problem(ConfigError(f"{opt.where} {shown} is below {_bytes(opt.at_least)}", fix))
        else:
            _problem(ConfigError(f"{opt.where} must be at least {opt.at_least:g}", fix))
        return False
    return True


def _bytes(size: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size / scale:g}{unit}"
    return f"{size:g} bytes"


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {
        int: "an integer",
        str: "a string",
        float: "a number",
        bool: "true or false",
        list: "a list",
        dict: "a table",
    }
    if isinstance(kind, tuple):
        return " or ".join(names.get(k, k.__name__) for k in kind)
    return names.get(kind, kind.__name__)


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


def _resolve(base: Path | None, value: str) -> Path:
    path = Path(value).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    return path


def load_config(path: str | Path) -> PipelineConfig:
    """Read and validate a config file; raise ``ConfigError`` naming the key and the fix."""
    config_path = Path(path)
    try:
        raw = config_path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"config file {config_path} does not exist",
            "pass --config with the path of a TOML file (see README, 'Config')",
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read config file {config_path}: {exc.strerror}",
            "check the path and its permissions",
        ) from None
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"config file {config_path} is not valid TOML: {exc}",
            "fix the syntax at the line named above",
        ) from None
    return config_from_dict(doc, base=config_path.resolve().parent, path=config_path.resolve())


def config_from_dict(
    doc: TomlTable, base: Path | None = None, path: Path | None = None
) -> PipelineConfig:
    """Validate a whole config document: every problem found is reported in one
    ``ConfigError`` (one problem: that problem's own error)."""
    problems: list[ConfigError] = []
    token = _PROBLEMS.set(problems)
    config: PipelineConfig | None = None
    try:
        _check_keys(doc)
        config = _config_from_dict(doc, base, path)
    except ConfigError as exc:
        problems.append(exc)  # one that the checks after it would depend on
    finally:
        _PROBLEMS.reset(token)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        lines = [f"{len(problems)} problems in the config:"]
        for n, problem in enumerate(problems, start=1):
            lines.append(f"  {n}. {problem.message}")
            if problem.hint:
                lines.append(f"     fix: {problem.hint}")
        raise ConfigError("\n".join(lines))
    assert config is not None
    return config


def _config_from_dict(doc: TomlTable, base: Path | None, path: Path | None) -> PipelineConfig:
    pipe = _section(doc, "pipeline")
    source = _source(_section(doc, "source"), pipe)
    snapshot = _snapshot(_section(doc, "snapshot"), source)
    snk = _section(doc, "sink")
    sink = SinkConfig(
        kind=_get(snk, "sink", "kind", SinkKind),
        path=_resolve(base, _get(snk, "sink", "path", str)),
        changelog=_get(snk, "sink", "changelog", bool),
        mirrors=_mirrors(snk),
    )
    if sink.mirrors.routes and sink.kind != SinkKind.DELTA:
        _problem(
            ConfigError(
                "sink.mirrors routes tables into one mirror by a pattern, which only the delta "
                "sink does",
                'set sink.kind = "delta", or name each table\'s mirror on a line of its own',
            )
        )
    state_path = _resolve(base, _get(_section(doc, "state"), "state", "path", str))
    sp = _section(doc, "spark")
    conf = _typed(sp, "spark", "conf", dict, {})
    spark = SparkConfig(
        master=_get(sp, "spark", "master", str),
        trigger_seconds=_get(sp, "spark", "trigger_seconds", float),
        checkpoint=_resolve(base, _get(sp, "spark", "checkpoint", str)),
        ui_port=_maybe(sp, "spark", "ui_port", int),
        conf={str(k): str(v) for k, v in conf.items()},
        class_archive=_get(sp, "spark", "class_archive", bool),
        wake_on_data=_get(sp, "spark", "wake_on_data", bool),
    )
    name = _maybe(doc, "", "name", str) or (path.stem if path else "pipeline")
    verify = _verify(_section(doc, "verify"))
    if verify.every and len(source.server_ids) < snapshot.parallelism + 2:
        low = source.server_id_min
        _problem(
            ConfigError(
                "verify.every schedules verifications, which read the binlog with a server id of "
                f"their own, and source.server_id's {len(source.server_ids)} ids are all the job's",
                f'widen it by one: server_id = "{low}-{low + snapshot.parallelism + 1}"',
            )
        )
    return PipelineConfig(
        name=name,
        path=path,
        source=source,
        snapshot=snapshot,
        sink=sink,
        state_path=state_path,
        spark=spark,
        heartbeat_seconds=_get(pipe, "pipeline", "heartbeat_seconds", float),
        schema_changes=_get(pipe, "pipeline", "schema_changes", SchemaChanges),
        log_format=_get(pipe, "pipeline", "log_format", LogFormat),
        binlog_readers=_get(pipe, "pipeline", "binlog_readers", int),
        binlog_part_bytes=_get(pipe, "pipeline", "binlog_part_bytes", int),
        max_window_bytes=_get(pipe, "pipeline", "max_window_bytes", int),
        invalid_dates=_invalid_dates(pipe),
        exclude_columns=_exclude_columns(pipe),
        mask_columns=_mask_columns(pipe),
        mask_key_env=_get(pipe, "pipeline", "mask_key_env", str),
        console=_console(_section(doc, "console"), base),
        lake=_lake(_section(doc, "lake")),
        verify=verify,
        metrics=_metrics(_section(doc, "metrics")),
    )


def _source(src: TomlTable, pipe: TomlTable) -> SourceConfig:
    if "password" in src:
        _problem(
            ConfigError(
                "source.password is not accepted: passwords never live in config files",
                "remove it and set source.password_env to the name of an environment "
                "variable holding the password",
            )
        )
    tables = _typed(src, "source", "tables", list, None)
    if not tables and (tables is not None or "tables" not in src):  # else: a type problem
        _problem(
            ConfigError(
                "source.tables is missing or empty",
                'list the tables to capture, e.g. tables = ["shop.orders", "shop.*"]',
            )
        )
    tables = tables or []
    for entry in tables:
        if not isinstance(entry, str):
            _problem(
                ConfigError(
                    f"source.tables entry {entry!r} must be a string", 'write entries as "db.table"'
                )
            )
    patterns = [
        _or_problem(partial(parse_table_pattern, t), None) for t in tables if isinstance(t, str)
    ]
    port = _get(src, "source", "port", int)
    low, high = _server_ids(src.get("server_id", option("source", "server_id").default))
    time_zone = _maybe(src, "source", "time_zone", str)
    if time_zone is not None and not re.fullmatch(r"[+-]\d{2}:\d{2}|[A-Za-z_/]+|SYSTEM", time_zone):
        _problem(
            ConfigError(
                f"source.time_zone {time_zone!r} is not a zone",
                'use an offset like "+02:00" or a name like "Europe/Berlin"',
            )
        )
    return SourceConfig(
        host=_get(src, "source", "host", str),
        port=port,
        user=_get(src, "source", "user", str),
        password_env=_get(src, "source", "password_env", str),
        tables=tuple(p for p in patterns if p is not None),
        server_id_min=low,
        server_id_max=high,
        time_zone=time_zone,
        connect_timeout=_get(src, "source", "connect_timeout", float),
        outage_seconds=_get(pipe, "pipeline", "source_outage_seconds", float),
        hosts=_hosts(src.get("hosts"), port),
        position=_get(src, "source", "position", SourcePosition),
        max_load=_max_load(_typed(src, "source", "max_load", dict, {})),
    )


def _snapshot(snap: TomlTable, source: SourceConfig) -> SnapshotConfig:
    parallelism = _get(snap, "snapshot", "parallelism", int)
    if parallelism + 1 > len(source.server_ids):
        low = source.server_id_min
        _problem(
            ConfigError(
                f"source.server_id range has {len(source.server_ids)} ids but snapshot.parallelism = "
                f"{parallelism} needs {parallelism + 1} (one per chunk reader plus the binlog reader)",
                f'widen server_id to "{low}-{low + parallelism}" or lower parallelism',
            )
        )
    chunk_key = _typed(snap, "snapshot", "chunk_key", dict, {})
    for table_name, column in chunk_key.items():
        _or_problem(partial(parse_table_pattern, table_name), None)
        if not isinstance(column, str):
            _problem(
                ConfigError(
                    f"snapshot.chunk_key for {table_name} must be a column name",
                    f'write chunk_key = {{ "{table_name}" = "id" }}',
                )
            )
    upper = _get(snap, "snapshot", "distribution_factor_upper", float)
    lower = _get(snap, "snapshot", "distribution_factor_lower", float)
    if lower > upper:
        _problem(
            ConfigError(
                f"snapshot.distribution_factor_lower ({lower:g}) is above "
                f"distribution_factor_upper ({upper:g})",
                "keys evenly spread have a factor near 1: set lower <= 1 <= upper, e.g. 0.05 "
                "and 1000.0",
            )
        )
    return SnapshotConfig(
        chunks_per_batch=_maybe(snap, "snapshot", "chunks_per_batch", int),
        batch_seconds_while_streaming=_get(
            snap, "snapshot", "batch_seconds_while_streaming", float
        ),
        chunk_size=_get(snap, "snapshot", "chunk_size", int),
        parallelism=parallelism,
        chunk_key=dict(chunk_key),
        startup_mode=_get(snap, "snapshot", "startup_mode", StartupMode),
        distribution_factor_upper=upper,
        distribution_factor_lower=lower,
    )


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


#: the change feed's folder under the lake's root (a source database of this name is refused)
CHANGELOG_DIR = "_changelog"


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


_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "kib": 1 << 10, "mb": 1000**2, "mib": 1 << 20}
_SIZE_UNITS |= {"gb": 1000**3, "gib": 1 << 30}
_DURATION_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_size(text: str | int, where: str) -> int:
    """Bytes from ``1048576``, ``"1MiB"``, ``"8 MB"``; a ``ConfigError`` naming ``where``
    otherwise (noted, not raised, while a whole document is checked)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _SIZE_UNITS:
        _problem(
            ConfigError(
                f"{where} {text!r} is not a size",
                f'write {where.split(".")[-1]} = "256KiB" or bytes',
            )
        )
        return 256 * 1024  # stands in while the rest of the document is checked
    return int(float(match.group(1)) * _SIZE_UNITS[unit])


def parse_duration(text: str | int | float, where: str) -> float:
    """Seconds from ``600``, ``"10m"``, ``"6h"``, ``"1d"``, ``"off"`` (0: never)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    if str(text).strip().lower() in ("off", "never"):
        return 0.0
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", str(text))
    if match is None:
        _problem(
            ConfigError(
                f"{where} {text!r} is not a duration",
                f'write {where.split(".")[-1]} = "10m" (s, m, h, d), a number of seconds, or "off"',
            )
        )
        return 0.0  # stands in while the rest of the document is checked
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


#: the data files a mirror is given (a MERGE rewrites whole files)
TARGET_FILE_SIZES = range(64 << 10, (1 << 30) + 1)


def _lake(section: TomlTable) -> LakeConfig:
    size = _get(section, "lake", "target_file_size", int)
    if size not in TARGET_FILE_SIZES:
        _problem(
            ConfigError(
                f"lake.target_file_size {size} bytes is outside 64KiB..1GiB",
                'set target_file_size = "256KiB" (smaller: cheaper changes; larger: cheaper scans)',
            )
        )
    return LakeConfig(
        datetime=_get(section, "lake", "datetime", DatetimeType),
        snapshot_writes=_get(section, "lake", "snapshot_writes", SnapshotWrites),
        target_file_size=size,
        optimize_every=_get(section, "lake", "optimize_every", float),
        vacuum_every=_get(section, "lake", "vacuum_every", float),
        vacuum_retention_hours=_get(section, "lake", "vacuum_retention_hours", float),
        log_retention_hours=_get(section, "lake", "log_retention_hours", float),
        checkpoint_interval=_get(section, "lake", "checkpoint_interval", int),
        change_data_feed=_get(section, "lake", "change_data_feed", bool),
        deletion_vectors=_maybe(section, "lake", "deletion_vectors", bool),
    )


def _metrics(section: TomlTable) -> MetricsConfig:
    default = option("metrics", "listen").default
    listen = str(_typed(section, "metrics", "listen", str, default)).strip()
    if listen:
        _host, colon, port = listen.rpartition(":")
        if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
            _problem(
                ConfigError(
                    f"metrics.listen {listen!r} is not host:port",
                    'write listen = "127.0.0.1:9464" (or "" to serve no metrics)',
                )
            )
    return MetricsConfig(listen=listen)


def _verify(section: TomlTable) -> VerifyConfig:
    every = _get(section, "verify", "every", float)
    if 0 < every < 60:
        _problem(
            ConfigError(
                f"verify.every {every:g} s is shorter than a minute",
                'verify a whole pipeline at most every few minutes: set verify.every = "6h"',
            )
        )
    hide = _typed(section, "verify", "hide_values", list, HIDDEN_VALUES)
    if not all(isinstance(p, str) for p in hide):
        _problem(
            ConfigError(
                "verify.hide_values must be a list of strings",
                'write hide_values = ["*password*", "shop.customers.email"]',
            )
        )
    return VerifyConfig(
        every=every,
        rows_per_second=_get(section, "verify", "rows_per_second", int),
        hide_values=tuple(hide),
    )


def _console(section: TomlTable, base: Path | None) -> ConsoleConfig:
    def number(key: str) -> float:
        return _get(section, "console", key, float)

    refresh = number("refresh_seconds")
    if refresh > 0.5:
        _problem(
            ConfigError(
                f"console.refresh_seconds {refresh:g} is slower than twice a second",
                "set console.refresh_seconds to 0.5 or less (the console never blocks on a refresh)",
            )
        )
    pairs: dict[str, tuple[float, float]] = {}
    for name in ("lag", "stale"):
        warn, alert = number(f"{name}_warn_seconds"), number(f"{name}_alert_seconds")
        if alert < warn:
            _problem(
                ConfigError(
                    f"console.{name}_alert_seconds ({alert:g}) is below {name}_warn_seconds ({warn:g})",
                    f"set console.{name}_alert_seconds at or above console.{name}_warn_seconds",
                )
            )
        pairs[name] = (warn, alert)
    purge_warn, purge_alert = number("purge_warn_hours"), number("purge_alert_hours")
    if purge_alert > purge_warn:
        _problem(
            ConfigError(
                f"console.purge_alert_hours ({purge_alert:g}) is above purge_warn_hours "
                f"({purge_warn:g})",
                "the alert comes closer to the purge than the warning: set purge_alert_hours lower",
            )
        )
    job_log = _maybe(section, "console", "job_log", str)
    return ConsoleConfig(
        refresh_seconds=refresh,
        lag_warn_seconds=pairs["lag"][0],
        lag_alert_seconds=pairs["lag"][1],
        stale_warn_seconds=pairs["stale"][0],
        stale_alert_seconds=pairs["stale"][1],
        purge_warn_hours=purge_warn,
        purge_alert_hours=purge_alert,
        job_log=_resolve(base, job_log) if job_log is not None else None,
    )
