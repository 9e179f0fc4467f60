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
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TypeVar, overload

from cdc_console.core import thresholds
from cdc_console.core.batch_budget import BatchBudget
from cdc_console.core.invalid_dates import DATE_FAMILIES, InvalidDateRules, InvalidDates
from cdc_console.core.masks import MaskKind
from cdc_console.core.schema import TableId, parse_qualified, spell_database
from cdc_console.core.untyped import TomlTable
from cdc_console.errors import ConfigError, register_secret

_T = TypeVar("_T")
_U = TypeVar("_U")
_V = TypeVar("_V")
_D = TypeVar("_D")

STARTUP_MODES = ("initial", "latest-offset", "snapshot-only")
SINK_KINDS = ("delta", "changelog-json")
DATETIME_TYPES = ("timestamp_ntz", "timestamp")


@dataclass(frozen=True)
class TablePattern:
    """A ``source.tables`` entry: one table, or with ``*`` in an unquoted table part, the
    tables of one database whose names fit. ``*`` is the only special character: a table named
    ``special[1]?`` is matched by that text exactly."""

    database: str
    table: str
    #: the table part was quoted: a name, never a pattern
    literal: bool = False

    @property
    def is_pattern(self) -> bool:
        return not self.literal and "*" in self.table

    def matches(self, database: str, table: str) -> bool:
        if database != self.database:
            return False
        if not self.is_pattern:
            return table == self.table
        return (
            re.fullmatch(".*".join(map(re.escape, self.table.split("*"))), table, re.S) is not None
        )

    def __str__(self) -> str:
        if self.is_pattern:
            return f"{spell_database(self.database)}.{self.table}"
        return str(TableId(self.database, self.table))


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
    position: str = "auto"
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
    startup_mode: str = "initial"
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


@dataclass(frozen=True)
class SinkConfig:
    kind: str = "delta"
    path: Path = Path("lake")
    changelog: bool = True
    #: ``[sink] mirrors``: a table's mirror at ``<path>/<place>/<name>`` instead of its own
    #: ``<db>/<table>`` (``sinks.lake_layout``), by the table's ``db.table``
    mirrors: dict[TableId, str] = field(default_factory=dict)


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
        return self.datetime != "timestamp"

    #: how DATETIME is stored: "timestamp_ntz" (exact; reader 3 / writer 7) or "timestamp"
    #: (the wall clock as UTC, for readers that only open protocol 1)
    datetime: str = "timestamp_ntz"
    #: who writes a first snapshot's data files: "executors" (where each chunk is read; the
    #: driver commits only their add actions) or "driver" (rows travel through Spark to it).
    #: Executors need the lake path too: on a cluster, shared storage.
    snapshot_writes: str = "executors"


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
    schema_changes: str = "evolve"
    #: ``[pipeline] log_format``: "text" (for people) or "json" (one object per line, for a log
    #: pipeline); ``run --log-format`` overrides it
    log_format: str = "text"
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


LOG_FORMATS = ("text", "json")

_KNOWN = {
    "": {
        "name",
        "source",
        "snapshot",
        "sink",
        "state",
        "spark",
        "pipeline",
        "console",
        "lake",
        "verify",
        "metrics",
    },
    "source": {
        "host",
        "port",
        "user",
        "password_env",
        "tables",
        "server_id",
        "time_zone",
        "connect_timeout",
        "password",
        "hosts",
        "position",
        "max_load",
    },
    "snapshot": {
        "chunk_size",
        "parallelism",
        "chunk_key",
        "startup_mode",
        "distribution_factor_upper",
        "distribution_factor_lower",
        "chunks_per_batch",
        "batch_seconds_while_streaming",
    },
    "sink": {"kind", "path", "changelog", "mirrors"},
    "lake": {
        "target_file_size",
        "optimize_every",
        "vacuum_every",
        "vacuum_retention_hours",
        "log_retention_hours",
        "checkpoint_interval",
        "change_data_feed",
        "deletion_vectors",
        "datetime",
        "snapshot_writes",
    },
    "state": {"path"},
    "verify": {"every", "rows_per_second", "hide_values"},
    "metrics": {"listen"},
    "spark": {
        "master",
        "trigger_seconds",
        "checkpoint",
        "ui_port",
        "conf",
        "class_archive",
        "wake_on_data",
    },
    "pipeline": {
        "heartbeat_seconds",
        "source_outage_seconds",
        "schema_changes",
        "log_format",
        "binlog_readers",
        "binlog_part_bytes",
        "max_window_bytes",
        "invalid_dates",
        "invalid_dates_for",
        "exclude_columns",
        "mask_columns",
        "mask_key_env",
    },
    "console": {
        "refresh_seconds",
        "lag_warn_seconds",
        "lag_alert_seconds",
        "stale_warn_seconds",
        "stale_alert_seconds",
        "purge_warn_hours",
        "purge_alert_hours",
        "job_log",
    },
}


