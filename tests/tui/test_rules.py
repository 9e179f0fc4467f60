"""The console's judgements without a screen: expiry settings per flavour, purge risk, job state,
position ages, rates, the ``[console]`` config section, config discovery, log tails, split reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc_console.commands.console import discover_configs
from cdc_console.config import ConsoleConfig, config_from_dict
from cdc_console.core.head_history import HeadHistory
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.outage import Outage
from cdc_console.errors import ConfigError
from cdc_console.mysql.expiry import expiry
from cdc_console.state.store import RunRow, StateStore
from cdc_console.tui.data.assess import Launch, job_view, purge_risk
from cdc_console.tui.data.history import ProgressTracker, RateTracker
from cdc_console.tui.data.jobs import ProcessSample
from cdc_console.tui.data.logtail import last_meaningful, tail
from cdc_console.tui.data.server import ServerStatus
from cdc_console.tui.data.splits import SplitReader
from cdc_console.tui.model import JobStatus, Level
from tests.tui.canned import JOB_PID, NOW, binlog, build_state

CONSOLE = ConsoleConfig()
HOST = "here"


@pytest.mark.parametrize(
    ("variables", "seconds", "setting"),
    [
        (  # MySQL 8.0/8.4: seconds rule
            {"binlog_expire_logs_seconds": "2592000", "expire_logs_days": "0"},
            2592000.0,
            "binlog_expire_logs_seconds=2592000",
        ),
        (  # MySQL 8.0 with only the deprecated days set
            {"binlog_expire_logs_seconds": "0", "expire_logs_days": "7"},
            604800.0,
            "expire_logs_days=7",
        ),
        ({"expire_logs_days": "0.5"}, 43200.0, "expire_logs_days=0.5"),  # MariaDB 10.4
        (  # MariaDB 10.11 default: both aliases zero
            {"binlog_expire_logs_seconds": "0", "expire_logs_days": "0"},
            None,
            "binlog_expire_logs_seconds=0 (never expires)",
        ),
        (  # MySQL 8.0.29+: automatic purge switched off
            {"binlog_expire_logs_seconds": "2592000", "binlog_expire_logs_auto_purge": "OFF"},
            None,
            "binlog_expire_logs_auto_purge=OFF (never expires)",
        ),
        ({}, None, "no expiry variable on this server"),
    ],
)
def test_expiry_is_read_from_whichever_setting_the_server_has(
    variables: dict[str, str], seconds: float | None, setting: str
) -> None:
    assert expiry(variables) == (seconds, setting)


def server(head: BinlogOffset, oldest: int, expire: float | None = 86400.0) -> ServerStatus:
    logs = tuple((f"binlog.{i:06d}", 1000) for i in range(oldest, int(head.file[-6:]) + 1))
    return ServerStatus(probed_at=NOW, head=head, logs=logs, expire_seconds=expire)


def history(*points: tuple[float, BinlogOffset]) -> HeadHistory:
    found = HeadHistory()
    for ts, head in points:
        found.add(ts, head)
    return found


def test_purge_risk_counts_expiry_from_when_the_needed_file_closed() -> None:
    seen = history((NOW - 7200, binlog(5, 100)), (NOW - 3600, binlog(6, 50)))
    risk = purge_risk([("t", binlog(5, 300))], server(binlog(7, 10), 4), seen, NOW, CONSOLE)
    assert risk.time_left == pytest.approx(86400 - 3600)
    assert risk.level is Level.WARN and risk.bound == "about"
    assert risk.summary == "binlog.000005 may be purged in 23 h 00 min"
    assert risk.margin == "1 older file(s) go first"


def test_purge_risk_alerts_near_and_past_the_deadline() -> None:
    seen = history((NOW - 90000, binlog(5, 100)), (NOW - 86000, binlog(6, 50)))
    risk = purge_risk([("t", binlog(5, 300))], server(binlog(7, 10), 5), seen, NOW, CONSOLE)
    assert risk.level is Level.ALERT and risk.time_left == pytest.approx(400)
    late = history((NOW - 99000, binlog(6, 50)))
    due = purge_risk([("t", binlog(5, 300))], server(binlog(7, 10), 5), late, NOW, CONSOLE)
    assert due.level is Level.ALERT and due.bound == "at most"
    assert due.summary.startswith("due: binlog.000005 may be purged at the next rotation")


def test_purge_risk_when_purged_open_or_never_expiring() -> None:
    seen = history((NOW - 10, binlog(7, 5)))
    purged = purge_risk([("t", binlog(3, 4))], server(binlog(7, 10), 5), seen, NOW, CONSOLE)
    assert purged.level is Level.ALERT and purged.summary.startswith("PURGED: binlog.000003")
    open_file = purge_risk([("t", binlog(7, 4))], server(binlog(7, 10), 5), seen, NOW, CONSOLE)
    assert open_file.level is Level.OK and open_file.bound == "open"
    never = purge_risk([("t", binlog(6, 4))], server(binlog(7, 10), 5, None), seen, NOW, CONSOLE)
    assert never.level is Level.OK and never.summary == "binlogs never expire"
    down = purge_risk(
        [("t", binlog(6, 4))], ServerStatus(probed_at=NOW, error="down"), seen, NOW, CONSOLE
    )
    assert down.level is Level.IDLE and down.summary == "unknown: the server cannot be asked"


def run(status: str = "running", **fields: Any) -> RunRow:
    row: dict[str, Any] = {
        "run_id": 4,
        "pid": JOB_PID,
        "host": HOST,
        "master": "local[2]",
        "spark_ui": None,
        "started_at": NOW - 100,
        "heartbeat_at": NOW - 1,
        "ended_at": None,
        "status": status,
        "exit_code": None,
        "error": None,
    }
    row.update(fields)
    return RunRow(**row)


SAMPLE = ProcessSample(JOB_PID, 50.0, 10**9, 7)


def judge(runs: list[RunRow], sample: ProcessSample | None, **kwargs: object):  # type: ignore[no-untyped-def]
    defaults: dict[str, object] = {
        "launch": None,
        "stopping": False,
        "stalled": False,
        "last_error": None,
        "log_last_line": None,
        "local_host": HOST,
        "now": NOW,
        "config": CONSOLE,
    }
    defaults.update(kwargs)
    return job_view(runs, len(runs), sample, **defaults)  # type: ignore[arg-type]


def test_job_states() -> None:
    assert judge([], None).status is JobStatus.NEVER_RAN
    running = judge([run()], SAMPLE)
    assert running.status is JobStatus.RUNNING and running.cpu_percent == 50.0
    assert running.uptime == 100 and running.heartbeat_level is Level.OK
    assert judge([run()], SAMPLE, stalled=True).status is JobStatus.STALLED
    silent = judge([run(heartbeat_at=NOW - 600)], SAMPLE)
    assert silent.status is JobStatus.STALLED and "no heartbeat for 600 s" in silent.detail
    gone = judge([run()], None)
    assert gone.status is JobStatus.FAILED and "gone without recording an exit" in gone.detail
    remote = judge([run(host="elsewhere")], None)
    assert remote.status is JobStatus.REMOTE
    failed = judge([run("failed", exit_code=2, error="binlog purged")], None)
    assert failed.status is JobStatus.FAILED and failed.last_error == "binlog purged"
    stopped = judge([run("stopped", exit_code=0), run("failed")], None)
    assert stopped.status is JobStatus.STOPPED and stopped.restarts == 1
    assert judge([run()], SAMPLE, stopping=True).status is JobStatus.STOPPING


def test_a_job_waiting_out_a_source_outage_is_reconnecting_not_stalled() -> None:
    outage = Outage("planner", NOW - 35, 4, NOW + 8, "(2003) Connection refused")
    view = judge([run()], SAMPLE, stalled=True, outage=outage)
    assert view.status is JobStatus.RECONNECTING and view.level is Level.WARN
    assert view.alive
    assert view.detail == (
        "reconnecting (attempt 4, next in 8 s) for 35 s: (2003) Connection refused"
    )
    assert judge([run()], SAMPLE, stopping=True, outage=outage).status is JobStatus.STOPPING


def test_a_launched_job_is_starting_until_it_records_a_run() -> None:
    old = run("stopped", started_at=NOW - 5000)
    starting = judge([old], None, launch=Launch(777, NOW - 3, True, None))
    assert starting.status is JobStatus.STARTING and starting.pid == 777
    died = judge(
        [old],
        None,
        launch=Launch(777, NOW - 3, False, 2),
        log_last_line="cannot reach the source server",
    )
    assert died.status is JobStatus.FAILED
    assert died.detail == (
        "pid 777 exited with status 2 before it started a run: cannot reach the source server"
    )


def test_head_history_ages_positions_and_knows_when_files_closed() -> None:
    seen = history(
        (NOW - 30, binlog(5, 100)), (NOW - 20, binlog(5, 900)), (NOW - 10, binlog(6, 40))
    )
    assert seen.age(binlog(5, 500), NOW).seconds == 20
    oldest = seen.age(binlog(5, 50), NOW)
    assert oldest is not None and oldest.at_least and oldest.seconds == 30
    assert seen.age(binlog(6, 41), NOW) is None
    assert seen.closed_at("binlog.000005") == (NOW - 10, "about")
    assert seen.closed_at("binlog.000006") == (NOW - 10, "after")
    seen.add(NOW - 25, binlog(5, 500))
    assert seen.age(binlog(5, 400), NOW).seconds == 25
    seen.add(NOW, binlog(1, 4))
    assert len(seen) == 1


def test_a_position_the_server_idled_at_is_as_old_as_the_writes_after_it() -> None:
    """Applied up to where the server sat idle for a minute: the changes after it are 5 s old."""
    idle = history((NOW - 60, binlog(5, 100)), (NOW - 5, binlog(5, 200)))
    assert idle.age(binlog(5, 100), NOW).seconds == 5
    assert idle.age(binlog(5, 200), NOW) is None


def test_rates_and_progress() -> None:
    rates = RateTracker(window=10)
    assert rates.add("t", 0.0, 100) is None
    assert rates.add("t", 2.0, 300) == 100.0
    assert rates.add("t", 20.0, 300) == pytest.approx(0.0)
    progress = ProgressTracker()
    progress.observe(1, ("a",), 0.0, 100)
    progress.observe(1, ("a",), 50.0, 500)
    assert not progress.stalled(50.0, 60.0, 500)
    assert progress.stalled(61.0, 60.0, 500)
    assert not progress.stalled(61.0, 60.0, 100)
    progress.observe(1, ("b",), 62.0, 600)
    assert not progress.stalled(70.0, 60.0, 900)


def test_console_section_defaults_and_validation() -> None:
    base = {"source": {"tables": ["shop.*"]}}
    assert config_from_dict(base).console == ConsoleConfig()
    custom = config_from_dict(
        {**base, "console": {"lag_warn_seconds": 2, "lag_alert_seconds": 5, "job_log": "x.log"}},
        base=Path("/srv"),
    )
    assert custom.console.lag_alert_seconds == 5.0
    assert custom.console.job_log == Path("/srv/x.log")
    for bad, message in (
        ({"refresh_seconds": 2}, "slower than twice a second"),
        ({"lag_warn_seconds": 9, "lag_alert_seconds": 3}, "below lag_warn_seconds"),
        ({"stale_warn_seconds": -1}, "must be above 0"),
        ({"purge_alert_hours": 48}, "above purge_warn_hours"),
        ({"colour": "red"}, "unknown key console.colour"),
    ):
        with pytest.raises(ConfigError, match=message):
            config_from_dict({**base, "console": bad})


def test_configs_are_found_without_being_named(tmp_path: Path) -> None:
    assert discover_configs({"CDC_CONSOLE_CONFIG": "a.toml:b.toml"}, tmp_path) == [
        "a.toml",
        "b.toml",
    ]
    assert discover_configs({}, tmp_path) == []
    (tmp_path / ".demo").mkdir()
    (tmp_path / ".demo" / "pipeline.toml").write_text("")
    assert discover_configs({}, tmp_path) == [str(tmp_path / ".demo" / "pipeline.toml")]


def test_log_tail_and_the_line_that_explains_an_exit(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    assert tail(log) == ()
    log.write_text("".join(f"line {i}\n" for i in range(50_000)))
    lines = tail(log, 3)
    assert lines == ("line 49997", "line 49998", "line 49999")
    assert last_meaningful(("starting", "error: no binlog", "  fix: purge less")) == "no binlog"
    assert last_meaningful(("a", "b", "")) == "b"


def test_split_reader_decodes_only_changed_rows(tmp_path: Path) -> None:
    build_state(tmp_path / "state.sqlite")
    store = StateStore.open_existing(tmp_path / "state.sqlite")
    reader = SplitReader()
    first = reader.read(store, "shop.orders")
    assert len(first) == 2000 and reader.decoded == 2000
    assert first[1].key_range == "[1000, 2000)" and first[0].key_range == "(-inf, 1000)"
    assert first[-1].key_range == "[1999000, +inf)"
    with store.transaction() as conn:
        conn.execute("UPDATE splits SET rows=1 WHERE split_id='shop.orders:1500'")
    second = reader.read(store, "shop.orders")
    assert reader.decoded == 2001 and second[1500].rows == 1 and second[3] is first[3]
    store.close()
