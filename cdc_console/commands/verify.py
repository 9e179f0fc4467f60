"""``cdc-console verify``: is every mirror equal to its source, now, while both move?"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from cdc_console.commands import TABLE_HELP, Subparsers, existing_state, table_name
from cdc_console.config import PipelineConfig, load_config
from cdc_console.errors import CdcError, UsageError

if TYPE_CHECKING:
    from cdc_console.core.schema import TableId
    from cdc_console.state.store import StateStore

EPILOG = """\
Each chunk of each streaming table is read from the source the way a snapshot reads it (low
watermark, SELECT, high watermark) and compared with the mirror's rows in its key range, both
brought to one binlog position; nothing is locked or paused, and the job may run meanwhile.

exit codes: 0 every verified mirror equals its source; 1 some chunk differs; 5 a table could
not be verified (the reason is printed); 2, 3, 4, 70 as for every command (cdc-console --help).

examples:
  cdc-console verify --config pipeline.toml
  cdc-console verify --config pipeline.toml --table shop.orders --chunk 3 --json
  cdc-console verify --config pipeline.toml --repair --rows-per-second 50000
"""


def register(subparsers: Subparsers) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "verify",
        help="compare every mirror with its source online, and repair what differs",
        description="Compare every mirror with its source online; repair what differs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", required=True, help="pipeline TOML file")
    parser.add_argument(
        "--table", type=table_name, help=f"{TABLE_HELP}; without it, every captured table"
    )
    parser.add_argument("--chunk", type=int, help="only this chunk number (needs --table)")
    parser.add_argument(
        "--repair",
        action="store_true",
        help="re-dump each differing chunk through the running job, then verify it again",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--rows-per-second",
        type=int,
        default=None,
        help="read the source at most this fast (default: [verify] rows_per_second; 0: no limit)",
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds --repair waits for the job"
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from cdc_console.core.schema import TableId
    from cdc_console.verify.verifier import exclusive

    if args.chunk is not None and not args.table:
        raise UsageError("--chunk needs --table", "name the table: --table db.table --chunk N")
    config = load_config(args.config)
    store = existing_state(config, args.config)
    try:
        tables = None
        if args.table:
            table_id = TableId.parse(args.table)
            if store.table(table_id) is None:
                raise CdcError(
                    f"{args.table} is not captured by this pipeline",
                    f"'cdc-console status --config {args.config}' lists its tables",
                )
            tables = [table_id]
        with exclusive(config):
            return _verify(args, config, store, tables)
    finally:
        store.close()


def _verify(
    args: argparse.Namespace,
    config: PipelineConfig,
    store: StateStore,
    tables: list[TableId] | None,
) -> int:
    from cdc_console.verify.repair import repair
    from cdc_console.verify.verifier import Verifier

    verifier = Verifier(config, store, rows_per_second=args.rows_per_second)
    report = verifier.run(tables, args.chunk)
    if not args.repair:
        if args.json:
            print(json.dumps(report.to_dict(), indent=2))
        else:
            print(report.describe())
        return report.exit_code
    if not args.json:
        print(report.describe())
    outcome = repair(config, store, verifier, report, args.timeout)
    if args.json:
        document = {
            "before": report.to_dict(),
            "repaired": list(outcome.repaired),
            "after": outcome.after.to_dict() if outcome.after else None,
        }
        print(json.dumps(document, indent=2))
    elif outcome.after is not None:
        print(f"repaired (re-dumped): {', '.join(outcome.repaired)}")
        print(outcome.after.describe())
    return outcome.exit_code
