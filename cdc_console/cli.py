"""``cdc-console``: the command-line entry point.

Errors a user can act on (``CdcError``) print as one message plus the fix and exit with their
``exit_code`` (2; 3 for a source that stayed unreachable); they never print a traceback or a
secret.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from cdc_console.errors import CdcError, redact
from cdc_console.logs import setup_logging

COMMAND_MODULES = (
    "check",
    "run",
    "status",
    "console",
    "control",
    "lake",
    "verify",
    "bench",
    "demo",
    "workload",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdc-console",
        description="MySQL change-data-capture on Spark, and its operations console.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"cdc_console.commands.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        from cdc_console.commands.console import discover_configs

        configs = discover_configs()
        if not configs:
            parser.print_help()
            return 0
        given = list(sys.argv[1:] if argv is None else argv)
        args = parser.parse_args([*given, "console", *(f"--config={c}" for c in configs)])
    setup_logging(args.verbose)
    try:
        return int(args.handler(args) or 0)
    except CdcError as exc:
        print(f"error: {redact(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