#: problems found so far while ``config_from_dict`` validates a whole document; None: raise
_PROBLEMS: ContextVar[list[ConfigError] | None] = ContextVar("config_problems", default=None)
#: keys the parser knows only to refuse them with their own message, never suggested
_REFUSED = {"password"}


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
        valid = sorted(_KNOWN[where] - _REFUSED)
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


def _positive(value: float, where: str, example: str) -> float:
    """``value`` when above zero; otherwise the problem is noted and ``example`` stands in."""
    if value > 0:
        return value
    _problem(ConfigError(f"{where} must be above 0 (got {value:g})", f"set {where} = {example}"))
    return float(example)


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


#: settings that take one of a few words: the words, and the hint when a value is none of them
_CHOICES: dict[str, tuple[tuple[str, ...], str]] = {
    "pipeline.log_format": (
        LOG_FORMATS,
        'set log_format = "text" (for people) or "json" (one object per line)',
    ),
    "pipeline.schema_changes": (
        ("evolve", "park", "stop"),
        'set schema_changes = "evolve" (changes that keep the mirror exact are applied; '
        "a table with any other waits for its re-dump)",
    ),
    "lake.snapshot_writes": (
        ("executors", "driver"),
        'set snapshot_writes = "executors" (each reader writes its chunks\' files; the lake '
        'path must be reachable from every executor) or "driver"',
    ),
    "source.position": (
        ("auto", "gtid", "file"),
        'set position = "auto" (follow a failover by GTID when the server logs GTIDs)',
    ),
}


def _one_of(value: str, key: str) -> str:
    """``value`` as given; a problem naming ``key``'s choices (``_CHOICES``) when it is none."""
    choices, hint = _CHOICES[key]
    if value not in choices:
        _problem(ConfigError(f"{key} {value!r} is not one of {', '.join(choices)}", hint))
    return value


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
        limits.append((name, _positive(float(limit), where, "50")))
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


