"""``cdc-console status --config F [--json]``."""

from __future__ import annotations

import argparse
import json

from cdc_console.commands import Subparsers, existing_state
from cdc_console.config import PipelineConfig, load_config
from cdc_console.core.values import JSONObject
from cdc_console.errors import CdcError, redact


def register(subparsers: Subparsers) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "status",
        help="per-table state, chunk progress, binlog position and lag",
        description="What the pipeline's state database says (opened read-only, never "
        "migrated), with the source's binlog head for lag and purge headroom. --json always "
        "prints one document, also when the pipeline never ran (then with error and fix).",
        epilog="examples:\n"
        "  cdc-console status --config pipeline.toml\n"
        "  cdc-console status --config pipeline.toml --json | jq '.tables[] | {table, lag_seconds}'\n"
        "  cdc-console status --config pipeline.toml --no-probe    # the source is down",
    )
    parser.add_argument("--config", required=True, help="pipeline TOML file")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--no-probe",
        action="store_true",
        help="do not contact the source server for its binlog head",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from cdc_console.status import collect_status, format_status

    config: PipelineConfig | None = None
    try:
        config = load_config(args.config)
        store = existing_state(config, args.config, read_only=True)
    except CdcError as exc:
        if not args.json:
            raise
        # scripts get a document whatever was found: a pipeline that never ran, a state
        # database of another release, a config that does not load
        found: JSONObject = {
            "name": config.name if config else None,
            "state_path": str(config.state_path) if config else None,
            # unknown without a config; a state database of another release did run
            "ran": config.state_path.exists() if config else None,
            "tables": [],
            "job": None,
            "error": redact(exc.message),
            "fix": exc.hint,
            "exit_code": int(exc.exit_code),
        }
        print(json.dumps(found, indent=2))
        return int(exc.exit_code)
    status = collect_status(config, store, probe=not args.no_probe)
    if args.json:
        print(json.dumps(status.to_dict(), indent=2, default=str))
    else:
        print(format_status(status))
    return 0
