"""``jobs/monitoring``: the alert rules and the dashboard are valid, and every metric they name is
one the job exports (a renamed metric must not silently blind an alert)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.openmetrics.exposition import generate_latest

from cdc_console.config import ConsoleConfig, load_config
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.core.thresholds import LAG, PURGE, STALE, THRESHOLDS, Threshold
from cdc_console.metrics.server import JobMetrics
from cdc_console.state.store import StateStore
from cdc_console.status import HeadProbe, collect_status
from tests.tui.canned import HEAD, SERVER_LOGS, build_state, write_config

MONITORING = Path(__file__).resolve().parents[2] / "jobs" / "monitoring"
METRIC = re.compile(r"\b(cdc_[a-z_]+)")


def exported(tmp_path: Path) -> set[str]:
    """Every series name the job exports, over a canned state with a batch observed."""
    config_path = write_config(tmp_path)
    config = load_config(config_path)
    build_state(config.state_path)
    store = StateStore(config.state_path)
    with store.transaction() as conn:  # the watched series have a sample each
        store.count_held_change(
            "shop.orders", "statement", BinlogOffset("binlog.000041", 4), "UPDATE orders", conn
        )
    store.record_source_setting("binlog_format", "STATEMENT", "ROW", False)
    try:
        metrics = JobMetrics(
            config,
            store,
            status=lambda: collect_status(config, store, probed=HeadProbe(HEAD, list(SERVER_LOGS))),
        )
        metrics.observe_batch(0.3, 10, {TableId("shop", "orders"): {"updated": 3}})
        text = generate_latest(metrics.registry).decode()
    finally:
        store.close()
    samples = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:4] == "cdc_"}
    # a family without a sample yet (no batch committed in the canned state) is still declared
    families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    return samples | families


def named(expr: str) -> set[str]:
    return set(METRIC.findall(expr))


def test_alert_rules_are_valid_and_name_exported_metrics(tmp_path: Path) -> None:
    rules = yaml.safe_load((MONITORING / "alerts.yaml").read_text())
    alerts = [r for group in rules["groups"] for r in group["rules"]]
    assert {a["alert"] for a in alerts} >= {
        "CdcJobDown",
        "CdcStalled",
        "CdcLagHigh",
        "CdcTableParked",
        "CdcSourceUnreachable",
        "CdcMirrorDiffers",
        "CdcPurgeHeadroomLow",
        "CdcSourceSettingUnsafe",
        "CdcChangesNotLoggedAsRows",
    }
    for alert in alerts:
        assert alert["expr"] and alert["labels"]["severity"] in ("warning", "critical")
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]
    known = exported(tmp_path)
    for alert in alerts:
        assert named(alert["expr"]) <= known, (alert["alert"], named(alert["expr"]) - known)
    done = promtool("check", "rules", "alerts.yaml")
    assert done.returncode == 0, done.stdout + done.stderr


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    """Prometheus' own checker, run in ``jobs/monitoring`` (``.ci/setup`` installs it)."""
    found = shutil.which("promtool")
    assert found is not None, (
        "promtool is not installed: 'apt-get install --no-install-recommends prometheus' "
        "(.ci/setup does)"
    )
    return subprocess.run(
        [found, *args], capture_output=True, text=True, timeout=120, cwd=MONITORING
    )


def test_each_alert_fires_when_it_should_and_says_what_it_should() -> None:
    """``alerts_test.yaml``: Prometheus evaluates the rules over series shaped as the job
    exports them (a stalled commit naming its stage, a lagging table, a read that outlasts the
    purge headroom, a parked table, an unsafe setting) and compares labels and texts."""
    done = promtool("test", "rules", "alerts_test.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    tested = set(re.findall(r"alertname: (\w+)", (MONITORING / "alerts_test.yaml").read_text()))
    assert tested >= {
        "CdcStalled",
        "CdcLagHigh",
        "CdcReadOutlastsHeadroom",
        "CdcPurgeHeadroomLow",
        "CdcTableParked",
        "CdcSourceSettingUnsafe",
    }


def test_the_dashboard_is_grafana_json_over_exported_metrics(tmp_path: Path) -> None:
    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    assert dashboard["title"] == "cdc-console" and dashboard["panels"]
    known = exported(tmp_path)
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert named(target["expr"]) <= known, (panel["title"], named(target["expr"]) - known)
    scrape = yaml.safe_load((MONITORING / "prometheus.yaml").read_text())
    assert scrape["rule_files"] == ["alerts.yaml"]


@pytest.mark.parametrize("threshold", THRESHOLDS, ids=lambda t: t.rule)
def test_the_console_the_alert_rules_and_the_dashboard_use_one_threshold(
    threshold: Threshold,
) -> None:
    rules = yaml.safe_load((MONITORING / "alerts.yaml").read_text())
    (rule,) = [r for g in rules["groups"] for r in g["rules"] if r["alert"] == threshold.rule]
    compared = re.search(rf"{threshold.metric}\)?\s*([<>])\s*([\d.]+)", rule["expr"])
    assert compared is not None, rule["expr"]
    assert compared.group(1) == ("<" if threshold.falling else ">")
    assert float(compared.group(2)) == threshold.alert, rule["expr"]

    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    panels = [
        p
        for p in dashboard["panels"]
        if any(threshold.metric in t["expr"] for t in p["targets"])
        and "thresholds" in p["fieldConfig"]["defaults"]
    ]
    assert panels, f"no dashboard panel paints {threshold.metric}'s thresholds"
    for panel in panels:
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert sorted(s["value"] for s in steps if s["value"] is not None) == sorted(
            (threshold.warn, threshold.alert)
        ), panel["title"]

    console = ConsoleConfig()
    scale = 3600 if threshold is PURGE else 1
    name = {LAG.rule: "lag", STALE.rule: "stale", PURGE.rule: "purge"}[threshold.rule]
    unit = "hours" if threshold is PURGE else "seconds"
    assert getattr(console, f"{name}_warn_{unit}") * scale == threshold.warn
    assert getattr(console, f"{name}_alert_{unit}") * scale == threshold.alert
