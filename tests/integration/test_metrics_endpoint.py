"""The job's Prometheus endpoint while it streams under a writer: the scrape agrees with
``status --json`` taken at the same moment, and ``/readyz`` turns not-ready while a table is
paused past the lag threshold, and ready again after."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from tests.conftest import SourceDb
from tests.integration.harness import (
    JobProcess,
    Writer,
    assert_no_password,
    caught_up,
    create_orders,
    last_run,
    load,
    run_cli,
    running,
    wait_for,
    write_config,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark]


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    request = urllib.request.Request(
        f"{url}/metrics", headers={"Accept": "application/openmetrics-text"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        text = answer.read().decode()
    return {
        (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "pipeline"))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def probe(url: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"{url}{path}", timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_metrics_agree_with_status_and_readyz_follows_a_paused_table(
    source_db: SourceDb, tmp_path: Path
) -> None:
    create_orders(source_db, 5_000)
    extra = "[console]\nlag_warn_seconds = 2\nlag_alert_seconds = 4\n"
    config_path = write_config(source_db, tmp_path, chunk_size=1_000, extra=extra)
    config = load(config_path)
    orders = f"{source_db.name}.orders"
    writer = Writer(source_db, "orders", list(range(1, 5_000, 97)), rate=40)
    with running(JobProcess(config_path, args=["--log-format", "json"])) as job:
        wait_for(lambda: caught_up(source_db, config), 240, "the snapshot to catch up", job)
        url = last_run(config).metrics_url
        assert url is not None and url.startswith("http://127.0.0.1:")
        writer.start()
        wait_for(lambda: probe(url, "/readyz")[0] == 200, 60, "ready", job)
        assert probe(url, "/healthz") == (200, "ok\n")

        found = scrape(url)
        done = run_cli("status", "--config", str(config_path), "--json")
        assert done.returncode == 0, done.stderr
        status = json.loads(done.stdout)
        table = next(t for t in status["tables"] if t["table"] == orders)
        labels = (("table", orders),)
        assert found[("cdc_tables", (("state", "STREAMING"),))] == 1
        assert found[("cdc_table_chunks_finished", labels)] == table["chunks_done"] == 5
        assert found[("cdc_table_rows_snapshotted", labels)] == table["rows_snapshotted"]
        applied = found[("cdc_table_events_applied_total", labels)]
        assert applied <= table["events_applied"] <= applied + 200  # status came a moment later
        lag = found[("cdc_table_lag_seconds", labels)]
        assert table["lag_seconds"] is not None and abs(lag - table["lag_seconds"]) <= 5
        assert status["event_lag_ms"] is not None
        assert abs(found[("cdc_event_lag_seconds", ())] - status["event_lag_ms"] / 1000) <= 5
        assert found[("cdc_job_start_time_seconds", ())] > 0
        wait_for(
            lambda: (
                scrape(url).get(("cdc_changes_applied_total", (("op", "update"), *labels)), 0) > 0
            ),
            60,
            "an update counted",
            job,
        )

        assert (
            run_cli("pause", "--config", str(config_path), "--table", orders, "--wait").returncode
            == 0
        )
        wait_for(lambda: probe(url, "/readyz")[0] == 503, 60, "not ready while paused", job)
        code, why = probe(url, "/readyz")
        assert code == 503 and f"{orders} lags" in why, why

        # the paused table's binlog file closes: its purge deadline starts, the same in both
        source_db.execute("SET GLOBAL binlog_expire_logs_seconds = 86400", "FLUSH BINARY LOGS")
        try:
            wait_for(
                lambda: (
                    scrape(url).get(("cdc_binlog_purge_headroom_seconds", ()), float("inf")) < 86400
                ),
                60,
                "the headroom to count down",
                job,
            )
            headroom = scrape(url)[("cdc_binlog_purge_headroom_seconds", ())]
            done = run_cli("status", "--config", str(config_path), "--json")
            purge = json.loads(done.stdout)["purge"]
        finally:
            source_db.execute("SET GLOBAL binlog_expire_logs_seconds = 0")
        assert purge["state"] == "closed" and purge["needed_by"] == orders, purge
        assert 86000 < headroom < 86400
        assert abs(purge["headroom_seconds"] - headroom) <= 10, (purge, headroom)
        assert (
            run_cli("resume", "--config", str(config_path), "--table", orders, "--wait").returncode
            == 0
        )
        wait_for(lambda: probe(url, "/readyz")[0] == 200, 120, "ready again after resume", job)
        writer.stop()
        assert not writer.errors, writer.errors
        log_text = job.log_path.read_text() if job.log_path else ""
    # one JSON object per line from our loggers, driver and Spark workers alike (Spark's JVM
    # writes its own lines in log4j's format)
    lines = [json.loads(line) for line in log_text.splitlines() if line.startswith("{")]
    assert {"time", "level", "logger", "message", "pipeline", "table", "batch", "split"} <= set(
        lines[0]
    )
    assert any(line["split"] == f"{orders}:0" for line in lines)  # an executor's narration
    assert any(line["batch"] is not None for line in lines)
    assert all(line["pipeline"] == config.name for line in lines)
    assert_no_password(log_text)
