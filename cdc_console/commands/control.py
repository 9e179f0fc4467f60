"""``pause``, ``resume``, ``redump``, ``add-table``, ``remove-table`` and ``stop``.

Each queues one command in the state database (the same queue the console uses), prints its id,
and with ``--wait`` waits for the job's acknowledgement and prints the outcome. A command the
current state cannot accept is refused here at once with the reason (``refusal``), and the job
checks again when it applies it, since the state may move on in between.
"""

from __future__ import annotations

import argparse
import getpass
import time
from typing import TYPE_CHECKING

from cdc_console.commands import TABLE_HELP, Subparsers, table_name, writable_state
from cdc_console.config import load_config
from cdc_console.core.schema import TableId, quote_ident
from cdc_console.errors import CdcError

if TYPE_CHECKING:
    from cdc_console.config import PipelineConfig
    from cdc_console.core.values import JSONObject
    from cdc_console.state.store import StateStore

POLL_SECONDS = 0.5


EXAMPLES = {
    "pause": "  cdc-console pause --config pipeline.toml --table shop.orders --wait\n"
    "  cdc-console pause --config pipeline.toml                  # every table",
    "resume": "  cdc-console resume --config pipeline.toml --table shop.orders",
    "redump": "  cdc-console redump --config pipeline.toml --table shop.orders\n"
    "  cdc-console redump --config pipeline.toml --table shop.orders --chunk 3   # one chunk",
    "add-table": "  cdc-console add-table --config pipeline.toml shop.refunds --wait",
    "remove-table": "  cdc-console remove-table --config pipeline.toml shop.refunds",
    "stop": "  cdc-console stop --config pipeline.toml --wait",
}


def register(subparsers: Subparsers) -> None:
    specs: list[tuple[str, str, str, str]] = [
        # name, kind, table argument (none/optional/required/positional), help
        ("pause", "pause", "optional", "pause one table (or the whole pipeline)"),
        ("resume", "resume", "optional", "resume a paused table (or the whole pipeline)"),
        ("redump", "redump", "required", "re-snapshot one table (or one chunk) while it streams"),
        ("add-table", "add-table", "positional", "start capturing a table in the running job"),
        ("remove-table", "remove-table", "positional", "stop capturing a table, keep its mirror"),
        ("stop", "stop", "none", "stop the running job after its current batch"),
    ]
    for name, kind, table_arg, help_text in specs:
        parser: argparse.ArgumentParser = subparsers.add_parser(
            name,
            help=help_text,
            description=f"{help_text[0].upper()}{help_text[1:]}. The command is queued in the "
            "state database; the running job applies it between batches (--wait waits for its "
            "answer). Without a running job it applies when the job next starts.",
            epilog=f"examples:\n{EXAMPLES[name]}",
        )
        parser.add_argument("--config", required=True, help="pipeline TOML file")
        if table_arg == "optional":
            parser.add_argument(
                "--table", type=table_name, help=f"{TABLE_HELP}; without it, the whole pipeline"
            )
        elif table_arg == "required":
            parser.add_argument("--table", type=table_name, required=True, help=TABLE_HELP)
            parser.add_argument("--chunk", type=int, help="re-dump only this chunk number (repair)")
        elif table_arg == "positional":
            parser.add_argument("table", type=table_name, help=TABLE_HELP)
        if kind in ("redump", "add-table"):
            parser.add_argument(
                "--force",
                action="store_true",
                help="start the read even when its finish-time estimate does not fit in the "
                "server's binlog expiry",
            )
        parser.add_argument(
            "--wait", action="store_true", help="wait for the job's acknowledgement"
        )
        parser.add_argument(
            "--timeout", type=float, default=120.0, help="seconds --wait waits (default 120)"
        )
        parser.set_defaults(handler=handle, command_kind=kind)


