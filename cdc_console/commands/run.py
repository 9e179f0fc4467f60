"""``cdc-console run --config F``: snapshot, then stream, until stopped."""

from __future__ import annotations

import argparse

from cdc_console.commands import Subparsers
from cdc_console.config import load_config
from cdc_console.logs import setup_logging


def register(subparsers: Subparsers) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="run the pipeline (preflight, snapshot, stream) until SIGINT/SIGTERM",
        description="Check the source, then snapshot each table chunk by chunk without locks and "
        "stream its binlog into the Delta mirrors, until SIGINT/SIGTERM (the batch in flight "
        "finishes) or a 'stop' command. A restart resumes from the last committed batch.",
        epilog="examples:\n"
        "  cdc-console run --config jobs/example.toml\n"
        "  cdc-console run --config pipeline.toml --until-caught-up      # a one-off sync\n"
        "  cdc-console run --config pipeline.toml --master spark://host:7077 --log-format json",
    )
    parser.add_argument("--config", required=True, help="pipeline TOML file")
    parser.add_argument(
        "--until-caught-up",
        action="store_true",
        help="exit 0 once every table streams at the server's binlog head",
    )
    parser.add_argument("--master", help="override spark.master (any Spark master URL)")
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        help="log lines as text or one JSON object each (default: [pipeline] log_format)",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from cdc_console.spark.job import PipelineJob, install_signal_handlers

    config = load_config(args.config)
    setup_logging(args.verbose, args.log_format or config.log_format, config.name)
    if args.master:
        config = replace(config, spark=replace(config.spark, master=args.master))
    job = PipelineJob(config)
    install_signal_handlers(job)
    return job.run(until_caught_up=args.until_caught_up)
