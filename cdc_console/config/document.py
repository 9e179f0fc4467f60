"""A whole config document read into a ``PipelineConfig``: each section from its keys, with
the checks that span keys or sections."""

from __future__ import annotations

import re
import tomllib
from functools import partial
from pathlib import Path

from cdc_console.config.model import (
    ConsoleConfig,
    LakeConfig,
    MetricsConfig,
    PipelineConfig,
    SinkConfig,
    SnapshotConfig,
    SourceConfig,
    SparkConfig,
    VerifyConfig,
)
from cdc_console.config.reading import (
    _PROBLEMS,
    _check_keys,
    _get,
    _maybe,
    _or_problem,
    _problem,
    _resolve,
    _section,
    _typed,
)
from cdc_console.config.rules import (
    _exclude_columns,
    _hosts,
    _invalid_dates,
    _mask_columns,
    _max_load,
    _mirrors,
    _server_ids,
    parse_table_pattern,
)
from cdc_console.core.options import (
    HIDDEN_VALUES,
    DatetimeType,
    LogFormat,
    SchemaChanges,
    SinkKind,
    SnapshotWrites,
    SourcePosition,
    StartupMode,
    option,
)
from cdc_console.core.untyped import TomlTable
from cdc_console.errors import ConfigError


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
