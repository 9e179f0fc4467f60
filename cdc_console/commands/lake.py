"""``cdc-console lake status|optimize|vacuum|convert --config F [--table db.t] [--dry-run]``.

``status`` measures every Delta table of the lake (files, live data, bytes on disk). ``optimize``
and ``vacuum`` commit to the tables, so while a job runs they are queued for it (it runs them
between batches, never racing its own MERGEs) and ``--wait`` prints its answer; with no job
running they run here. ``convert --to merge-on-read|copy-on-write`` changes the layout of
existing mirrors (``sinks.layout_convert``), with no job running. ``--dry-run`` only reports
what would be done and never writes.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_console.commands import TABLE_HELP, Subparsers, table_name, writable_state
from cdc_console.config import PipelineConfig, load_config
from cdc_console.errors import CdcError, UsageError

if TYPE_CHECKING:
    from cdc_console.sinks.maintenance import LakeTable
    from cdc_console.state.lake import LakeTableState
    from cdc_console.state.store import StateStore

_EXAMPLES = """examples:
  cdc-console lake status   --config pipeline.toml
  cdc-console lake optimize --config pipeline.toml --table shop.orders --dry-run
  cdc-console lake vacuum   --config pipeline.toml --wait
  cdc-console lake convert  --config pipeline.toml --table shop.orders --to copy-on-write
