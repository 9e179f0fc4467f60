"""``cdc-console demo``: the headless smoke run end to end, and the demo's failure paths.

The end-to-end test runs the command exactly as CI and a newcomer do (a private MariaDB, a small
seed, 60 s of workload while the job snapshots and streams, then the mirror-vs-source verdict) and
checks it cleaned up after itself. The other tests need no server.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from cdc_console.cli import main
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.demo import run as demo_run
from cdc_console.demo import server as demo_server
from cdc_console.demo.verify import compare_table
from cdc_console.errors import ExitCode
from cdc_console.mysql.sandbox import SandboxError, find_server_binary
from cdc_console.values.arrow import rows_to_table, table_to_rows

DEMO_TABLES = ("shop.coupons", "shop.customers", "shop.orders", "shop.products")


def _processes_under(folder: Path) -> list[str]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if str(folder) in cmdline:
            found.append(cmdline[:200])
    return found


@pytest.mark.mysql
@pytest.mark.spark
def test_demo_headless_passes_and_cleans_up(tmp_path: Path) -> None:
    try:
        find_server_binary()
    except SandboxError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    folder = tmp_path / "demo"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cdc_console",
            "demo",
            "--headless",
            "--duration",
            "60",
            "--rows",
            "3000",
            "--rate",
            "50",
            "--dir",
            str(folder),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = result.stdout + result.stderr
    job_log = (folder / "logs" / "job.log").read_text() if (folder / "logs").exists() else ""
    assert result.returncode == 0, output[-6000:] + "\n--- job log ---\n" + job_log[-4000:]

    summary = result.stdout
    assert "cdc-console demo: PASS: every mirror equals its source, row for row" in summary
    for table in DEMO_TABLES:
        assert re.search(rf"{re.escape(table)}: [\d,]+ rows, equal", summary), summary
    statements = re.search(r"workload  ([\d,]+) statements in", summary)
    assert statements is not None and int(statements.group(1).replace(",", "")) >= 2000, summary
    assert "0 errors" in summary
    chunks = re.search(r"snapshot (\d+)/(\d+) chunks", summary)
    assert chunks is not None and chunks.group(1) == chunks.group(2) and int(chunks.group(1)) > 4

    # What the demo narrates, in order.
    narration = [
        "starting a private mariadb sandbox",
        "seeding shop with 3,000 rows",
        "created the pipeline's user 'cdc'@'127.0.0.1' with SELECT, REPLICATION SLAVE, "
        "REPLICATION CLIENT",
        "preflight passed",
        "launched the pipeline job",
        "workload stopped",
        "job caught up",
        "stopping the pipeline job",
        "stopping the sandbox",
    ]
    positions = [result.stderr.find(step) for step in narration]
    assert all(p >= 0 for p in positions), list(zip(narration, positions, strict=True))
    assert positions == sorted(positions)

    # Files a user can open, no secret printed anywhere, nothing left running.
    for table in DEMO_TABLES:
        database, name = table.split(".")
        assert (folder / "lake" / database / name / "_delta_log").is_dir()
    assert (folder / "state" / "pipeline.sqlite").exists()
    password = (folder / "cdc.secret").read_text().strip()
    assert (folder / "cdc.secret").stat().st_mode & 0o077 == 0
    assert password not in output and password not in job_log
    assert password not in (folder / "pipeline.toml").read_text()
    assert not (folder / "mysql").exists(), "the sandbox's data should be gone without --keep"
    assert _processes_under(folder) == []


def test_demo_without_a_server_binary_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_binary() -> tuple[str, str]:
        raise SandboxError("none")

    monkeypatch.setattr(demo_server, "find_server_binary", no_binary)
    folder = tmp_path / "demo"
    code = main(["demo", "--headless", "--dir", str(folder)])
    error = capsys.readouterr().err
    assert code == ExitCode.OPERATOR_ACTION
    assert "no MySQL-protocol server binary found" in error
    assert "apt-get install mariadb-server" in error
    assert "docker compose -f jobs/mysql84/compose.yaml up -d" in error
    assert "--source 127.0.0.1:3307" in error
    assert not (folder / "mysql").exists()


def test_demo_with_a_screen_but_no_console_fails_before_starting_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "cdc_console.tui.app", None)
    folder = tmp_path / "demo"
    assert main(["demo", "--dir", str(folder)]) == ExitCode.OPERATOR_ACTION
    error = capsys.readouterr().err
    assert "the console is not available" in error and "--headless" in error
    assert not folder.exists()


def test_demo_with_a_screen_needs_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo_run, "load_console", lambda: object)
    monkeypatch.setattr(sys, "stdin", open(os.devnull))  # noqa: SIM115
    folder = tmp_path / "demo"
    assert main(["demo", "--dir", str(folder)]) == ExitCode.USAGE
    assert "needs a terminal" in capsys.readouterr().err
    assert not folder.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rows", "5"], "--rows 5 is too few"),
        (["--mix", "1/2"], "--mix '1/2'"),
        (["--duration", "0"], "--duration 0 must be positive"),
        (["--rate", "-1"], "--rate -1 must be positive"),
        (["--source", "nohost"], "--source 'nohost' is not host:port"),
    ],
)
def test_demo_rejects_bad_options(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    assert main(["demo", "--headless", "--dir", str(tmp_path / "d"), *args]) == ExitCode.USAGE
    assert message in capsys.readouterr().err


def test_source_needs_the_admin_password_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CDC_DEMO_ADMIN_PASSWORD", raising=False)
    code = main(["demo", "--headless", "--dir", str(tmp_path / "d"), "--source", "127.0.0.1:1"])
    assert code == ExitCode.OPERATOR_ACTION
    assert "$CDC_DEMO_ADMIN_PASSWORD" in capsys.readouterr().err


def _schema() -> TableSchema:
    return TableSchema(
        TableId("shop", "coupons"),
        (
            ColumnInfo("code", "varchar", "varchar(24)", nullable=False),
            ColumnInfo("price", "decimal", "decimal(10,2)", numeric_precision=10, numeric_scale=2),
            ColumnInfo("note", "text", "text"),
        ),
        ("code",),
        "code",
    )


def test_compare_table_names_missing_extra_and_changed_keys() -> None:
    schema = _schema()
    source = [
        {"code": "A", "price": "1.00", "note": None},
        {"code": "B", "price": "2.00", "note": "x"},
        {"code": "C", "price": "3.00", "note": None},
    ]
    # The mirror goes through the sink's own types and back, as a Delta read would.
    mirror_rows = [
        {"code": "A", "price": "1.00", "note": None},
        {"code": "B", "price": "2.50", "note": "x"},
        {"code": "Z", "price": "9.00", "note": None},
    ]
    mirror = table_to_rows(schema, rows_to_table(schema, mirror_rows))
    result = compare_table(schema, iter(source), mirror)
    assert not result.equal
    assert (result.missing_count, result.extra_count, result.changed_count) == (1, 1, 1)
    text = result.describe()
    assert "1 row(s) missing from the mirror (code='C')" in text
    assert "1 row(s) in the mirror but not in the source (code='Z')" in text
    assert "1 row(s) differ (code='B': price)" in text

    same = table_to_rows(schema, rows_to_table(schema, source))
    equal = compare_table(schema, iter(source), same)
    assert equal.equal and equal.describe() == "shop.coupons: 3 rows, equal"