def handle(args: argparse.Namespace) -> int:
    from cdc_console.core.lifecycle import CommandKind
    from cdc_console.source.control import duplicate_of, refusal

    config = load_config(args.config)
    kind: str = args.command_kind
    target: str | None = getattr(args, "table", None)
    extra: JSONObject = {}
    if getattr(args, "chunk", None) is not None:
        extra["chunk"] = args.chunk
    from cdc_console.launcher import job_alive

    running = job_alive(config)
    if kind == CommandKind.STOP and not running:
        raise CdcError(
            f"no job is running for {config.path}",
            f"nothing to stop; 'cdc-console status --config {args.config}' shows the last run",
        )
    store = writable_state(config)
    try:
        reason = refusal(kind, target, extra, store.tables(), store.pipeline_paused())
        if reason is not None:
            raise CdcError(
                reason, f"'cdc-console status --config {args.config}' shows each table's state"
            )
        same = duplicate_of(kind, target, extra, store.pending_commands())
        if same is not None:
            raise CdcError(
                f"{same.describe()} is already queued (#{same.id}, pending): a second one would "
                "add nothing",
                f"wait for it: 'cdc-console status --config {args.config}' shows its outcome",
            )
        if kind == CommandKind.ADD_TABLE and target is not None:
            _check_table_exists(config, target)
        if kind in (CommandKind.REDUMP, CommandKind.ADD_TABLE) and target and "chunk" not in extra:
            _check_finish_time(config, store, kind, target, force=args.force)
        command_id = store.queue_command(kind, target, extra, issued_by=_issuer())
        queued = store.command(command_id)
        assert queued is not None
        print(f"{queued.describe()} queued")
        if not running:
            print("no job is running: it applies when the job next starts")
            return 0
        if not args.wait:
            return 0
        return _wait(store, command_id, args.timeout)
    finally:
        store.close()


def _check_table_exists(config: PipelineConfig, target: str) -> None:
    """Refuse to queue add-table for a table the source does not have; when the source cannot
    be asked, say so and queue it (the job checks again when it applies it)."""
    from cdc_console.errors import redact
    from cdc_console.mysql.connection import connect
    from cdc_console.mysql.schema import list_tables

    table_id = TableId.parse(target)
    database, table = table_id.database, table_id.table
    try:
        conn = connect(config.source, connect_timeout=5)
    except Exception as exc:
        reason = redact(str(exc)).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"warning: could not check that {target} exists ({reason}); the job checks it")
        return
    try:
        found = table in list_tables(conn, database)
    finally:
        conn.close()
    if not found:
        raise CdcError(
            f"{target} does not exist on the source ({config.source.host}:{config.source.port})",
            f"check the name (SHOW TABLES IN {quote_ident(database)}) or create the table first",
        )


def _check_finish_time(
    config: PipelineConfig, store: StateStore, kind: str, target: str, *, force: bool
) -> None:
    """Say how long the read will take against how long the server keeps its binlog, and refuse
    one that does not fit unless ``force``d: it would end parked and start over."""
    from cdc_console.core.lifecycle import CommandKind
    from cdc_console.errors import redact
    from cdc_console.figures import (
        ReadPacing,
        ReadVerdict,
        added_table_forecast,
        redump_forecast,
    )
    from cdc_console.mysql.connection import connect
    from cdc_console.mysql.expiry import binlog_expiry
    from cdc_console.mysql.schema import estimated_rows

    table_id = TableId.parse(target)
    try:
        conn = connect(config.source, connect_timeout=5)
        try:
            expire, setting = binlog_expiry(conn)
            rows = estimated_rows(conn, table_id) if kind == CommandKind.ADD_TABLE else 0
        finally:
            conn.close()
    except Exception as exc:
        reason = redact(str(exc)).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"warning: no finish-time check ({reason})")
        return
    pacing = ReadPacing.of(config)
    estimate = (
        redump_forecast(store, table_id, pacing)
        if kind == CommandKind.REDUMP
        else added_table_forecast(store, rows, pacing)
    )
    verdict = ReadVerdict(estimate, expire, setting)
    print(f"finish time: {verdict.describe()}")
    if verdict.fits:
        return
    if force:
        print("--force: queued anyway")
        return
    raise CdcError(
        f"{target}: the read may outlast the binlog it needs ({verdict.describe()})",
        "keep binlogs longer (SET GLOBAL binlog_expire_logs_seconds = 604800, and in my.cnf), "
        "or pass --force to start it anyway",
    )


def _issuer() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:
        return "cli"


def _wait(store: StateStore, command_id: int, timeout: float) -> int:
    from cdc_console.core.lifecycle import CommandStatus

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        command = store.command(command_id)
        if command is not None and command.status != CommandStatus.PENDING:
            if command.status == CommandStatus.APPLIED:
                print(f"{command.describe()} applied: {command.reason}")
                return 0
            raise CdcError(
                f"{command.describe()} refused by the job: {command.reason}",
                "the state changed since it was queued; check 'cdc-console status'",
            )
        time.sleep(POLL_SECONDS)
    raise CdcError(
        f"command {command_id} was not acknowledged within {timeout:.0f} s",
        "the job applies commands between batches; a long batch delays it. It stays queued: "
        "check 'cdc-console status' for its outcome",
    )
