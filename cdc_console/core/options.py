"""Every key of the pipeline's TOML config, declared once, as Flink CDC's ``MySqlSourceOptions``.

Each ``Option`` says what its key holds (``Kind``), its default as a user would write it, the
range or the choices it takes and one line of what it does. From this table ``config`` knows
which keys exist (a misspelt one is named with the nearest valid one), reads and checks every
plain value the same way, and ``reference`` writes the README's config reference, which a test
keeps equal to it; another test holds each config dataclass's default to the table's.

Keys whose value has a shape of its own (a list of tables, a range of server ids, a table of
per-table rules) are declared here too, as ``Kind.RULES``, with their parser in ``config``.

The words a choice takes are ``StrEnum``s, so code compares members, never bare strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from cdc_console.core import thresholds


class Kind(StrEnum):
    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"  # an integer or a float, kept as a float
    BOOL = "bool"
    PATH = "path"  # a string; relative paths resolve against the config file's folder
    SIZE = "size"  # bytes, or "256KiB"
    DURATION = "duration"  # seconds, or "10m", "6h", "off"
    PORT = "port"  # a TCP port, 1..65535
    CHOICE = "choice"  # one word of ``Option.choices``
    RULES = "rules"  # a value of its own shape, parsed by ``config``


class StartupMode(StrEnum):
    INITIAL = "initial"
    LATEST_OFFSET = "latest-offset"
    SNAPSHOT_ONLY = "snapshot-only"


class SinkKind(StrEnum):
    DELTA = "delta"
    CHANGELOG_JSON = "changelog-json"


class SourcePosition(StrEnum):
    AUTO = "auto"
    GTID = "gtid"
    FILE = "file"


class SchemaChanges(StrEnum):
    EVOLVE = "evolve"
    PARK = "park"
    STOP = "stop"


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


class DatetimeType(StrEnum):
    TIMESTAMP_NTZ = "timestamp_ntz"
    TIMESTAMP = "timestamp"


class SnapshotWrites(StrEnum):
    EXECUTORS = "executors"
    DRIVER = "driver"


#: a default as the config file would hold it
TomlDefault = str | int | float | bool | list[str] | None


@dataclass(frozen=True)
class Option:
    """One config key: ``[section] key = default``."""

    section: str  # "" for a key at the top of the file
    key: str
    kind: Kind
    default: TomlDefault
    #: what it does, one line: the comment beside it in the README's reference
    doc: str = ""
    #: the lowest value taken (inclusive), and the bound a value must be above
    at_least: float | None = None
    above: float | None = None
    choices: type[StrEnum] | None = None
    #: the reference shows this instead of the default (an example), or, ``commented``, as a
    #: commented-out line; ``listed = False`` leaves the key out of it (``docs/`` has it)
    shown: str | None = None
    commented: bool = False
    listed: bool = True
    #: the hint's suggestion where a value is refused, when not the default
    fix: str | None = None

    @property
    def where(self) -> str:
        return f"{self.section}.{self.key}" if self.section else self.key

    def suggestion(self) -> str:
        """A value to write instead of a refused one, as TOML text."""
        return self.fix if self.fix is not None else toml_text(self.default)


def toml_text(value: TomlDefault) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_text(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    return str(value)


HIDDEN_VALUES = ["*password*", "*secret*", "*token*", "*.ssn", "*card*"]

#: every key, section by section, in the reference's order
OPTIONS: tuple[Option, ...] = (
    Option("", "name", Kind.STRING, None, "optional; defaults to the file name", shown='"shop"'),
    # [source]
    Option("source", "host", Kind.STRING, "127.0.0.1"),
    Option("source", "port", Kind.PORT, 3306),
    Option("source", "user", Kind.STRING, "cdc"),
    Option("source", "password_env", Kind.STRING, "CDC_SOURCE_PASSWORD", "the password itself is never written anywhere"),
    Option("source", "tables", Kind.RULES, None, "database.table; '*' in the table part is the only pattern (see below)", shown='["shop.orders", "shop.*"]'),
    Option("source", "server_id", Kind.RULES, "5400-5404", "a range: one id per concurrent binlog reader (needs parallelism+1 ids)"),
    Option("source", "time_zone", Kind.STRING, None, "optional; TIMESTAMPs are read in UTC on both paths regardless", shown='"+00:00"'),
    Option("source", "connect_timeout", Kind.NUMBER, 10, above=0),
    Option("source", "hosts", Kind.RULES, None, "optional: a primary and its replicas, tried in order", shown='["db1:3306", "db2:3306"]', commented=True),
    Option("source", "position", Kind.CHOICE, "auto", "auto | gtid | file: follow a failover by GTID, or never", choices=SourcePosition),
    Option("source", "max_load", Kind.RULES, None, "chunk reads yield while a status figure (or replica_lag) is above its limit", shown="{ Threads_running = 50 }", commented=True),
    # [snapshot]
    Option("snapshot", "chunk_size", Kind.INTEGER, 8096, at_least=1),
    Option("snapshot", "parallelism", Kind.INTEGER, 2, "chunks read at once", at_least=1),
    Option("snapshot", "chunk_key", Kind.RULES, None, "the column to chunk a table on (see below)", shown='{ "shop.events" = "event_id" }'),
    Option("snapshot", "startup_mode", Kind.CHOICE, "initial", "initial | latest-offset | snapshot-only", choices=StartupMode),
    Option("snapshot", "distribution_factor_upper", Kind.NUMBER, 1000.0, "integer keys with (max-min+1)/rows inside these bounds", above=0),
    Option("snapshot", "distribution_factor_lower", Kind.NUMBER, 0.05, "are split arithmetically, others by queries", above=0),
    Option("snapshot", "chunks_per_batch", Kind.INTEGER, None, "optional; default: about 512k rows per micro-batch", at_least=1, shown="64", fix="16"),
    Option("snapshot", "batch_seconds_while_streaming", Kind.NUMBER, 1.0, "while a table streams, a batch adds about this much chunk work (0: no cap)", at_least=0),
    # [sink]
    Option("sink", "kind", Kind.CHOICE, "delta", "delta | changelog-json", choices=SinkKind),
    Option("sink", "path", Kind.PATH, "lake", "mirror of db.t lives at <path>/<db>/<t>"),
    Option("sink", "changelog", Kind.BOOL, True, "append-only changelog at <path>/_changelog/<db>/<t>"),
    Option("sink", "mirrors", Kind.RULES, None, "a table's mirror (and change feed) placed by name; a pattern routes its tables into one", shown='{ "shop.users" = "analytics/users" }', commented=True),
    # [lake]
    Option("lake", "target_file_size", Kind.SIZE, "256KiB", "a MERGE rewrites whole files: smaller = cheaper changes"),
    Option("lake", "optimize_every", Kind.DURATION, "10m", 'compaction of small files, between batches ("off": never)', at_least=0),
    Option("lake", "vacuum_every", Kind.DURATION, "10m", 'vacuum, between batches ("off": never)', at_least=0),
    Option("lake", "vacuum_retention_hours", Kind.NUMBER, 1, "files an older version needs are kept this long", at_least=0),
    Option("lake", "log_retention_hours", Kind.NUMBER, 1, "Delta log entries are kept this long", at_least=0),
    Option("lake", "checkpoint_interval", Kind.INTEGER, 100, "a Delta checkpoint every N commits", at_least=1),
    Option("lake", "change_data_feed", Kind.BOOL, True, "delta.enableChangeDataFeed on new mirrors"),
    Option("lake", "deletion_vectors", Kind.BOOL, None, 'new mirrors merge-on-read; false: copy-on-write (see "The lake")', shown="true"),
    Option("lake", "datetime", Kind.CHOICE, "timestamp_ntz", 'or "timestamp": DATETIME as UTC, for older Delta readers', choices=DatetimeType),
    Option("lake", "snapshot_writes", Kind.CHOICE, "executors", 'first-snapshot files written by the readers ("driver": rows go to it)', choices=SnapshotWrites),
    # [state]
    Option("state", "path", Kind.PATH, "state/pipeline.sqlite"),
    # [spark]
    Option("spark", "master", Kind.STRING, "local[2]", "any Spark master URL; --master overrides"),
    Option("spark", "trigger_seconds", Kind.NUMBER, 1.0, above=0),
    Option("spark", "checkpoint", Kind.PATH, "checkpoints"),
    Option("spark", "ui_port", Kind.PORT, None, shown="4040", commented=True),
    Option("spark", "conf", Kind.RULES, None, shown='{ "spark.driver.memory" = "2g" }', commented=True),
    Option("spark", "class_archive", Kind.BOOL, True, "map the cached archive of Spark's classes into the driver JVM"),
    Option("spark", "wake_on_data", Kind.BOOL, True, "plan a batch as soon as the binlog moves (p50 0.41 s at 1k/s, 0.84 s with false; see docs/benchmarks.md)"),
    # [pipeline]
    Option("pipeline", "heartbeat_seconds", Kind.NUMBER, 5, "lag sampling interval", above=0),
    Option("pipeline", "source_outage_seconds", Kind.NUMBER, 600, "how long a source fault is waited out before exit 3", at_least=0),
    Option("pipeline", "schema_changes", Kind.CHOICE, "evolve", "evolve | park | stop: what a DDL on a captured table does (see above)", choices=SchemaChanges),
    Option("pipeline", "log_format", Kind.CHOICE, "text", 'or "json": one object per line (run --log-format overrides)', choices=LogFormat),
    Option("pipeline", "binlog_readers", Kind.INTEGER, 2, "tasks reading a catch-up window in parts (one server id each)", at_least=1),
    Option("pipeline", "binlog_part_bytes", Kind.SIZE, "2MiB", "... when the window holds at least this much per part", at_least=1 << 10),
    Option("pipeline", "max_window_bytes", Kind.SIZE, "16MiB", "a batch's window ends at the first transaction this far on", at_least=4 << 10),
    Option("pipeline", "invalid_dates", Kind.RULES, "null", 'or "sentinel" (0001-01-01), or "text" (NULL, the text in <col>__text); per type: { date = "sentinel" }'),
    Option("pipeline", "invalid_dates_for", Kind.RULES, None, 'per table ("db.t" = "sentinel") or column', shown='{ "shop.orders" = { shipped = "sentinel" } }', commented=True),
    Option("pipeline", "exclude_columns", Kind.RULES, None, 'never read nor mirrored (see "Columns left out or masked")', shown='{ "shop.customers" = ["ssn"] }', commented=True),
    Option("pipeline", "mask_columns", Kind.RULES, None, "keyed hash or redaction", shown='{ "shop.customers" = { email = "sha256", phone = "redact" } }', commented=True),
    Option("pipeline", "mask_key_env", Kind.STRING, "CDC_MASK_KEY", "the environment variable holding the sha256 masks' key"),
    # [metrics]
    Option("metrics", "listen", Kind.RULES, "127.0.0.1:9464", '/metrics, /healthz, /readyz; "" for none, port 0 for any free'),
    # [verify]
    Option("verify", "every", Kind.DURATION, "off", 'e.g. "6h": the job starts a verification this often', at_least=0, fix='"6h"'),
    Option("verify", "rows_per_second", Kind.INTEGER, 0, "source rows a verification reads per second; 0: no cap", at_least=0),
    Option("verify", "hide_values", Kind.RULES, HIDDEN_VALUES, "db.table.column globs: named, never shown"),
    # [console]
    Option("console", "refresh_seconds", Kind.NUMBER, 0.5, above=0, listed=False),
    Option("console", "lag_warn_seconds", Kind.NUMBER, thresholds.LAG.warn, above=0, listed=False),
    Option("console", "lag_alert_seconds", Kind.NUMBER, thresholds.LAG.alert, "lag shown red past this; also /readyz's limit", above=0),
    Option("console", "stale_warn_seconds", Kind.NUMBER, thresholds.STALE.warn, above=0, listed=False),
    Option("console", "stale_alert_seconds", Kind.NUMBER, thresholds.STALE.alert, above=0, listed=False),
    Option("console", "purge_warn_hours", Kind.NUMBER, thresholds.PURGE.warn / 3600, above=0, listed=False),
    Option("console", "purge_alert_hours", Kind.NUMBER, thresholds.PURGE.alert / 3600, "time left before a needed binlog may expire, shown red", above=0),
    Option("console", "job_log", Kind.PATH, None, listed=False),
)  # fmt: skip

#: the sections, in the reference's order, with the comment beside each header
SECTIONS: Mapping[str, str] = {
    "source": "",
    "snapshot": "",
    "sink": "",
    "lake": 'Delta sink only; see "The lake"',
    "state": "",
    "spark": "",
    "pipeline": "",
    "metrics": "",
    "verify": 'see "Verifying the lake"',
    "console": "optional; every key with its default: docs/console.md",
}

#: keys read only to be refused with their own message (never suggested)
REFUSED: Mapping[str, frozenset[str]] = {"source": frozenset({"password"})}

_BY_KEY: dict[tuple[str, str], Option] = {(o.section, o.key): o for o in OPTIONS}


def option(section: str, key: str) -> Option:
    return _BY_KEY[(section, key)]


def keys(section: str) -> frozenset[str]:
    """The keys ``[section]`` takes ("": the top of the file: its keys and the sections)."""
    own = {o.key for o in OPTIONS if o.section == section}
    if section == "":
        own |= set(SECTIONS)
    return frozenset(own | REFUSED.get(section, frozenset()))


_COMMENT_AT = 39


def _line(text: str, doc: str) -> str:
    """``text``, then its comment at column 40 (three spaces on where it is longer)."""
    if not doc:
        return text
    return f"{text:<{_COMMENT_AT}}# {doc}" if len(text) < _COMMENT_AT else f"{text}   # {doc}"


def reference() -> str:
    """The README's config reference: every listed key with its default (or an example), in
    TOML, each with its one line of doc."""
    lines = []
    for section in ("", *SECTIONS):
        if section:
            lines.append(_line(f"[{section}]", SECTIONS[section]))
        for opt in (o for o in OPTIONS if o.section == section and o.listed):
            value = opt.shown if opt.shown is not None else toml_text(opt.default)
            text = f"{'# ' if opt.commented else ''}{opt.key} = {value}"
            lines.append(_line(text, opt.doc))
    return "\n".join(lines) + "\n"
