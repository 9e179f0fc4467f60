"""``cdc-console bench snapshot|binlog|lake|verify|redump|latency``: throughput, memory and lake cost against the obvious peers.

Both sub-commands start their own private MariaDB (nothing to configure, nothing of the user's
touched) and print one side-by-side table per run; see ``cdc_console.bench`` for what each line
measures. Timings are printed, never checked: a benchmark that fails on a busy machine would be
a flaky test, not a benchmark.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from cdc_console.commands import Subparsers
from cdc_console.config import SnapshotConfig
from cdc_console.errors import CdcError

if TYPE_CHECKING:
    from cdc_console.bench.common import RunOptions

_Options = TypeVar("_Options", bound="RunOptions")

SNAPSHOT_CONTENDERS = ("pymysql", "c", "jdbc", "ours")
BINLOG_CONTENDERS = ("raw", "c", "ours")


def _sizes(text: str) -> list[int]:
    """``1000000,3000000`` or ``1M,3M`` -> [1000000, 3000000]."""
    sizes = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        scale = 1
        if part.endswith("m"):
            scale, part = 1_000_000, part[:-1]
        elif part.endswith("k"):
            scale, part = 1_000, part[:-1]
        try:
            value = int(float(part) * scale)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a row count: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"row counts must be positive: {text!r}")
        sizes.append(value)
    return sizes


def _count(text: str) -> int:
    sizes = _sizes(text)
    if len(sizes) != 1:
        raise argparse.ArgumentTypeError(f"one count expected: {text!r}")
    return sizes[0]


def _skip(choices: tuple[str, ...]) -> Callable[[str], frozenset[str]]:
    def parse(text: str) -> frozenset[str]:
        names = frozenset(n.strip() for n in text.split(",") if n.strip())
        unknown = names - set(choices)
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown contender(s) {sorted(unknown)}; choose from {', '.join(choices)}"
            )
        return names

    return parse


def _writers(text: str) -> tuple[str, ...]:
    """``executors,driver`` -> the ``[lake] snapshot_writes`` modes to run, in that order."""
    modes = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = set(modes) - {"executors", "driver"}
    if not modes or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown writer(s) {sorted(unknown)}; choose from executors, driver"
        )
    return modes


def _counts(text: str) -> tuple[int, ...]:
    """``1,2`` -> (1, 2): positive counts, in the order given."""
    try:
        counts = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of counts like 1,2")
    return counts


def _common(parser: argparse.ArgumentParser, contenders: tuple[str, ...]) -> None:
    parser.add_argument(
        "--chunk-size", type=int, default=SnapshotConfig.chunk_size, help="snapshot chunk rows"
    )
    parser.add_argument("--parallelism", type=int, default=2, help="chunks read at once")
    parser.add_argument("--master", default="local[2]", help="Spark master for every contender")
    parser.add_argument(
        "--executors",
        type=_counts,
        default=(),
        help="ours once per executor count, side by side: e.g. 1,2 runs it with one and with "
        "two one-core executors (local-cluster[N,1,1024], or spark.cores.max=N on a spark:// "
        "--master); the peers stay on --master",
    )
    parser.add_argument(
        "--changelog",
        action="store_true",
        help="also write the Delta changelog (default: mirror only, one copy like the peers)",
    )
    parser.add_argument(
        "--skip",
        type=_skip(contenders),
        default=frozenset(),
        help=f"comma-separated contenders to leave out: {', '.join(contenders)}",
    )
    _run_folder(parser, "seconds allowed per contender")


def _run_folder(parser: argparse.ArgumentParser, timeout_help: str) -> None:
    """Where a bench runs and what it keeps: every bench takes these."""
    parser.add_argument(
        "--workdir", type=Path, help="parent folder of the throw-away run folder (default: /tmp)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the run folder (server, lake, logs)"
    )
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--timeout", type=float, default=3600.0, help=timeout_help)


def register(subparsers: Subparsers) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "bench",
        help="benchmark the pipeline against pymysql, Spark JDBC and raw binlog decoding",
        description="Start a private MariaDB, seed it, and print side by side the throughput "
        "and peak memory of the pipeline and of the obvious alternatives.",
    )
    sub = parser.add_subparsers(dest="bench", metavar="BENCH", required=True)
    _snapshot_parser(sub)
    _binlog_parser(sub)
    _lake_parser(sub)
    _verify_parser(sub)
    _redump_parser(sub)
    _latency_parser(sub)


def _snapshot_parser(sub: Subparsers) -> None:
    snap = sub.add_parser(
        "snapshot",
        help="read a whole table: pymysql chunk scan, Spark JDBC, ours",
        description="Snapshot throughput at one or more table sizes; with two sizes (e.g. "
        "--rows 1M,3M) it also reports whether the pipeline's peak memory stays flat.",
    )
    snap.add_argument(
        "--rows",
        type=_sizes,
        required=True,
        help="table size(s), comma-separated, k/M suffixes allowed: 1000000 or 1M,3M",
    )
    snap.add_argument(
        "--jdbc-jar",
        type=Path,
        default=None,
        help="MySQL/MariaDB JDBC jar (default: /usr/share/java/mariadb-java-client.jar)",
    )
    snap.add_argument(
        "--snapshot-writes",
        type=_writers,
        default=("executors",),
        help="who writes ours' Delta files, one run each: executors, driver or both "
        "(executors,driver) for the two side by side",
    )
    _common(snap, SNAPSHOT_CONTENDERS)
    snap.set_defaults(handler=handle_snapshot)


def _binlog_parser(sub: Subparsers) -> None:
    binlog = sub.add_parser(
        "binlog",
        help="apply a backlog of binlog changes: raw BinLogStreamReader, the server's C "
        "decoder, ours",
        description="Write N row changes while the job is stopped, then time raw decoding of "
        "that binlog window and the pipeline catching up through it.",
    )
    binlog.add_argument(
        "--changes", type=_count, required=True, help="row changes to write, e.g. 200000 or 200k"
    )
    binlog.add_argument(
        "--binlog-readers",
        type=_counts,
        default=(2,),
        help="tasks reading a window in parts ([pipeline] binlog_readers), one catch-up each "
        "from the same state: e.g. 1,2 for the two side by side",
    )
    binlog.add_argument(
        "--workload",
        choices=("mixed", "single", "multi"),
        default="mixed",
        help="how the changes are written: half multi-row, half single-row statements (mixed), "
        "single-row statements only (an OLTP application), or multi-row ones only (a batch job)",
    )
    binlog.add_argument(
        "--seed-rows",
        type=_count,
        default=100_000,
        help="rows in the table before the changes (raised to changes/2 if smaller)",
    )
    _common(binlog, BINLOG_CONTENDERS)
    binlog.set_defaults(handler=handle_binlog)


def _lake_parser(sub: Subparsers) -> None:
    lake = sub.add_parser(
        "lake",
        help="what the Delta mirror costs under steady writes: disk, files, rows copied",
        description="Seed a table, snapshot it, then stream --rate statements/s for --minutes "
        "with the job's lake maintenance; print disk against live data, files, rows copied "
        "per changed row and MERGE time, at the end of the load and after maintenance.",
    )
    lake.add_argument("--rows", type=_count, default=1_000_000, help="seeded rows (default 1M)")
    lake.add_argument("--minutes", type=float, default=3.0, help="minutes of writes (default 3)")
    lake.add_argument("--rate", type=float, default=200.0, help="statements/s (default 200)")
    lake.add_argument(
        "--optimize-every", default="1m", help="the job's compaction and vacuum interval"
    )
    lake.add_argument(
        "--retention-hours",
        type=float,
        default=0.0,
        help="vacuum retention (default 0: the floor within minutes; the job's default is 1)",
    )
    lake.add_argument("--target-file-size", help='e.g. "256KiB" (default: the job\'s)')
    lake.add_argument(
        "--layout",
        choices=("merge-on-read", "copy-on-write"),
        default="merge-on-read",
        help="the mirror's layout ([lake] deletion_vectors; default merge-on-read, the job's)",
    )
    lake.add_argument("--master", default="local[2]", help="Spark master")
    _run_folder(lake, "seconds per job run")
    lake.set_defaults(handler=handle_lake)


def _verify_parser(sub: Subparsers) -> None:
    verify = sub.add_parser(
        "verify",
        help="verify a mirror online: rows/s next to the snapshot's, same run",
        description="Seed a table, snapshot it into a streaming mirror, then verify the mirror "
        "against the source; print verify rows/s next to the snapshot's and their ratio.",
    )
    verify.add_argument("--rows", type=_count, required=True, help="table rows, e.g. 1M")
    verify.add_argument(
        "--chunk-size", type=int, default=SnapshotConfig.chunk_size, help="snapshot chunk rows"
    )
    verify.add_argument("--parallelism", type=int, default=2, help="snapshot chunks at once")
    verify.add_argument("--master", default="local[2]", help="Spark master for the snapshot")
    _run_folder(verify, "seconds per process")
    verify.add_argument(
        "--no-lag",
        action="store_true",
        help="skip the second part: the other tables' lag while a verification runs",
    )
    verify.add_argument(
        "--rate", type=float, default=100.0, help="UPDATEs/s on the streaming table (default 100)"
    )
    verify.add_argument(
        "--rows-per-second",
        type=int,
        default=0,
        help="the verification's rate cap while the other table streams (default 0: none)",
    )
    verify.add_argument(
        "--settle-seconds",
        type=float,
        default=40.0,
        help="seconds the restarted job streams before the baseline starts (default 40)",
    )
    verify.add_argument(
        "--baseline-seconds",
        type=float,
        default=20.0,
        help="seconds of lag measured before the verification starts (default 20)",
    )
    verify.set_defaults(handler=handle_verify)


def _redump_parser(sub: Subparsers) -> None:
    redump = sub.add_parser(
        "redump",
        help="the other tables' lag while one table is re-dumped",
        description="Seed a table and a small live one, snapshot both, then re-dump the big "
        "table while a writer updates the live one; print the live table's lag before and "
        "during the re-dump, once per chunk budget (batch_seconds_while_streaming).",
    )
    redump.add_argument("--rows", type=_count, default=200_000, help="table rows (default 200k)")
    redump.add_argument(
        "--chunk-size", type=int, default=SnapshotConfig.chunk_size, help="snapshot chunk rows"
    )
    redump.add_argument("--parallelism", type=int, default=2, help="snapshot chunks at once")
    redump.add_argument("--master", default="local[2]", help="Spark master")
    _run_folder(redump, "seconds per process")
    redump.add_argument(
        "--rate", type=float, default=100.0, help="UPDATEs/s on the streaming table (default 100)"
    )
    redump.add_argument(
        "--budgets",
        default="0,1",
        help="batch_seconds_while_streaming of each pass, comma separated (default 0,1: no "
        "cap, then the job's default)",
    )
    redump.add_argument(
        "--settle-seconds",
        type=float,
        default=30.0,
        help="seconds the restarted job streams before the baseline starts (default 30)",
    )
    redump.add_argument(
        "--baseline-seconds",
        type=float,
        default=15.0,
        help="seconds of lag measured before the re-dump starts (default 15)",
    )
    redump.set_defaults(handler=handle_redump)


def _latency_parser(sub: Subparsers) -> None:
    latency = sub.add_parser(
        "latency",
        help="change -> mirror latency of single-row inserts, seen from outside",
        description="Stream a table while writers insert single rows at each rate; a reader "
        "outside the job follows the Delta mirror's versions and prints p50/p90/p99/max per "
        "rate, then the highest rate sustained with p99 <= 3 s.",
    )
    latency.add_argument(
        "--rates", default="1000,4000", help="inserts/s, comma separated (default 1000,4000)"
    )
    latency.add_argument("--seconds", type=float, default=30.0, help="seconds per rate")
    latency.add_argument(
        "--trigger-seconds",
        type=float,
        default=0.2,
        help="the job's [spark] trigger_seconds (default 0.2; the job's own default is 1: a "
        "change waits half a trigger on average before its batch is planned)",
    )
    latency.add_argument(
        "--wake-on-data",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the job's [spark] wake_on_data: plan a batch as soon as the binlog moves "
        "(default; --no-wake-on-data plans at each trigger)",
    )
    latency.add_argument(
        "--idle-seconds",
        type=float,
        default=10.0,
        help="seconds the idle pipeline's cores are measured over, before the writes (default 10)",
    )
    latency.add_argument("--master", default="local[2]", help="Spark master")
    _run_folder(latency, "seconds for the job to stream")
    latency.set_defaults(handler=handle_latency)


def _run(
    args: argparse.Namespace,
    bench: str,
    options_type: type[_Options],
    run: Callable[[_Options], object],
    *,
    key: str = "result",
    log: str = "the contender's log",
    **given: object,
) -> int:
    """Build ``options_type`` from the parsed flags of the same names (``given`` wins), run the
    benchmark, and save its figures under ``key`` with ``--json``."""
    from dataclasses import fields

    from cdc_console.bench.common import dump_json
    from cdc_console.bench.processes import BenchError

    names = {f.name for f in fields(options_type)}
    options = options_type(**{**{k: v for k, v in vars(args).items() if k in names}, **given})
    try:
        result = run(options)
    except BenchError as exc:
        raise CdcError(f"benchmark failed: {exc}", f"see {log} above") from None
    if args.json:
        dump_json(args.json, {"bench": bench, "options": vars(args), key: result})
    return 0


def handle_snapshot(args: argparse.Namespace) -> int:
    from cdc_console.bench.common import DEFAULT_JDBC_JAR
    from cdc_console.bench.snapshot import SnapshotOptions, run_snapshot_bench

    jar = args.jdbc_jar or DEFAULT_JDBC_JAR
    return _run(args, "snapshot", SnapshotOptions, run_snapshot_bench, key="results", jdbc_jar=jar)


def handle_binlog(args: argparse.Namespace) -> int:
    from cdc_console.bench.binlog import BinlogOptions, run_binlog_bench

    return _run(args, "binlog", BinlogOptions, run_binlog_bench)


def handle_lake(args: argparse.Namespace) -> int:
    from cdc_console.bench.lake import LakeOptions, run_lake_bench

    return _run(args, "lake", LakeOptions, run_lake_bench, log="the job's log")


def handle_verify(args: argparse.Namespace) -> int:
    from cdc_console.bench.verify import VerifyOptions, run_verify_bench

    return _run(args, "verify", VerifyOptions, run_verify_bench)


def handle_redump(args: argparse.Namespace) -> int:
    from cdc_console.bench.redump import RedumpOptions, run_redump_bench

    return _run(args, "redump", RedumpOptions, run_redump_bench, log="the job's log")


def handle_latency(args: argparse.Namespace) -> int:
    from cdc_console.bench.latency import LatencyOptions, run_latency_bench

    return _run(args, "latency", LatencyOptions, run_latency_bench, log="the job's log")
