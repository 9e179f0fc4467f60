"""``cdc-console``: the command-line entry point.

Errors a user can act on (``CdcError``) print as one message plus the fix and exit with their
``exit_code`` (``errors.ExitCode``: one meaning per code, listed in ``--help``); they never print
a traceback or a secret. Anything else is a bug: its traceback is printed, scrubbed, with exit 70.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cdc_console import __version__
from cdc_console.errors import CdcError, ExitCode, exit_codes_help, redact
from cdc_console.logs import setup_logging

if TYPE_CHECKING:
    from cdc_console.core.untyped import PassThrough

COMMAND_MODULES = (
    "check",
    "plan",
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


class HelpFormatter(argparse.HelpFormatter):
    """Wraps one-line descriptions to the terminal; keeps text laid out in lines (examples,
    the exit-code table) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdc-console",
        description="MySQL change-data-capture on Spark, and its operations console.",
        epilog=(
            "examples:\n"
            "  cdc-console demo                          the console over a local demo\n"
            "  cdc-console check --config jobs/example.toml\n"
            "  cdc-console run --config pipeline.toml\n"
            "  cdc-console status --config pipeline.toml --json\n"
            "  cdc-console COMMAND --help                a command's options and examples\n\n"
            + exit_codes_help()
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"cdc-console {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_parser = subparsers.add_parser

    def add_with_verbose(name: str, **kwargs: PassThrough) -> argparse.ArgumentParser:
        """Every subcommand takes ``-v`` too (``cdc-console status -v``); SUPPRESS leaves the
        top-level flag alone when it is given before the subcommand."""
        kwargs.setdefault("description", kwargs.get("help"))
        kwargs.setdefault("formatter_class", HelpFormatter)
        found = add_parser(name, **kwargs)
        found.add_argument(
            "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="debug logging"
        )
        return found

    subparsers.add_parser = add_with_verbose  # type: ignore[method-assign]
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"cdc_console.commands.{name}")
        module.register(subparsers)
    for command in subparsers.choices.values():
        _verbose_below(command)
    return parser


def _verbose_below(parser: argparse.ArgumentParser) -> None:
    """``-v`` on nested sub-commands too (``cdc-console bench snapshot -v``)."""
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        if isinstance(action, argparse._SubParsersAction):
            for nested in action.choices.values():
                if "-v" not in nested._option_string_actions:
                    nested.add_argument(
                        "-v",
                        "--verbose",
                        action="store_true",
                        default=argparse.SUPPRESS,
                        help="debug logging",
                    )
                _verbose_below(nested)


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
        return int(exc.exit_code)
    except KeyboardInterrupt:
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:
        print(redact(traceback.format_exc()), file=sys.stderr, end="")
        print(
            f"error: internal error ({type(exc).__name__}): {redact(str(exc))}\n"
            "  fix: this is a bug in cdc-console; report it with the traceback above "
            "(the pipeline's state is kept)",
            file=sys.stderr,
        )
        return int(ExitCode.INTERNAL)


if __name__ == "__main__":
    sys.exit(main())
