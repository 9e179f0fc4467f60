"""``cdc-console workload --config F``: the demo's insert/update/delete load, on its own.

It writes to the server of the config's ``[source]``, but not as the pipeline's user (which may
only read): as ``--user`` (root by default), whose password is read from the environment variable
``--password-env`` names, registered as a secret and never printed, as for the pipeline.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING

from cdc_console.commands import Subparsers
from cdc_console.demo import DEFAULT_DATABASE, DEFAULT_MIX, DEFAULT_RATE
from cdc_console.errors import CdcError

if TYPE_CHECKING:
    from cdc_console.core.untyped import Connection

log = logging.getLogger("cdc_console.demo")

WRITER_PASSWORD_ENV = "CDC_WORKLOAD_PASSWORD"


def register(subparsers: Subparsers) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "workload",
        help="insert/update/delete load on the demo's shop tables at a set rate and mix",
        description="Write to the demo tables of the config's source server at --rate "
        "statements/s with an insert/update/delete --mix, touching every table and "
        "occasionally changing primary keys, until --duration passes or Ctrl-C; then print "
        "what was done.",
    )
    parser.add_argument("--config", required=True, help="pipeline TOML file (its [source])")
    parser.add_argument("--user", default="root", help="account that may write (default root)")
    parser.add_argument(
        "--password-env",
        default=WRITER_PASSWORD_ENV,
        help=f"environment variable with --user's password (default {WRITER_PASSWORD_ENV})",
    )
    parser.add_argument(
        "--database", default=DEFAULT_DATABASE, help=f"demo database (default {DEFAULT_DATABASE})"
    )
    parser.add_argument(
        "--rate", type=float, default=DEFAULT_RATE, help=f"statements/s (default {DEFAULT_RATE:g})"
    )
    parser.add_argument(
        "--mix", default=DEFAULT_MIX, help=f"insert/update/delete weights (default {DEFAULT_MIX})"
    )
    parser.add_argument("--threads", type=int, default=2, help="writer threads (default 2)")
    parser.add_argument("--duration", type=float, help="seconds to run (default: until Ctrl-C)")
    parser.add_argument(
        "--seed-rows",
        type=int,
        metavar="N",
        help="create and seed the demo database with N rows first if it does not exist",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import pymysql

    from cdc_console.config import load_config
    from cdc_console.demo import shop
    from cdc_console.demo.workload import Workload, WorkloadMix
    from cdc_console.errors import register_secret
    from cdc_console.mysql.connection import translate_error

    config = load_config(args.config)
    mix = WorkloadMix.parse(args.mix)
    password = os.environ.get(args.password_env)
    if password is None:
        raise CdcError(
            f"the password of --user {args.user} is not set: ${args.password_env} is empty",
            f"set {args.password_env} in the environment to that password, or name another "
            "variable with --password-env",
        )
    register_secret(password)
    source = config.source
    writer = type(source)(
        host=source.host, port=source.port, user=args.user, password_env=args.password_env
    )

    def connect(database: str | None = args.database) -> Connection:
        try:
            return pymysql.connect(
                host=source.host,
                port=source.port,
                user=args.user,
                password=password,
                database=database,
                autocommit=True,
                charset="utf8mb4",
                connect_timeout=10,
            )
        except pymysql.err.OperationalError as exc:
            raise translate_error(exc, writer) from None

    conn = connect(None)
    try:
        exists = shop.database_exists(conn, args.database)
        if exists and args.seed_rows:
            log.info("%s exists: not seeding it", args.database)
        elif not exists and args.seed_rows:
            shop.seed(conn, args.database, args.seed_rows)
        elif not exists:
            raise CdcError(
                f"database {args.database} does not exist on {source.host}:{source.port}",
                "create and seed the demo tables with --seed-rows 300000, or run "
                "'cdc-console demo'",
            )
    finally:
        conn.close()

    workload = Workload(connect, args.database, rate=args.rate, mix=mix, threads=args.threads)
    workload.prepare()
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        workload.start()
        log.info(
            "writing to %s:%d as %s until %s",
            source.host,
            source.port,
            args.user,
            f"{args.duration:g} s have passed" if args.duration else "Ctrl-C",
        )
        done.wait(args.duration)
    finally:
        counts = workload.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"workload: {counts.summary()}")
    return 1 if workload.failures else 0