def _port_or_none(port: int | None, where: str) -> int | None:
    if port is not None and not 0 < port < 65536:
        _problem(ConfigError(f"{where} {port} is out of range", "use a TCP port from 1 to 65535"))
    return port


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
    src = _section(doc, "source")
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
    port = _typed(src, "source", "port", int, 3306)
    if not 0 < port < 65536:
        _problem(
            ConfigError(f"source.port {port} is out of range", "use a TCP port from 1 to 65535")
        )
    low, high = _server_ids(src.get("server_id", "5400-5404"))
    pipe = _section(doc, "pipeline")
    outage = float(_typed(pipe, "pipeline", "source_outage_seconds", (int, float), 600.0))
    if outage < 0:
        _problem(
            ConfigError(
                f"pipeline.source_outage_seconds {outage:g} is negative",
                "set pipeline.source_outage_seconds = 600 (0 fails at the first transient error)",
            )
        )
    source = SourceConfig(
        host=_typed(src, "source", "host", str, "127.0.0.1"),
        port=port,
        user=_typed(src, "source", "user", str, "cdc"),
        password_env=_typed(src, "source", "password_env", str, "CDC_SOURCE_PASSWORD"),
        tables=tuple(p for p in patterns if p is not None),
        server_id_min=low,
        server_id_max=high,
        time_zone=_typed(src, "source", "time_zone", str, None),
        connect_timeout=_positive(
            float(_typed(src, "source", "connect_timeout", (int, float), 10.0)),
            "source.connect_timeout",
            "10",
        ),
        outage_seconds=outage,
        hosts=_hosts(src.get("hosts"), port),
        position=_one_of(_typed(src, "source", "position", str, "auto"), "source.position"),
        max_load=_max_load(_typed(src, "source", "max_load", dict, {})),
    )
    if source.time_zone is not None and not re.fullmatch(
        r"[+-]\d{2}:\d{2}|[A-Za-z_/]+|SYSTEM", source.time_zone
    ):
        _problem(
            ConfigError(
                f"source.time_zone {source.time_zone!r} is not a zone",
                'use an offset like "+02:00" or a name like "Europe/Berlin"',
            )
        )

    snap = _section(doc, "snapshot")
    chunk_size = _typed(snap, "snapshot", "chunk_size", int, 8096)
    if chunk_size < 1:
        _problem(ConfigError("snapshot.chunk_size must be at least 1", "set chunk_size = 8096"))
        chunk_size = 8096
    parallelism = _typed(snap, "snapshot", "parallelism", int, 2)
    if parallelism < 1:
        _problem(ConfigError("snapshot.parallelism must be at least 1", "set parallelism = 2"))
        parallelism = 2
    if parallelism + 1 > len(source.server_ids):
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
    mode = _typed(snap, "snapshot", "startup_mode", str, "initial")
    if mode not in STARTUP_MODES:
        _problem(
            ConfigError(
                f"snapshot.startup_mode {mode!r} is not one of {', '.join(STARTUP_MODES)}",
                'set startup_mode = "initial"',
            )
        )
        mode = "initial"
    chunks_per_batch = _typed(snap, "snapshot", "chunks_per_batch", int, None)
    if chunks_per_batch is not None and chunks_per_batch < 1:
        _problem(
            ConfigError(
                "snapshot.chunks_per_batch must be at least 1",
                "remove chunks_per_batch (about 512k rows per batch) or set it to e.g. 16",
            )
        )
    budget = float(_typed(snap, "snapshot", "batch_seconds_while_streaming", (int, float), 1.0))
    if budget < 0:
        _problem(
            ConfigError(
                f"snapshot.batch_seconds_while_streaming must not be negative (got {budget:g})",
                "set it to e.g. 1.0 (seconds of chunk work per batch while tables stream), or 0 "
                "for no cap",
            )
        )
    upper = _positive(
        float(_typed(snap, "snapshot", "distribution_factor_upper", (int, float), 1000.0)),
        "snapshot.distribution_factor_upper",
        "1000.0",
    )
    lower = _positive(
        float(_typed(snap, "snapshot", "distribution_factor_lower", (int, float), 0.05)),
        "snapshot.distribution_factor_lower",
        "0.05",
    )
    if lower > upper:
        _problem(
            ConfigError(
                f"snapshot.distribution_factor_lower ({lower:g}) is above "
                f"distribution_factor_upper ({upper:g})",
                "keys evenly spread have a factor near 1: set lower <= 1 <= upper, e.g. 0.05 "
                "and 1000.0",
            )
        )
    snapshot = SnapshotConfig(
        chunks_per_batch=chunks_per_batch,
        batch_seconds_while_streaming=budget,
        chunk_size=chunk_size,
        parallelism=parallelism,
        chunk_key=dict(chunk_key),
        startup_mode=mode,
        distribution_factor_upper=upper,
        distribution_factor_lower=lower,
    )

    snk = _section(doc, "sink")
    kind = _typed(snk, "sink", "kind", str, "delta")
    if kind not in SINK_KINDS:
        _problem(
            ConfigError(
                f"sink.kind {kind!r} is not one of {', '.join(SINK_KINDS)}", 'set kind = "delta"'
            )
        )
        kind = "delta"
    sink = SinkConfig(
        kind=kind,
        path=_resolve(base, _typed(snk, "sink", "path", str, "lake")),
        changelog=_typed(snk, "sink", "changelog", bool, True),
        mirrors=_mirrors(snk),
    )

    st = _section(doc, "state")
    state_path = _resolve(base, _typed(st, "state", "path", str, "state/pipeline.sqlite"))

    sp = _section(doc, "spark")
    conf = _typed(sp, "spark", "conf", dict, {})
    spark = SparkConfig(
        master=_typed(sp, "spark", "master", str, "local[2]"),
        trigger_seconds=_positive(
            float(_typed(sp, "spark", "trigger_seconds", (int, float), 1.0)),
            "spark.trigger_seconds",
            "1.0",
        ),
        checkpoint=_resolve(base, _typed(sp, "spark", "checkpoint", str, "checkpoints")),
        ui_port=_port_or_none(_typed(sp, "spark", "ui_port", int, None), "spark.ui_port"),
        conf={str(k): str(v) for k, v in conf.items()},
        class_archive=_typed(sp, "spark", "class_archive", bool, True),
        wake_on_data=_typed(sp, "spark", "wake_on_data", bool, False),
    )
    name = _typed(doc, "", "name", str, None) or (path.stem if path else "pipeline")
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
        heartbeat_seconds=_positive(
            float(_typed(pipe, "pipeline", "heartbeat_seconds", (int, float), 5.0)),
            "pipeline.heartbeat_seconds",
            "5",
        ),
        schema_changes=_one_of(
            _typed(pipe, "pipeline", "schema_changes", str, "evolve"), "pipeline.schema_changes"
        ),
        log_format=_one_of(
            _typed(pipe, "pipeline", "log_format", str, "text"), "pipeline.log_format"
        ),
        binlog_readers=_binlog_readers(pipe),
        binlog_part_bytes=_pipeline_size(pipe, "binlog_part_bytes", 1 << 10, "2MiB"),
        max_window_bytes=_pipeline_size(pipe, "max_window_bytes", 4 << 10, "16MiB"),
        invalid_dates=_invalid_dates(pipe),
        exclude_columns=_exclude_columns(pipe),
        mask_columns=_mask_columns(pipe),
        mask_key_env=_typed(pipe, "pipeline", "mask_key_env", str, "CDC_MASK_KEY"),
        console=_console(_section(doc, "console"), base),
        lake=_lake(_section(doc, "lake")),
        verify=verify,
        metrics=_metrics(_section(doc, "metrics")),
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


