"""``cdc-console``: the command-line entry point.

Errors a user can act on (``CdcError``) print as one message plus the fix and exit 2; they never
print a traceback or a secret.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from cdc_console.errors import CdcError, redact

COMMAND_MODULES = (
    "check",
    "run",
    "status",
    "console",
    "control",
    "lake",
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


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


LOG_FORMAT = "%(asctime)s %(levelname)-5s %(name)s: %(message)s"


@contextlib.contextmanager
def logging_to(path: Path) -> Iterator[None]:
    """Send all logging to ``path`` while a full-screen app owns the terminal (stderr output
    would tear the screen); a path that cannot be written silences logging instead."""
    root = logging.getLogger()
    previous = root.handlers[:]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(path, encoding="utf-8")
    except OSError:
        handler = logging.NullHandler()
    handler.setFormatter(RedactingFormatter(LOG_FORMAT, "%H:%M:%S"))
    root.handlers[:] = [handler]
    try:
        yield
    finally:
        root.handlers[:] = previous
        handler.close()


def setup_logging(verbose: bool = False) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter(LOG_FORMAT, "%H:%M:%S"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    for noisy in ("py4j", "pymysqlreplication", "deltalake"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


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
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
