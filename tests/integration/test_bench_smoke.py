"""The benchmarks run end to end at tiny sizes and print their labelled lines.

No timing is asserted, ever: on a shared 2-core machine a throughput assertion is a flaky test.
What is checked is that every contender ran (its line is in the table) and the bar verdicts and
the breakdown were printed, so a refactoring that breaks a benchmark is caught by CI rather than
by whoever next tries to reproduce the README's figures. Each bench starts its own server, so
these tests do not use the session fixture's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cdc_console.bench.common import DEFAULT_JDBC_JAR
from cdc_console.mysql.sandbox import SandboxError, find_server_binary

pytestmark = [pytest.mark.mysql, pytest.mark.spark]


@pytest.fixture(autouse=True)
def _server_binary() -> None:
    try:
        find_server_binary()
    except SandboxError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))


def _bench(tmp_path: Path, *args: str) -> tuple[str, dict[str, object]]:
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cdc_console",
            "bench",
            *args,
            "--workdir",
            str(tmp_path),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout, json.loads(out.read_text())


def test_snapshot_bench_prints_every_contender(tmp_path: Path) -> None:
    stdout, document = _bench(tmp_path, "snapshot", "--rows", "20000")
    expected = ["pymysql chunk scan", "ours snapshot -> delta (window)"]
    expected.append("ours snapshot -> delta (process wall)")
    expected += [
        "C client read (mariadb --quick), 1 conn",
        "C client read (mariadb --quick), 2 conn",
        "ours window as a share of the C client's read on 2 connection(s)",
    ]
    if DEFAULT_JDBC_JAR.exists():
        expected += ["spark jdbc -> parquet (job)", "spark jdbc -> parquet (process wall)"]
    else:
        expected.append("spark jdbc skipped")
    for label in expected:
        assert label in stdout, stdout
    assert "snapshot benchmark: 20,000 rows" in stdout
    assert "bar snapshot vs spark jdbc >= 0.5x:" in stdout
    assert "ours breakdown:" in stdout
    results = document["results"]
    assert isinstance(results, list) and results[0]["rows"] == 20_000
    for measurement in results[0]["measurements"]:
        assert measurement["rows"] == 20_000, measurement
    # the throw-away folder (server, lake, logs) is removed afterwards
    assert not list(tmp_path.glob("cdc-bench-*"))


def test_snapshot_bench_measures_ours_per_executor_count_when_the_reference_fails(
    tmp_path: Path,
) -> None:
    """``--executors 1,2``: ours on a local cluster of one, then two one-core executors. A
    reference that fails (Spark's JDBC job did at 10M rows) is named with its cause, and ours is
    measured all the same; the ratios against it say "not measured"."""
    bogus = tmp_path / "not-a-driver.jar"
    bogus.write_bytes(b"")
    stdout, document = _bench(
        tmp_path,
        *("snapshot", "--rows", "20000", "--skip", "pymysql,c"),
        *("--jdbc-jar", str(bogus), "--executors", "1,2"),
    )
    assert "spark jdbc failed, not measured:" in stdout, stdout
    assert ": java.lang.ClassNotFoundException: org.mariadb.jdbc.Driver" in stdout, stdout
    assert "spark jdbc -> parquet (job)" not in stdout, stdout
    assert "target window vs spark jdbc job >= 1.5x: not measured" in stdout, stdout
    for tag, master in (
        ("1 executor", "local-cluster[1,1,1024]"),
        ("2 executors", "local-cluster[2,1,1024]"),
    ):
        assert f"ours snapshot -> delta (window) [{tag}]" in stdout, stdout
        assert f"ours [{tag}] breakdown:" in stdout, stdout
        assert master in stdout, stdout
    results = document["results"]
    assert isinstance(results, list)
    assert [m["rows"] for m in results[0]["measurements"]] == [20_000] * 4


def test_binlog_bench_prints_every_contender(tmp_path: Path) -> None:
    stdout, document = _bench(tmp_path, "binlog", "--changes", "5000", "--seed-rows", "20000")
    for label in (
        "raw BinLogStreamReader decode",
        "C decode (mariadb-binlog -v) to /dev/null",
        "ours window as a share of the C decode (the machine's limit):",
        "ours binlog -> delta (window)",
        "ours binlog -> delta (process wall)",
        "bar stream vs raw decode >= 0.7x:",
        "ours breakdown:",
    ):
        assert label in stdout, stdout
    assert "wrote 5,000 row changes" in stdout
    assert "WARNING" not in stdout, stdout
    result = document["result"]
    assert isinstance(result, dict)
    assert {m["rows"] for m in result["measurements"]} == {5000}


def test_lake_bench_prints_the_lake_before_and_after_maintenance(tmp_path: Path) -> None:
    stdout, document = _bench(
        tmp_path,
        "lake",
        "--rows",
        "10000",
        "--minutes",
        "0.12",
        "--rate",
        "40",
        "--optimize-every",
        "3s",
    )
    for label in (
        "lake benchmark: 10,000 rows, 40 statements/s for 0.12 min",
        "after the snapshot",
        "end of load",
        "after maintenance",
        "rows copied per changed row: mean",
        "MERGE time per batch: p50",
        "bar disk <= 2.0x live data after maintenance:",
    ):
        assert label in stdout, stdout
    result = document["result"]
    assert isinstance(result, dict)
    assert result["statements"] > 0 and result["merges"] > 0
    assert [p["name"] for p in result["phases"]] == [
        "after the snapshot",
        "end of load",
        "after maintenance",
    ]
    assert not list(tmp_path.glob("cdc-bench-*"))


def test_verify_bench_prints_both_rates(tmp_path: Path) -> None:
    # --no-lag: the stream-beside-an-action part (bench/stream_lag.py) is the redump smoke's
    stdout, document = _bench(tmp_path, "verify", "--rows", "5000", "--no-lag")
    for label in ("ours snapshot -> delta (window)", "verify (compare)", "verify (process wall)"):
        assert label in stdout, stdout
    assert "verify benchmark: 5,000 rows" in stdout
    assert "bar verify vs snapshot >= 0.8x:" in stdout
    assert "lag of orders_live (" not in stdout
    result = document["result"]
    assert isinstance(result, dict)
    assert [m["rows"] for m in result["measurements"]] == [5_000] * 3
    assert not list(tmp_path.glob("cdc-bench-*"))


def test_redump_bench_prints_the_lag_of_the_other_table_per_budget(tmp_path: Path) -> None:
    stdout, document = _bench(
        tmp_path,
        "redump",
        *("--rows", "8000", "--chunk-size", "2000", "--budgets", "1"),
        *("--baseline-seconds", "3", "--settle-seconds", "0", "--rate", "20"),
    )
    assert "redump benchmark: 8,000 rows of orders re-dumped while orders_live" in stdout
    assert "budget 1 s: re-dump 8,000 rows in " in stdout, stdout
    assert "bar other tables' lag p99 while re-dumping <= 2 s:" in stdout
    result = document["result"]
    assert isinstance(result, dict)
    (one,) = result["passes"]
    assert one["budget"] == 1.0 and one["batches"] >= 2 and one["during"]
    assert not list(tmp_path.glob("cdc-bench-*"))


def test_latency_bench_prints_quantiles_per_rate_and_the_bars(tmp_path: Path) -> None:
    stdout, document = _bench(tmp_path, "latency", "--rates", "50,100", "--seconds", "4")
    assert "latency benchmark: single-row INSERTs into latency, 4 s per rate" in stdout
    for rate in ("50/s: sent ", "100/s: sent "):
        assert rate in stdout, stdout
    assert "bar p50 at 1,000/s <= 0.5 s: not measured" in stdout
    assert "bar highest rate with p99 <= 3 s >= 20,000/s:" in stdout
    result = document["result"]
    assert isinstance(result, dict)
    sent = [r["sent"] for r in result["results"]]
    assert sent[0] >= 150 and sent[1] >= 300, sent
    assert all(r["arrived"] == r["sent"] and r["p99"] is not None for r in result["results"])
    assert stdout.count("cores busy: pipeline ") >= 2, stdout
    for figures in result["results"]:
        cores = figures["cores"]
        assert {"server", "bench", "jvm"} <= set(cores), cores
        assert all(0.0 <= share <= 2.5 for share in cores.values()), cores
    assert not list(tmp_path.glob("cdc-bench-*"))
