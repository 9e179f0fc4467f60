"""``cdc-console check --config F``: is the source ready for this pipeline, and if not, what to do.

It runs the same checks ``run`` runs before starting (``cdc_console.mysql.checks``), but reports
every result instead of stopping at the first failure, so a DBA can fix everything in one pass.
A config file that does not load is reported as a failed ``config`` check rather than an error
exit, so ``--json`` consumers always get a document. Exit status: 0 when no error-severity check
failed (warnings do not fail), 1 otherwise. Only reads: nothing is written anywhere.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from cdc_console.commands import Subparsers
from cdc_console.config import PipelineConfig, load_config
from cdc_console.core.schema import TableSchema
from cdc_console.errors import ConfigError, redact
from cdc_console.mysql.check_result import CheckResult
from cdc_console.mysql.checks import run_checks
from cdc_console.mysql.probe import ServerInfo
from cdc_console.state.readonly import captured_tables

MARKS = {"ok": "✓", "error": "✗", "warning": "⚠"}


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "check",
        help="verify the source server, privileges and tables (read-only)",
        description="Check that the source server, the user's privileges and the configured "
        "tables meet the pipeline's needs; print each result with the statement that fixes it.",
    )
    parser.add_argument("--config", required=True, type=Path, help="pipeline TOML file")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(handler=handle)


def check_config(
    path: Path,
) -> tuple[PipelineConfig | None, ServerInfo | None, list[TableSchema], list[CheckResult]]:
    """Load the config and run every check; a config that does not load is one failed check."""
    try:
        config = load_config(path)
    except ConfigError as exc:
        return None, None, [], [CheckResult("config", False, exc.message, exc.hint, area="config")]
    loaded = CheckResult(
        "config",
        True,
        f"{config.path or path}: {len(config.source.tables)} table pattern(s)",
        area="config",
    )
    server, tables, results = run_checks(config, captured_tables(config.state_path))
    finish = finish_time_check(config, server)
    return config, server, tables, [loaded, *results, *finish]


def finish_time_check(config: PipelineConfig, server: ServerInfo | None) -> list[CheckResult]:
    """The chunk reads under way (the pipeline's state, read-only) against the server's binlog
    expiry: a warning when they may outlast it (``core.estimate``); nothing when none is under
    way or the state cannot be read."""
    from cdc_console.figures import ReadVerdict, read_estimates
    from cdc_console.mysql.expiry import EXPIRY_VARIABLES, expiry
    from cdc_console.state.store import StateStore

    if server is None or not config.state_path.exists():
        return []
    try:
        store = StateStore.open_existing(config.state_path, read_only=True)
    except Exception:  # a state from another release: status and run say so
        return []
    try:
        estimate = read_estimates(store, store.tables(), time.time()).total
    finally:
        store.close()
    if estimate is None or not estimate.chunks_left:
        return []
    variables = {n: v for n in EXPIRY_VARIABLES if (v := server.variable(n)) is not None}
    verdict = ReadVerdict(estimate, *expiry(variables))
    detail = f"chunk reads under way ({estimate.chunks_left} chunks left): {verdict.describe()}"
    if verdict.fits:
        return [CheckResult("finish_time", True, detail)]
    return [
        CheckResult(
            "finish_time",
            False,
            detail,
            "keep binlogs longer: SET GLOBAL binlog_expire_logs_seconds = 604800 (and in "
            "my.cnf), or pause other tables' reads",
            severity="warning",
        )
    ]


def mark(result: CheckResult) -> str:
    return MARKS["ok"] if result.ok else MARKS[result.severity]


def format_text(results: list[CheckResult]) -> str:
    """One line per check: mark, name, detail and, for a failure, the fix."""
    lines = []
    for result in results:
        line = f"{mark(result)} {result.name}: {result.detail}"
        if not result.ok and result.fix:
            line += f" — fix: {result.fix}"
        lines.append(line)
    errors = sum(r.blocking for r in results)
    warnings = sum(not r.ok and not r.blocking for r in results)
    if errors:
        summary = f"{errors} of {len(results)} checks failed"
    else:
        summary = f"all {len(results)} checks passed"
    if warnings:
        summary += f", {warnings} warning(s)"
    lines.append(summary)
    return "\n".join(lines)


def format_json(
    path: Path, server: ServerInfo | None, tables: list[TableSchema], results: list[CheckResult]
) -> str:
    document = {
        "config": str(path),
        "ok": not any(r.blocking for r in results),
        "server": server.to_dict() if server else None,
        "tables": [str(t.table_id) for t in tables],
        "checks": [r.to_dict() for r in results],
    }
    return json.dumps(document, indent=2)


def handle(args: argparse.Namespace) -> int:
    path = Path(args.config)
    _, server, tables, results = check_config(path)
    text = format_json(path, server, tables, results) if args.json else format_text(results)
    print(redact(text))
    return 1 if any(r.blocking for r in results) else 0
