"""``cdc-console demo``: sandbox, seeded shop, workload, pipeline job and console in one command."""

from __future__ import annotations

import argparse
from pathlib import Path

from cdc_console.commands import Subparsers
from cdc_console.errors import UsageError


def register(subparsers: Subparsers) -> None:
    from cdc_console.demo import (
        DEFAULT_DIR,
        DEFAULT_MIX,
        DEFAULT_RATE,
        DEFAULT_ROWS,
    )

    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="a private MariaDB/MySQL with a seeded shop and a live workload, captured by the "
        "pipeline, watched in the console",
        description="Start a private server (or use --source), seed a shop database, run a "
        "workload, launch the pipeline on local Spark and open the console on it. On quit it "
        "stops what it started. --headless --duration S runs without a screen and exits 0 only "
        "if every mirror then equals its source.",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_DIR,
        help=f"folder for everything the demo creates (default {DEFAULT_DIR})",
    )
    parser.add_argument(
        "--rows",
        type=int,
        default=DEFAULT_ROWS,
        help=f"rows to seed across the four tables (default {DEFAULT_ROWS:,})",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=DEFAULT_RATE,
        help=f"workload statements per second (default {DEFAULT_RATE:g})",
    )
    parser.add_argument(
        "--mix",
        default=DEFAULT_MIX,
        help=f"workload insert/update/delete weights (default {DEFAULT_MIX})",
    )
    parser.add_argument("--threads", type=int, default=2, help="workload threads (default 2)")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="leave the sandbox running on exit; the next demo in the same folder reuses it",
    )
    _source_options(parser)
    _headless_options(parser)
    parser.add_argument(
        "--chunk-size", type=int, help="snapshot chunk size (default: about 40 chunks in all)"
    )
    parser.set_defaults(handler=handle)


def _source_options(parser: argparse.ArgumentParser) -> None:
    """A server of the user's own instead of the sandbox."""
    from cdc_console.demo import ADMIN_PASSWORD_ENV, DEFAULT_DATABASE

    parser.add_argument(
        "--source",
        metavar="HOST:PORT",
        help="use this server instead of a sandbox (e.g. MySQL 8.4 from "
        "jobs/mysql84/compose.yaml); it is never stopped",
    )
    parser.add_argument(
        "--admin-user", default="root", help="--source account that may create databases, users"
    )
    parser.add_argument(
        "--admin-password-env",
        default=ADMIN_PASSWORD_ENV,
        help=f"environment variable with that account's password (default {ADMIN_PASSWORD_ENV})",
    )
    parser.add_argument(
        "--database", default=DEFAULT_DATABASE, help="name of the demo database (default shop)"
    )


def _headless_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--headless",
        action="store_true",
        help="no console: run the workload for --duration, wait for the job to catch up, "
        "compare every mirror with its source (exit 0 if equal, 1 if not)",
    )
    parser.add_argument(
        "--duration",
        type=float,
        help="seconds of workload (headless default 60; with the console: stop the workload "
        "after this long)",
    )
    parser.add_argument(
        "--catch-up-timeout",
        type=float,
        default=600.0,
        help="headless: seconds to wait for the job to catch up after the workload (default 600)",
    )


def handle(args: argparse.Namespace) -> int:
    from cdc_console.demo.run import Demo, DemoOptions
    from cdc_console.demo.workload import WorkloadMix

    if args.rows < 100:
        raise UsageError(
            f"--rows {args.rows} is too few", "seed at least 100 rows, e.g. --rows 3000"
        )
    if args.duration is not None and args.duration <= 0:
        raise UsageError(f"--duration {args.duration:g} must be positive", "e.g. --duration 60")
    if args.chunk_size is not None and args.chunk_size < 1:
        raise UsageError("--chunk-size must be at least 1", "e.g. --chunk-size 4096")
    options = DemoOptions(
        directory=args.dir,
        rows=args.rows,
        rate=args.rate,
        mix=WorkloadMix.parse(args.mix),
        threads=args.threads,
        keep=args.keep,
        source=args.source,
        admin_user=args.admin_user,
        admin_password_env=args.admin_password_env,
        database=args.database,
        headless=args.headless,
        duration=args.duration,
        catch_up_timeout=args.catch_up_timeout,
        chunk_size=args.chunk_size,
    )
    if options.rate <= 0:
        raise UsageError(f"--rate {options.rate:g} must be positive", "e.g. --rate 50")
    return Demo(options).run()