def _mirrors(snk: TomlTable) -> dict[TableId, str]:
    """``mirrors = { "shop.users" = "analytics/users" }``: a place and a name, each a folder."""
    found: dict[TableId, str] = {}
    taken: dict[str, str] = {}
    for table_name, value in _typed(snk, "sink", "mirrors", dict, {}).items():
        where = f'sink.mirrors."{table_name}"'
        example = f'write mirrors = {{ "{table_name}" = "analytics/users" }}'
        try:
            table_id = TableId.parse(table_name)
        except ValueError:
            _problem(ConfigError(f"{where}: {table_name!r} is not a db.table name", example))
            continue
        if "*" in table_name:
            _problem(
                ConfigError(
                    f"{where} names a pattern: a mirror holds one table",
                    "name each table (db.table) on a line of its own",
                )
            )
            continue
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
                    "one table",
                    "give each table a mirror of its own",
                )
            )
            continue
        taken[value] = table_name
        found[table_id] = value
    return found


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


def _binlog_readers(pipe: TomlTable) -> int:
    readers = _typed(pipe, "pipeline", "binlog_readers", int, PipelineConfig.binlog_readers)
    if readers < 1:
        _problem(
            ConfigError(
                "pipeline.binlog_readers must be at least 1",
                "set binlog_readers = 2 (1: one task reads every window whole)",
            )
        )
    return readers


def _pipeline_size(pipe: TomlTable, key: str, floor: int, example: str) -> int:
    """A ``[pipeline]`` size (``"4MiB"`` or bytes) of at least ``floor`` bytes."""
    default: int = getattr(PipelineConfig, key)
    size = parse_size(_typed(pipe, "pipeline", key, (int, str), default), f"pipeline.{key}")
    if size < floor:
        _problem(
            ConfigError(
                f"pipeline.{key} {size} bytes is below {floor >> 10}KiB",
                f'set {key} = "{example}"',
            )
        )
    return size