"""


def register(subparsers: Subparsers) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "lake",
        help="the Delta lake's files and sizes; compact, vacuum or convert it",
        description="Measure, compact (optimize) or vacuum the pipeline's Delta tables, or "
        "convert mirrors between merge-on-read and copy-on-write. "
        "Retention and target file size come from the config's [lake] section.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("action", choices=("status", "optimize", "vacuum", "convert"))
    parser.add_argument(
        "--to",
        choices=("merge-on-read", "copy-on-write"),
        help="convert: the layout the mirrors take (merge-on-read: deletion vectors; "
        "copy-on-write: files rewritten, readable by every Delta reader)",
    )
    parser.add_argument("--config", required=True, help="pipeline TOML file")
    parser.add_argument(
        "--table", type=table_name, help=f"{TABLE_HELP}: only this mirror and its changelog"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="report what would be done; write nothing"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--wait", action="store_true", help="when queued to a running job: wait for its answer"
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds --wait waits (default 600)"
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from cdc_console.sinks.maintenance import lake_tables

    config = load_config(args.config)
    if config.sink.kind != "delta":
        raise CdcError(
            f"sink.kind is '{config.sink.kind}': there is no Delta lake to keep",
            "lake commands work on the delta sink only",
        )
    if args.action == "convert":
        return _convert(config, args)
    tables = _chosen(
        config, args.table, lake_tables(config.sink.path, config.sink.mirrors), "Delta table"
    )
    if args.action == "status":
        return _status(config, tables, args.json)
    if args.dry_run:
        return _run_here(config, tables, args.action, dry_run=True, as_json=args.json)
    from cdc_console.launcher import job_alive

    if job_alive(config):
        return _queue(config, args)
    return _run_here(config, tables, args.action, dry_run=False, as_json=args.json)


def _places_of(config: PipelineConfig, table: str) -> set[Path]:
    """The mirror and change feed of ``table`` where ``[sink] mirrors`` places it: a shard
    routed into a shared mirror names that one."""
    from cdc_console.core.schema import TableId
    from cdc_console.sinks.lake_layout import changelog_path, mirror_path

    try:
        table_id = TableId.parse(table)
    except ValueError:
        return set()
    root, names = config.sink.path, config.sink.mirrors
    return {mirror_path(root, table_id, names), changelog_path(root, table_id, names)}


def _chosen(
    config: PipelineConfig, table: str | None, tables: list[LakeTable], what: str
) -> list[LakeTable]:
    """``tables``, or the one ``--table`` names; none is an error: a wrong argument when
    ``--table`` names nothing, a first run still to come when there is no table at all."""
    chosen = [t for t in tables if t.name == table] if table else tables
    if not chosen and table:
        chosen = [t for t in tables if t.path in _places_of(config, table)]
    if not chosen:
        raise (UsageError if table else CdcError)(
            f"no {what}{' ' + table if table else ''} under {config.sink.path}",
            "the job creates the mirrors as it snapshots; check sink.path and --table",
        )
    return chosen


def _status(config: PipelineConfig, tables: list[LakeTable], as_json: bool) -> int:
    from cdc_console.sinks.maintenance import footprint
    from cdc_console.units import size

    recorded = _recorded(config)
    measured = [
        (
            table,
            footprint(table, config.lake.target_file_size),
            recorded.get((table.name, table.kind)),
        )
        for table in tables
    ]
    if as_json:
        rows = [
            {
                "table": table.name,
                "kind": table.kind,
                "path": str(table.path),
                "version": found.version,
                "files": found.files,
                "small_files": found.small_files,
                "rows": found.rows,
                "live_bytes": found.live_bytes,
                "disk_bytes": found.disk_bytes,
                "disk_over_live": round(found.amplification, 2),
                "optimized_at": state.optimized_at if state else None,
                "vacuumed_at": state.vacuumed_at if state else None,
            }
            for table, found, state in measured
        ]
        print(json.dumps({"lake": str(config.sink.path), "tables": rows}, indent=2))
        return 0
    print(
        f"{'table':<34} {'version':>7} {'files':>6} {'small':>6} {'rows':>11} "
        f"{'live':>10} {'on disk':>10} {'disk/live':>9}  optimized / vacuumed"
    )
    for table, found, state in measured:
        label = table.name + (" (changelog)" if table.kind == "changelog" else "")
        print(
            f"{label:<34} {found.version:>7} {found.files:>6} {found.small_files:>6} "
            f"{found.rows:>11,} {size(found.live_bytes):>10} "
            f"{size(found.disk_bytes):>10} {round(found.amplification, 2):>8.2f}x  "
            f"{_ago(state.optimized_at if state else None)} / "
            f"{_ago(state.vacuumed_at if state else None)}"
        )
    lake = config.lake
    print(
        f"target file size {size(lake.target_file_size)}, vacuum retention "
        f"{lake.vacuum_retention_hours:g} h; the job optimizes every "
        f"{_every(lake.optimize_every)} and vacuums every {_every(lake.vacuum_every)}"
    )
    return 0


def _convert(config: PipelineConfig, args: argparse.Namespace) -> int:
    from cdc_console.launcher import job_alive
    from cdc_console.sinks.delta import pipeline_app_id
    from cdc_console.sinks.lake_layout import folder_name
    from cdc_console.sinks.layout_convert import Layout, convert, finish_interrupted
    from cdc_console.sinks.maintenance import lake_tables
    from cdc_console.state.store import StateStore

    if args.to is None:
        raise UsageError(
            "convert needs --to merge-on-read or --to copy-on-write",
            "cdc-console lake convert --config F --table db.t --to copy-on-write",
        )
    if job_alive(config) and not args.dry_run:
        raise CdcError(
            "the job is running and commits to the mirrors; a mirror is converted only while "
            "no job writes to it",
            f"stop it (cdc-console stop --config {args.config}), convert, then start it again",
        )
    if not args.dry_run:
        for path in finish_interrupted(config.sink.path):
            print(f"{path}: an interrupted conversion finished")
    found = [t for t in lake_tables(config.sink.path, config.sink.mirrors) if t.kind == "mirror"]
    mirrors = _chosen(config, args.table, found, "mirror")
    shared = {
        config.sink.path.joinpath(*map(folder_name, p.split("/")))
        for _, p in config.sink.mirrors.routes
    }
    if args.to == "copy-on-write" and (routed := [t for t in mirrors if t.path in shared]):
        raise CdcError(
            f"{routed[0].path} holds the tables a [sink] mirrors pattern routes there; it is "
            "rebuilt copy-on-write only with each table's batch record, which is not done yet",
            "leave it merge-on-read (every reader that applies deletion vectors reads it)",
        )
    keys: dict[str, tuple[str, ...]] = {}
    if config.state_path.exists():
        store = StateStore.open_existing(config.state_path, read_only=True)
        try:
            keys = {str(t): s.key_columns for t, s in store.schemas().items()}
        finally:
            store.close()
    app_id = pipeline_app_id(config.name)
    results = [
        convert(t.path, Layout(args.to), app_id, keys.get(t.name, ()), dry_run=args.dry_run)
        for t in mirrors
    ]
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "table": t.name,
                        "layout": r.layout.value,
                        "changed": r.changed,
                        "dry_run": args.dry_run,
                        "rows": r.rows,
                        "set_aside": str(r.set_aside) if r.set_aside else None,
                    }
                    for t, r in zip(mirrors, results, strict=True)
                ],
                indent=2,
            )
        )
    else:
        for t, r in zip(mirrors, results, strict=True):
            verb = "would convert to" if args.dry_run else "converted to"
            print(f"{t.name}: {verb + ' ' if r.changed else ''}{r.describe()}")
    return 0


def _every(seconds: float) -> str:
    if seconds <= 0:
        return "never"
    if seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    return f"{seconds / 60:g} min" if seconds % 60 == 0 else f"{seconds:g} s"


def _ago(stamp: float | None) -> str:
    if not stamp:
        return "never"
    seconds = time.time() - stamp
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _recorded(config: PipelineConfig) -> dict[tuple[str, str], LakeTableState]:
    from cdc_console.state.lake import lake_tables as recorded_tables
    from cdc_console.state.store import StateStore

    if not config.state_path.exists():
        return {}
    store = StateStore.open_existing(config.state_path, read_only=True)
    try:
        return {(t.name, t.kind): t for t in recorded_tables(store)}
    finally:
        store.close()


def _refuse_while_staged(store: StateStore) -> None:
    """A batch a crash left staged may name data files its readers wrote and no version holds
    yet; vacuum would delete them as orphans once they are an hour old, and the batch's commit
    would then name missing files. The job applies staged batches when it starts. A binlog
    window the running job applies in the background (``plan_past``) writes no data file
    before its commit, so it is no reason to refuse."""
    staged = [b for b in store.staged_batches() if not b.plan_past]
    if staged:
        numbers = ", ".join(str(b.batch_no) for b in staged)
        raise CdcError(
            f"batch(es) {numbers} are staged and not yet applied to the lake (the job stopped "
            "between staging and applying them); vacuuming now could delete files they commit",
            "start the job once (cdc-console run --config F): it applies staged batches first; "
            "then vacuum, or let the job's own vacuum run",
        )


def _run_here(
    config: PipelineConfig, tables: list[LakeTable], action: str, dry_run: bool, as_json: bool
) -> int:
    from cdc_console.sinks.delta import pipeline_app_id
    from cdc_console.sinks.maintenance import optimize, vacuum
    from cdc_console.spark.lake_upkeep import measure
    from cdc_console.state.lake import record_maintenance
    from cdc_console.state.store import StateStore

    store = (
        None
        if dry_run or not config.state_path.exists()
        else StateStore.open_existing(config.state_path)
    )
    results = []
    try:
        if store is not None and action == "vacuum":
            _refuse_while_staged(store)
        for table in tables:
            if action == "vacuum":
                result = vacuum(
                    table, config.lake, dry_run=dry_run, app_id=pipeline_app_id(config.name)
                )
            else:
                result = optimize(table, config.lake, dry_run=dry_run)
            results.append(result)
            if not as_json:
                print(result.describe())
            if store is not None:
                record_maintenance(
                    store, table.name, table.kind, str(table.path), action, result.describe()
                )
                measure(store, table, config.lake.target_file_size)
    finally:
        if store is not None:
            store.close()
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "table": r.table.name,
                        "kind": r.table.kind,
                        "action": r.action,
                        "dry_run": r.dry_run,
                        "files_removed": r.files_removed,
                        "files_added": r.files_added,
                        "bytes_removed": r.bytes_removed,
                        "seconds": round(r.seconds, 3),
                    }
                    for r in results
                ],
                indent=2,
            )
        )
    return 0


def _queue(config: PipelineConfig, args: argparse.Namespace) -> int:
    from cdc_console.commands.control import _issuer, _wait
    from cdc_console.source.control import refusal

    store = writable_state(config)
    try:
        reason = refusal(args.action, args.table, {}, store.tables(), store.pipeline_paused())
        if reason is not None:
            raise CdcError(reason, f"'cdc-console lake status --config {args.config}' lists them")
        command_id = store.queue_command(args.action, args.table, {}, issued_by=_issuer())
        queued = store.command(command_id)
        assert queued is not None
        print(f"{queued.describe()} queued: the running job applies it between batches")
        if not args.wait:
            return 0
        return _wait(store, command_id, args.timeout)
    finally:
        store.close()
