"""``cdc-console status --config F [--json]``."""

from __future__ import annotations

import argparse
import json

from cdc_console.commands import Subparsers, existing_state
from cdc_console.config import load_config
from cdc_console.errors import CdcError


def register(subparsers: Subparsers) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "status", help="per-table state, chunk progress, binlog position and lag"
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

    config = load_config(args.config)
    try:
        store = existing_state(config, args.config, read_only=True)
    except CdcError as exc:
        if not args.json:
            raise
        # scripts get a document whatever was found: here, a pipeline that never ran
        never = {
            "name": config.name,
            "state_path": str(config.state_path),
            "ran": False,
            "tables": [],
            "job": None,
            "error": exc.message,
            "fix": exc.hint,
        }
        print(json.dumps(never, indent=2))
        return exc.exit_code
    status = collect_status(config, store, probe=not args.no_probe)
    if args.json:
        print(json.dumps(status.to_dict(), indent=2, default=str))
    else:
        print(format_status(status))
    return 0