def _lake(section: TomlTable) -> LakeConfig:
    defaults = LakeConfig()
    size = parse_size(
        _typed(section, "lake", "target_file_size", (int, str), defaults.target_file_size),
        "lake.target_file_size",
    )
    if not 64 * 1024 <= size <= 1 << 30:
        _problem(
            ConfigError(
                f"lake.target_file_size {size} bytes is outside 64KiB..1GiB",
                'set target_file_size = "256KiB" (smaller: cheaper changes; larger: cheaper scans)',
            )
        )
    every = {}
    for key in ("optimize_every", "vacuum_every"):
        value = parse_duration(
            _typed(section, "lake", key, (int, float, str), getattr(defaults, key)), f"lake.{key}"
        )
        if value < 0:
            _problem(ConfigError(f"lake.{key} is negative", f'set lake.{key} = "10m" or "off"'))
        every[key] = value
    hours = {}
    for key in ("vacuum_retention_hours", "log_retention_hours"):
        value = float(_typed(section, "lake", key, (int, float), getattr(defaults, key)))
        if value < 0:
            _problem(
                ConfigError(
                    f"lake.{key} is negative", f"set lake.{key} = {getattr(defaults, key):g}"
                )
            )
        hours[key] = value
    interval = _typed(section, "lake", "checkpoint_interval", int, defaults.checkpoint_interval)
    if interval < 1:
        _problem(
            ConfigError(
                "lake.checkpoint_interval must be at least 1", "set lake.checkpoint_interval = 100"
            )
        )
    datetime = _typed(section, "lake", "datetime", str, defaults.datetime)
    if datetime not in DATETIME_TYPES:
        _problem(
            ConfigError(
                f"lake.datetime {datetime!r} is not one of {', '.join(DATETIME_TYPES)}",
                'set datetime = "timestamp_ntz" (exact) or "timestamp" (for older Delta readers)',
            )
        )
    writes = _one_of(
        _typed(section, "lake", "snapshot_writes", str, defaults.snapshot_writes),
        "lake.snapshot_writes",
    )
    return LakeConfig(
        datetime=datetime,
        snapshot_writes=writes,
        target_file_size=size,
        optimize_every=every["optimize_every"],
        vacuum_every=every["vacuum_every"],
        vacuum_retention_hours=hours["vacuum_retention_hours"],
        log_retention_hours=hours["log_retention_hours"],
        checkpoint_interval=interval,
        change_data_feed=_typed(section, "lake", "change_data_feed", bool, True),
        deletion_vectors=_typed(section, "lake", "deletion_vectors", bool, None),
    )


def _metrics(section: TomlTable) -> MetricsConfig:
    listen = str(_typed(section, "metrics", "listen", str, MetricsConfig().listen)).strip()
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
    defaults = VerifyConfig()
    every = parse_duration(
        _typed(section, "verify", "every", (int, float, str), defaults.every), "verify.every"
    )
    if every < 0:
        _problem(ConfigError("verify.every is negative", 'set verify.every = "6h" or "off"'))
    if 0 < every < 60:
        _problem(
            ConfigError(
                f"verify.every {every:g} s is shorter than a minute",
                'verify a whole pipeline at most every few minutes: set verify.every = "6h"',
            )
        )
    rate = _typed(section, "verify", "rows_per_second", int, defaults.rows_per_second)
    if rate < 0:
        _problem(
            ConfigError(
                "verify.rows_per_second is negative",
                "set verify.rows_per_second = 0 (no limit) or the rows a second it may read",
            )
        )
    hide = _typed(section, "verify", "hide_values", list, list(defaults.hide_values))
    if not all(isinstance(p, str) for p in hide):
        _problem(
            ConfigError(
                "verify.hide_values must be a list of strings",
                'write hide_values = ["*password*", "shop.customers.email"]',
            )
        )
    return VerifyConfig(every=every, rows_per_second=rate, hide_values=tuple(hide))


def _console(section: TomlTable, base: Path | None) -> ConsoleConfig:
    defaults = ConsoleConfig()

    def number(key: str, default: float) -> float:
        value = float(_typed(section, "console", key, (int, float), default))
        if value <= 0:
            _problem(
                ConfigError(f"console.{key} must be positive", f"set console.{key} = {default:g}")
            )
            return default
        return value

    refresh = number("refresh_seconds", defaults.refresh_seconds)
    if refresh > 0.5:
        _problem(
            ConfigError(
                f"console.refresh_seconds {refresh:g} is slower than twice a second",
                "set console.refresh_seconds to 0.5 or less (the console never blocks on a refresh)",
            )
        )
    pairs: dict[str, tuple[float, float]] = {}
    for name in ("lag", "stale"):
        warn = number(f"{name}_warn_seconds", getattr(defaults, f"{name}_warn_seconds"))
        alert = number(f"{name}_alert_seconds", getattr(defaults, f"{name}_alert_seconds"))
        if alert < warn:
            _problem(
                ConfigError(
                    f"console.{name}_alert_seconds ({alert:g}) is below {name}_warn_seconds ({warn:g})",
                    f"set console.{name}_alert_seconds at or above console.{name}_warn_seconds",
                )
            )
        pairs[name] = (warn, alert)
    purge_warn = number("purge_warn_hours", defaults.purge_warn_hours)
    purge_alert = number("purge_alert_hours", defaults.purge_alert_hours)
    if purge_alert > purge_warn:
        _problem(
            ConfigError(
                f"console.purge_alert_hours ({purge_alert:g}) is above purge_warn_hours "
                f"({purge_warn:g})",
                "the alert comes closer to the purge than the warning: set purge_alert_hours lower",
            )
        )
    job_log = _typed(section, "console", "job_log", str, None)
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
