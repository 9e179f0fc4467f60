"""The algorithm and its I/O layers import neither the UI nor Spark (harlequin's approach)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CORE = [
    "cdc_console.core.offset",
    "cdc_console.core.splits",
    "cdc_console.source.assigner",
    "cdc_console.source.committer",
    "cdc_console.source.snapshot_reader",
    "cdc_console.source.binlog_reader",
    "cdc_console.source.splitter",
    "cdc_console.mysql.checks",
    "cdc_console.state.store",
]


@pytest.mark.parametrize("module", CORE)
def test_core_module_loads_without_textual_or_pyspark(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'pyspark', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"{module} pulled in {result.stdout.strip()}"


def test_source_package_is_importable_alone() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, cdc_console.source; "
            "print(any(m.startswith(('textual', 'pyspark')) for m in sys.modules))",
        ],
        capture_output=True,
        text=True,
    )
    assert result.stdout.strip() == "False", result.stderr


def test_planner_leaves_the_delta_writer_and_arrow_compute_unloaded() -> None:
    """The planner runs inside Spark's streaming runner for the job's whole life: what it
    imports there is paid in that process's memory and in the query's start-up. The Delta
    writer (deltalake, pyarrow's compute and Parquet modules) is the driver's and the
    executors' business; the planner touches it only for a DDL, and imports it then."""
    code = (
        "import sys, cdc_console.spark.planner, cdc_console.spark.datasource\n"
        "heavy = ('deltalake', 'pyarrow.compute', 'pyarrow.parquet', 'cdc_console.sinks.delta')\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith(heavy))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"the planner pulled in {result.stdout.strip()}"


def test_executor_tasks_leave_the_state_store_unloaded() -> None:
    """Every module the executors' tasks import is preloaded by our worker daemon and counted
    again in each worker forked from it; the state store is the driver's alone."""
    code = (
        "import sys, cdc_console.spark.tasks\n"
        "heavy = ('sqlite_utils', 'sqlite3', 'cdc_console.state')\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith(heavy))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"the executors' tasks pulled in {result.stdout.strip()}"
