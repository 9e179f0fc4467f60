"""The pipeline's config as the code holds it: one frozen dataclass per section, and the
table patterns and mirror places the sections name. Defaults are the option table's
(``core.options``); a test holds them equal."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from cdc_console.core import thresholds
from cdc_console.core.batch_budget import BatchBudget
from cdc_console.core.invalid_dates import InvalidDateRules
from cdc_console.core.masks import MaskKind
from cdc_console.core.options import (
    DatetimeType,
    LogFormat,
    SchemaChanges,
    SinkKind,
    SnapshotWrites,
    SourcePosition,
    StartupMode,
)
from cdc_console.core.schema import TableId, spell_database
from cdc_console.errors import ConfigError, register_secret


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
    #: plan a batch as soon as the binlog moves, instead of at the next trigger; the planner
    #: looks at the head every 50 ms while it moves, backing off to 0.4 s when idle
    #: (``spark.planner``), and ``trigger_seconds`` stays the longest wait
    wake_on_data: bool = True


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


#: the change feed's folder under the lake's root (a source database of this name is refused)
CHANGELOG_DIR = "_changelog"
