"""The driver JVM's class archive: when one is used, and that a partial one never is.

A JVM that maps a truncated archive dies of SIGBUS, so the rules are strict: an archive is used
only when its manifest names its exact size, and a job never waits for one to be built.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from cdc_console.config import config_from_dict
from cdc_console.spark import class_archive, class_archive_build
from cdc_console.spark.class_archive import (
    DRIVER_JAVA_OPTIONS,
    ArchiveKey,
    archive_path,
    driver_java_options,
    usable_archive,
)

KEY = ArchiveKey(pyspark="4.3.0", java="/usr/lib/jvm/x/bin/java:1:2", jars="abc")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(class_archive.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(class_archive, "current_key", lambda: KEY)
    return tmp_path / "cache"


def publish(
    archive: Path, size: int, manifest_size: int | None = None, home: str | None = None
) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(b"\0" * size)
    archive.with_suffix(".json").write_text(
        json.dumps({"size": size if manifest_size is None else manifest_size, "home": home})
    )


def test_an_archive_is_used_only_when_its_manifest_names_its_size(tmp_path: Path) -> None:
    archive = tmp_path / "a.jsa"
    assert not usable_archive(archive)
    archive.write_bytes(b"\0" * 100)
    assert not usable_archive(archive)  # no manifest: a build still writing, or one that died
    publish(archive, 100, manifest_size=150)
    assert not usable_archive(archive)  # truncated since (or the manifest of another file)
    publish(archive, 100)
    assert usable_archive(archive)
    archive.with_suffix(".json").write_text("{not json")
    assert not usable_archive(archive)


def test_the_key_names_the_archive() -> None:
    other_java = ArchiveKey(KEY.pyspark, KEY.java + "x", KEY.jars)
    other_jars = ArchiveKey(KEY.pyspark, KEY.java, "abd")
    paths = {archive_path(k, Path("/c")) for k in (KEY, other_java, other_jars)}
    assert len(paths) == 3
    assert archive_path(KEY, Path("/c")).name.startswith("spark-4.3.0-")
    assert archive_path(KEY, Path("/c")).parent == Path("/c/jvm")


def test_a_usable_archive_is_mapped_by_the_driver(cache: Path, tmp_path: Path) -> None:
    archive = archive_path(KEY)
    publish(archive, 4096)
    config = config_from_dict({"source": {"tables": ["shop.*"]}}, base=tmp_path)
    options = driver_java_options(config)
    assert options.startswith(DRIVER_JAVA_OPTIONS)
    assert f"-XX:SharedArchiveFile={archive}" in options
    assert "-Xshare:auto" in options  # a JVM that cannot map it runs without, never fails


def test_a_missing_archive_is_built_in_the_background_once(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[list[str]] = []

    class FakePopen:
        pid = 4242

        def __init__(self, args: list[str], **kwargs: object) -> None:
            started.append(args)
            assert kwargs.get("start_new_session") is True
            env = kwargs.get("env")
            assert isinstance(env, dict) and "PYSPARK_GATEWAY_SECRET" not in env

    monkeypatch.setattr(class_archive.subprocess, "Popen", FakePopen)
    monkeypatch.setenv("PYSPARK_GATEWAY_SECRET", "left by a parent spark-submit")
    config = config_from_dict({"source": {"tables": ["shop.*"]}}, base=tmp_path)
    assert driver_java_options(config) == DRIVER_JAVA_OPTIONS
    assert driver_java_options(config) == DRIVER_JAVA_OPTIONS  # the first build holds the lock
    assert len(started) == 1
    assert started[0][-2:] == ["--locked", str(archive_path(KEY))]


def test_a_stale_build_lock_is_taken_over(cache: Path) -> None:
    archive = archive_path(KEY)
    assert class_archive.take_lock(archive)
    assert not class_archive.take_lock(archive)
    lock = archive.with_suffix(".building")
    old = time.time() - class_archive.STALE_BUILD_SECONDS - 5
    os.utime(lock, (old, old))
    assert class_archive.take_lock(archive)
    assert lock.read_text() == str(os.getpid())


def test_the_users_java_options_or_the_switch_leave_the_archive_out(
    cache: Path, tmp_path: Path
) -> None:
    publish(archive_path(KEY), 4096)
    theirs = config_from_dict(
        {
            "source": {"tables": ["shop.*"]},
            "spark": {"conf": {"spark.driver.extraJavaOptions": "-Xmx2g"}},
        },
        base=tmp_path,
    )
    assert driver_java_options(theirs) == ""
    off = config_from_dict(
        {"source": {"tables": ["shop.*"]}, "spark": {"class_archive": False}}, base=tmp_path
    )
    assert not off.spark.class_archive
    assert driver_java_options(off) == DRIVER_JAVA_OPTIONS


def test_without_java_there_is_nothing_to_map(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(class_archive, "current_key", lambda: None)
    config = config_from_dict({"source": {"tables": ["shop.*"]}}, base=tmp_path)
    assert driver_java_options(config) == DRIVER_JAVA_OPTIONS
    assert not (cache / "jvm").exists()


def test_a_new_archive_supersedes_the_old_ones_of_its_installation(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = archive_path(ArchiveKey("4.2.0", KEY.java, KEY.jars, "/venv/a/pyspark"))
    publish(old, 10, home="/venv/a/pyspark")
    other = archive_path(ArchiveKey("4.3.0", KEY.java, KEY.jars, "/venv/b/pyspark"))
    publish(other, 10, home="/venv/b/pyspark")
    archive = archive_path(KEY)

    def dump(partial: Path, work: Path, timeout: float) -> None:
        partial.write_bytes(b"\1" * 64)

    monkeypatch.setattr(class_archive_build, "_dump_classes", dump)
    assert class_archive.take_lock(archive)
    class_archive_build.build(archive, home="/venv/a/pyspark")
    assert usable_archive(archive) and usable_archive(other)
    assert not old.exists() and not old.with_suffix(".json").exists()
    assert not archive.with_suffix(".building").exists()


def test_a_failed_build_publishes_nothing_and_is_not_retried_by_every_job(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = archive_path(KEY)

    def dump(partial: Path, work: Path, timeout: float) -> None:
        partial.write_bytes(b"\1" * 64)  # what a JVM killed mid-dump leaves
        raise RuntimeError("the archiving JVM exited with 137")

    monkeypatch.setattr(class_archive_build, "_dump_classes", dump)
    assert class_archive.take_lock(archive)
    with pytest.raises(RuntimeError, match="137"):
        class_archive_build.build(archive)
    assert not usable_archive(archive)
    assert [p.name for p in archive.parent.iterdir()] == [archive.with_suffix(".failed").name]

    def no_build(archive: Path) -> int:
        raise AssertionError("a build started within a day of a failed one")

    monkeypatch.setattr(class_archive, "start_build", no_build)
    config = config_from_dict({"source": {"tables": ["shop.*"]}}, base=tmp_path)
    assert driver_java_options(config) == DRIVER_JAVA_OPTIONS


def test_under_spark_submit_the_running_jvm_is_left_alone(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spark-submit starts the driver JVM before our Python: no option reaches it, and a
    builder would join that JVM (pyspark follows PYSPARK_GATEWAY_PORT)."""
    publish(archive_path(KEY), 4096)
    monkeypatch.setenv(class_archive.GATEWAY_ENV, "41234")
    config = config_from_dict({"source": {"tables": ["shop.*"]}}, base=tmp_path)
    assert driver_java_options(config) == DRIVER_JAVA_OPTIONS


def test_an_unwritable_cache_costs_only_the_speed_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(class_archive.CACHE_ENV, str(blocked / "cache"))
    monkeypatch.setattr(class_archive, "current_key", lambda: KEY)
    config = config_from_dict({"source": {"tables": ["shop.*"]}}, base=tmp_path)
    assert driver_java_options(config) == DRIVER_JAVA_OPTIONS
