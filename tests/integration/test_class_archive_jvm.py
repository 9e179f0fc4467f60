"""The driver JVM's class archive, built for real and mapped by a fresh driver JVM.

``-Xshare:on`` makes a JVM that cannot map the archive refuse to start (the job itself uses
``-Xshare:auto``), so a session that starts and runs a query proves the archive is one this
machine's JVM takes.

The archive is the one ``.ci/setup`` built on this machine with the same build module, where
there is one: building another took three minutes of a loaded CI run. Without it (the setup's
build failed, or the tests run elsewhere) the test builds one of its own.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from cdc_console.spark.class_archive import (
    DRIVER_JAVA_OPTIONS,
    archive_path,
    current_key,
    sharing_options,
    usable_archive,
)


def an_archive_built_here(tmp_path: Path) -> Path:
    """The machine's archive if the setup built it, else one built now; either way with no
    lock or partial file beside it."""
    key = current_key()
    archive = archive_path(key) if key is not None else tmp_path / "jvm" / "spark.jsa"
    if not usable_archive(archive):
        archive = tmp_path / "jvm" / "spark.jsa"
        built = subprocess.run(
            [sys.executable, "-m", "cdc_console.spark.class_archive_build", str(archive)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
        assert usable_archive(archive)
    stem = archive.name.removesuffix(".jsa")
    leftovers = sorted(p.name for p in archive.parent.iterdir() if p.name.startswith(stem))
    assert leftovers == [f"{stem}.jsa", f"{stem}.json"]  # no lock, no partial file
    return archive


def test_an_archive_built_here_is_mapped_by_a_fresh_driver_jvm(tmp_path: Path) -> None:
    archive = an_archive_built_here(tmp_path)

    options = f"{DRIVER_JAVA_OPTIONS} {sharing_options(archive)}".replace(
        "-Xshare:auto", "-Xshare:on"
    )
    script = textwrap.dedent(
        f"""
        import os, sys
        os.environ["PYSPARK_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession
        spark = (
            SparkSession.builder.master("local[1]")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.extraJavaOptions", {options!r})
            .getOrCreate()
        )
        print("rows", spark.range(5).count())
        """
    )
    mapped = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert mapped.returncode == 0, mapped.stdout[-3000:] + mapped.stderr[-3000:]
    assert "rows 5" in mapped.stdout
