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


def _loaded_after(imports: str, packages: tuple[str, ...]) -> list[str]:
    """The modules of ``packages`` (each with its submodules) that a fresh interpreter holds
    after ``import <imports>``."""
    code = (
        f"import sys, {imports}\n"
        f"packages = {packages!r}\n"
        "print(','.join(sorted(m for m in sys.modules\n"
        "    if any(m == p or m.startswith(p + '.') for p in packages))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return [m for m in result.stdout.strip().split(",") if m]


@pytest.mark.parametrize("module", CORE)
def test_core_module_loads_without_textual_or_pyspark(module: str) -> None:
    bad = _loaded_after(module, ("textual", "pyspark", "rich"))
    assert not bad, f"{module} pulled in {bad}"


def test_source_package_is_importable_alone() -> None:
    assert not _loaded_after("cdc_console.source", ("textual", "pyspark"))


def test_planner_leaves_the_delta_writer_and_arrow_compute_unloaded() -> None:
    """The planner runs inside Spark's streaming runner for the job's whole life: what it
    imports there is paid in that process's memory and in the query's start-up. The Delta
    writer (deltalake, pyarrow's compute and Parquet modules) is the driver's and the
    executors' business; the planner touches it only for a DDL, and imports it then."""
    heavy = (
        "deltalake",
        "pyarrow.compute",
        "pyarrow.parquet",
        "cdc_console.sinks.delta",
        "cdc_console.sinks.delta_files",
    )
    bad = _loaded_after("cdc_console.spark.planner, cdc_console.spark.datasource", heavy)
    assert not bad, f"the planner pulled in {bad}"


def test_executor_tasks_leave_the_state_store_unloaded() -> None:
    """Every module the executors' tasks import is preloaded by our worker daemon and counted
    again in each worker forked from it; the state store is the driver's alone."""
    bad = _loaded_after("cdc_console.spark.tasks", ("sqlite_utils", "sqlite3", "cdc_console.state"))
    assert not bad, f"the executors' tasks pulled in {bad}"
