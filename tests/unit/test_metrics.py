"""The job's metrics over a canned state, parsed back with prometheus_client's own parser, and
the health answers. No server, no Spark."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from cdc_console.config import load_config
from cdc_console.core.schema import TableId
from cdc_console.metrics.server import JobMetrics, MetricsServer
from cdc_console.state.store import StateStore
from cdc_console.status import HeadProbe, collect_status, format_status
from tests.tui.canned import HEAD, SERVER_LOGS, build_state, write_config


@pytest.fixture
def canned(tmp_path: Path) -> tuple[Path, StateStore]:
    config_path = write_config(tmp_path)
    config = load_config(config_path)
    build_state(config.state_path)
    store = StateStore(config.state_path)
    yield config_path, store
    store.close()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(found: dict, name: str, **labels: str) -> float:
    return found[(name, tuple(sorted({"pipeline": "shop", **labels}.items())))]


def test_the_collector_exports_what_status_says(canned: tuple[Path, StateStore]) -> None:
    config_path, store = canned
    config = load_config(config_path)
    status = collect_status(config, store, probed=HeadProbe(HEAD, list(SERVER_LOGS)))
    metrics = JobMetrics(config, store, status=lambda: status)
    found = samples(generate_latest(metrics.registry).decode())
    for state in ("STREAMING", "SNAPSHOTTING", "PAUSED", "CATCHING_UP", "REDUMP"):
        assert value(found, "cdc_tables", state=state) == 1
    assert value(found, "cdc_tables", state="NEEDS_REDUMP") == 0
    by_name = {t.table: t for t in status.tables}
    orders = by_name["shop.orders"]
    assert value(found, "cdc_table_chunks_finished", table="shop.orders") == orders.chunks_done
    assert value(found, "cdc_table_chunks_total", table="shop.orders") == 2000
    assert (
        value(found, "cdc_table_rows_snapshotted", table="shop.orders") == orders.rows_snapshotted
    )
    assert value(found, "cdc_table_events_applied_total", table="shop.customers") == 48_211
    assert value(found, "cdc_verify_chunks", table="shop.customers", verdict="differs") == 1
    assert value(found, "cdc_verify_chunks", table="shop.customers", verdict="equal") == 11
    assert value(found, "cdc_source_outage_seconds") == 0
    assert ("cdc_build_info", ()) not in found
    assert any(name == "cdc_build_info" for name, _ in found)


def test_batches_count_mirror_rows_by_table_and_op(canned: tuple[Path, StateStore]) -> None:
    config_path, store = canned
    metrics = JobMetrics(load_config(config_path), store)
    orders = TableId("shop", "orders")
    metrics.observe_batch(0.4, 120, {orders: {"inserted": 100, "updated": 15, "deleted": 5}})
    metrics.observe_batch(0.2, 10, {orders: {"inserted": 0, "updated": 10, "deleted": 0}})
    get = metrics.registry.get_sample_value
    labels = {"pipeline": "shop", "table": "shop.orders"}
    assert get("cdc_changes_applied_total", {**labels, "op": "insert"}) == 100
    assert get("cdc_changes_applied_total", {**labels, "op": "update"}) == 25
    assert get("cdc_changes_applied_total", {**labels, "op": "delete"}) == 5
    assert get("cdc_batch_duration_seconds_count", {"pipeline": "shop"}) == 2
    assert get("cdc_batch_records_sum", {"pipeline": "shop"}) == 130


def test_the_endpoint_serves_metrics_health_and_readiness(canned: tuple[Path, StateStore]) -> None:
    config_path, store = canned
    config = load_config(config_path)
    metrics = JobMetrics(
        config,
        store,
        status=lambda: collect_status(config, store, probed=HeadProbe(HEAD, list(SERVER_LOGS))),
    )
    server = MetricsServer(metrics, "127.0.0.1", 0).start()
    try:
        with urllib.request.urlopen(f"{server.url}/healthz", timeout=10) as answer:
            assert answer.status == 200 and answer.read() == b"ok\n"
        request = urllib.request.Request(
            f"{server.url}/metrics", headers={"Accept": "application/openmetrics-text"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert "openmetrics" in answer.headers["Content-Type"]
            assert "cdc_tables" in answer.read().decode()
        # the canned payments table has been paused at binlog.000040:300 for hours
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{server.url}/readyz", timeout=30)
        assert refused.value.code == 503
        assert "shop.payments lags" in refused.value.read().decode()
        metrics._beat -= 3600  # a loop stuck for an hour
        with pytest.raises(urllib.error.HTTPError) as stuck:
            urllib.request.urlopen(f"{server.url}/healthz", timeout=10)
        assert stuck.value.code == 503
    finally:
        server.close()


def test_json_log_lines_parse_name_what_they_are_about_and_carry_no_secret() -> None:
    import json
    import logging

    from cdc_console.errors import register_secret
    from cdc_console.logs import JsonFormatter

    register_secret("s3cr3t-pw")
    out = JsonFormatter("shop")

    def line(message: str, *args: object, **extra: object) -> dict[str, object]:
        record = logging.LogRecord("cdc_console.x", logging.INFO, __file__, 1, message, args, None)
        for key, value in extra.items():
            setattr(record, key, value)
        parsed: dict[str, object] = json.loads(out.format(record))
        return parsed

    first = line("split %s step 1: low watermark %s", "shop.orders:3", "binlog.000002:4")
    assert first["split"] == "shop.orders:3" and first["table"] == "shop.orders"
    assert first["pipeline"] == "shop" and first["level"] == "INFO"
    assert str(first["time"]).endswith("Z") and str(first["time"])[:4].isdigit()
    assert line("batch 42 applied: 10 changes")["batch"] == 42
    assert line("shop.orders: caught up at binlog.000002:9")["table"] == "shop.orders"
    assert (
        line("connect failed for cdc:s3cr3t-pw@db")["message"] == "connect failed for cdc:******@db"
    )
    assert line("anything", table="shop.x", batch=7)["table"] == "shop.x"


def test_purge_headroom_is_one_figure_in_status_the_metrics_and_the_console(
    canned: tuple[Path, StateStore],
) -> None:
    from cdc_console.figures import head_history, pipeline_needs
    from cdc_console.state.store import LAG_SAMPLES_KEPT
    from cdc_console.tui.data.assess import purge_risk
    from cdc_console.tui.data.server import ServerStatus

    config_path, store = canned
    config = load_config(config_path)
    week = 7 * 86400.0
    probed = HeadProbe(HEAD, list(SERVER_LOGS), None, week, "binlog_expire_logs_seconds=604800")
    status = collect_status(config, store, probed=probed)
    assert status.purge is not None and status.purge["needed_by"] == "shop.payments"
    assert status.purge["needed"] == "binlog.000040:300"
    metrics = JobMetrics(config, store, status=lambda: status)
    found = samples(generate_latest(metrics.registry).decode())
    assert value(found, "cdc_binlog_purge_headroom_seconds") == status.purge["headroom_seconds"]
    assert "purge headroom: " + status.purge["summary"] in format_status(status)

    server = ServerStatus(probed_at=0.0, head=HEAD, logs=tuple(SERVER_LOGS), expire_seconds=week)
    history = head_history(store.lag_samples(LAG_SAMPLES_KEPT))
    console = purge_risk(
        pipeline_needs(store, store.committed_offset()),
        server,
        history,
        time.time(),
        config.console,
    )
    assert (console.needed_by, str(console.oldest_needed)) == ("shop.payments", "binlog.000040:300")
    assert max(0.0, console.time_left or 0.0) == pytest.approx(
        status.purge["headroom_seconds"], abs=5
    )

    never = collect_status(config, store, probed=HeadProbe(HEAD, list(SERVER_LOGS)))
    assert never.purge is not None and never.purge["state"] == "never"
    assert never.purge["headroom_seconds"] is None
    found = samples(
        generate_latest(JobMetrics(config, store, status=lambda: never).registry).decode()
    )
    assert value(found, "cdc_binlog_purge_headroom_seconds") == float("inf")


def test_metrics_listen_on_loopback_by_default_and_not_at_all_when_emptied(
    canned: tuple[Path, StateStore], tmp_path: Path
) -> None:
    import socket
    from dataclasses import replace

    from cdc_console.config import MetricsConfig
    from cdc_console.metrics.server import serve_metrics

    config_path, store = canned
    assert MetricsConfig().address == ("127.0.0.1", 9464)
    config = load_config(config_path)
    off = replace(config, metrics=MetricsConfig(listen=""))
    assert serve_metrics(off, store, store.start_run(1, "here", "local[1]")) is None

    with socket.socket() as taken:  # a busy port warns and the job goes on without metrics
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = replace(config, metrics=MetricsConfig(f"127.0.0.1:{taken.getsockname()[1]}"))
        assert serve_metrics(busy, store, store.start_run(2, "here", "local[1]")) is None
    assert "metrics not served: cannot listen on" in store.events(5)[-1].message

    served = replace(config, metrics=MetricsConfig("127.0.0.1:0"))
    run = store.start_run(3, "here", "local[1]")
    server = serve_metrics(served, store, run)
    assert server is not None
    try:
        assert store.runs(1)[0].metrics_url == server.url
    finally:
        server.close()


def test_the_config_chooses_json_logs_for_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import logging

    path = tmp_path / "p.toml"
    path.write_text(
        '[source]\ntables = ["shop.orders"]\n[pipeline]\nlog_format = "json"\n'
        '[state]\npath = "state.sqlite"\n'
    )

    class Stub:
        def __init__(self, config: object) -> None:
            logging.getLogger("cdc_console.spark.job").info("job would start")

        def run(self, until_caught_up: bool = False) -> int:
            return 0

    from cdc_console.logs import FORMAT_ENV, PIPELINE_ENV

    for name in (FORMAT_ENV, PIPELINE_ENV):  # run sets them for its workers: undone after
        monkeypatch.setenv(name, "")
    monkeypatch.setattr("cdc_console.spark.job.PipelineJob", Stub)
    monkeypatch.setattr("cdc_console.spark.job.install_signal_handlers", lambda job: None)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        from cdc_console.cli import main

        assert main(["run", "--config", str(path)]) == 0
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    line = capsys.readouterr().err.strip().splitlines()[-1]
    document = json.loads(line)
    assert document["message"] == "job would start" and document["pipeline"] == "p"
