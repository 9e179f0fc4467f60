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
from typing import Any

from cdc_console import __version__
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
    parser.add_argument("--version", action="version", version=f"cdc-console {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_parser = subparsers.add_parser

    def add_with_verbose(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """Every subcommand takes ``-v`` too (``cdc-console status -v``); SUPPRESS leaves the
        top-level flag alone when it is given before the subcommand."""
        found = add_parser(name, **kwargs)
        found.add_argument(
            "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="debug logging"
        )
        return found

    subparsers.add_parser = add_with_verbose  # type: ignore[method-assign]
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
