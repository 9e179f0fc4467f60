"""``PipelineCollector``: one pipeline's figures at scrape time, from the state database.

Built on ``status.collect_status`` (the figures ``cdc-console status --json`` prints), so a scrape
and a status taken at the same moment agree: same lag samples, same head probe, same
definitions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle, Verdict
from cdc_console.figures import LagStage
from cdc_console.state.store import StateStore
from cdc_console.status import PipelineStatus

PREFIX = "cdc"


class PipelineCollector(Collector):
    """Collects on every scrape; ``store`` is opened by the caller and shared (thread-safe)."""

    def __init__(
        self, config: PipelineConfig, store: StateStore, status: Callable[[], PipelineStatus]
    ) -> None:
        """``status``: ``status.collect_status`` over the same state (tests give a canned one)."""
        self.config = config
        self.store = store
        self._status = status

    def collect(self) -> Iterator[Metric]:
        name = self.config.name
        status = self._status()
        now = time.time()
        yield from _position(name, status)
        yield from _reads(name, status, now)
        yield from _stages(name, status)
        yield from _tables(name, status)
        yield from self._source_and_job(name, now)
        yield from self._verification(name)
        yield from self._watched(name)

    def _watched(self, name: str) -> Iterator[Metric]:
        """What a start-up check cannot see: the server's binlog settings as last probed, and
        the changes of each table the binlog did not carry as full rows."""
        settings = GaugeMetricFamily(
            f"{PREFIX}_source_setting_ok",
            "1 when the server's binlog setting is one every change is read under, else 0",
            labels=["pipeline", "setting", "value"],
        )
        for setting in self.store.source_settings():
            settings.add_metric([name, setting.name, setting.value], 1.0 if setting.ok else 0.0)
        yield settings
        held = CounterMetricFamily(
            f"{PREFIX}_table_held_changes",
            "Changes of the table the binlog did not carry as full rows (a DML logged as a "
            "statement, a partial row image, an undecodable event): each held the table, "
            "read again online or parked",
            labels=["pipeline", "table", "cause"],
        )
        for row in self.store.held_changes():
            held.add_metric([name, str(row.table_id), row.cause], row.count)
        yield held

    def _source_and_job(self, name: str, now: float) -> Iterator[Metric]:
        store = self.store
        outage = store.open_outage()
        current = GaugeMetricFamily(
            f"{PREFIX}_source_outage_seconds",
            "How long the source has been unreachable (0: reachable)",
            labels=["pipeline"],
        )
        current.add_metric([name], outage.duration(now) if outage is not None else 0.0)
        yield current
        reconnects = CounterMetricFamily(
            f"{PREFIX}_source_reconnect_attempts",
            "Failed attempts to reach the source, waited out with backoff",
            labels=["pipeline"],
        )
        reconnects.add_metric([name], store.reconnect_attempts())
        yield reconnects
        commit = GaugeMetricFamily(
            f"{PREFIX}_last_commit_timestamp_seconds",
            "When the last batch was committed to the lake and the state",
            labels=["pipeline"],
        )
        applied_at = store.last_applied_at()
        if applied_at is not None:
            commit.add_metric([name], applied_at)
        yield commit

    def _verification(self, name: str) -> Iterator[Metric]:
        chunks = GaugeMetricFamily(
            f"{PREFIX}_verify_chunks",
            "Chunks by the verdict of their last verification",
            labels=["pipeline", "table", "verdict"],
        )
        last = GaugeMetricFamily(
            f"{PREFIX}_verify_last_timestamp_seconds",
            "When the table's least recently verified chunk was verified",
            labels=["pipeline", "table"],
        )
        counts: dict[str, dict[Verdict, int]] = {}
        oldest: dict[str, float] = {}
        for row in self.store.verifications():
            table = str(row.table_id)
            per = counts.setdefault(table, {verdict: 0 for verdict in Verdict})
            per[row.verdict] += 1
            oldest[table] = min(oldest.get(table, row.verified_at), row.verified_at)
        for table, per in counts.items():
            for verdict, count in per.items():
                chunks.add_metric([name, table, str(verdict)], count)
            last.add_metric([name, table], oldest[table])
        yield chunks
        yield last


def _gauge(metric: str, doc: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{metric}", doc, labels=["pipeline", *labels])


def _add_bounds(family: GaugeMetricFamily, name: str, ends: object) -> None:
    """An estimate's expected value and the fast and slow ends of its range, one sample each."""
    if not isinstance(ends, dict):
        return
    for bound, key in (("expected", "seconds"), ("low", "low_seconds"), ("high", "high_seconds")):
        value = ends[key]
        if isinstance(value, int | float):
            family.add_metric([name, bound], value)


def _position(name: str, status: PipelineStatus) -> Iterator[Metric]:
    """How far behind the server the pipeline is, and how long the server keeps what it needs."""
    lag = _gauge("event_lag_seconds", "How long ago the last applied change was written")
    if status.event_lag_ms is not None:
        lag.add_metric([name], status.event_lag_ms / 1000)
    yield lag
    behind = _gauge(
        "binlog_bytes_behind", "Binlog bytes between the committed position and the head"
    )
    files = _gauge(
        "binlog_files_behind", "Binlog files between the committed position and the head"
    )
    if status.bytes_behind is not None:
        behind.add_metric([name], status.bytes_behind)
    if status.files_behind is not None:
        files.add_metric([name], status.files_behind)
    yield behind
    yield files
    headroom = _gauge(
        "binlog_purge_headroom_seconds",
        "Time before the server may expire the oldest binlog the pipeline still needs "
        "(0: purged or due at the next rotation; +Inf: nothing can expire)",
    )
    seconds = status.purge_headroom.seconds if status.purge_headroom else None
    if seconds is not None:
        headroom.add_metric([name], seconds)
    yield headroom


def _reads(name: str, status: PipelineStatus, now: float) -> Iterator[Metric]:
    """The chunk reads and the verification under way: whether they yield, and time left."""
    throttled = _gauge(
        "reads_throttled_seconds",
        "How long chunk reads (snapshot, re-dump) have yielded to a busy source "
        "([source] max_load; 0: they go on)",
    )
    since = status.throttled["since_at"] if status.throttled else None
    throttled.add_metric([name], max(0.0, now - since) if isinstance(since, float) else 0.0)
    yield throttled
    finish = _gauge(
        "reads_finish_seconds",
        "Time left to every chunk read under way (snapshot, re-dump, added table) at the pace "
        "of the chunks done: expected, and the fast and slow ends of its range",
        ("bound",),
    )
    if status.finish:
        _add_bounds(finish, name, status.finish)
    yield finish
    verifying = _gauge(
        "verify_chunks_left",
        "Chunks a verification under way has still to compare (no sample: none runs)",
    )
    verify_finish = _gauge(
        "verify_finish_seconds",
        "Time left to the verification under way at the pace of the chunks it compared: "
        "expected, and the fast and slow ends of its range",
        ("bound",),
    )
    if status.verifying:
        done, total = status.verifying["chunks_done"], status.verifying["chunks_total"]
        if isinstance(done, int) and isinstance(total, int):
            verifying.add_metric([name], max(0, total - done))
        _add_bounds(verify_finish, name, status.verifying["finish"])
    yield verifying
    yield verify_finish


def _stages(name: str, status: PipelineStatus) -> Iterator[Metric]:
    """Where the last minute went: each lag stage, and the sink's commit per table."""
    stages = _gauge(
        "lag_stage_seconds",
        "Seconds of the last minute the pipeline spent in each stage: "
        + ", ".join(f"{stage.key} ({stage})" for stage in LagStage),
        ("stage",),
    )
    for stage in LagStage:
        spent = status.stages.get(f"{stage.key}_seconds") if status.stages else None
        stages.add_metric([name, stage.key], spent if isinstance(spent, int | float) else 0.0)
    yield stages
    commits = _gauge(
        "table_commit_seconds",
        "Seconds of the last minute the sink's commit spent on each table",
        ("table",),
    )
    committed = status.stages.get("commit_by_table") if status.stages else None
    if isinstance(committed, dict):
        for committed_table, spent in committed.items():
            if isinstance(spent, int | float):
                commits.add_metric([name, committed_table], spent)
    yield commits


#: the per-table gauges, by name
PER_TABLE = {
    "table_lag_seconds": "How long ago the server wrote the position a table has applied",
    "table_chunks_finished": "Snapshot chunks of the table read so far",
    "table_chunks_total": "Snapshot chunks of the table",
    "table_rows_snapshotted": "Rows the table's snapshot has read",
    "table_finish_seconds": "Time left to the table's chunk reads, at their pace so far",
}


def _tables(name: str, status: PipelineStatus) -> Iterator[Metric]:
    """The tables by state, and each table's lag, chunks, rows and changes applied."""
    states = _gauge("tables", "Captured tables by lifecycle state", ("state",))
    counts = {state: 0 for state in Lifecycle}
    for table in status.tables:
        counts[Lifecycle(table.state)] += 1
    for state, count in counts.items():
        states.add_metric([name, str(state)], count)
    yield states
    families = {key: _gauge(key, doc, ("table",)) for key, doc in PER_TABLE.items()}
    events = CounterMetricFamily(
        f"{PREFIX}_table_events_applied",
        "Binlog row changes of the table applied to its mirror (all runs)",
        labels=["pipeline", "table"],
    )
    for table in status.tables:
        labels = [name, table.table]
        if table.lag_seconds is not None:
            families["table_lag_seconds"].add_metric(labels, table.lag_seconds)
        families["table_chunks_finished"].add_metric(labels, table.chunks_done)
        if table.chunks_total is not None:
            families["table_chunks_total"].add_metric(labels, table.chunks_total)
        families["table_rows_snapshotted"].add_metric(labels, table.rows_snapshotted)
        left = table.finish["seconds"] if table.finish else None
        if isinstance(left, int | float):
            families["table_finish_seconds"].add_metric(labels, left)
        events.add_metric(labels, table.events_applied)
    yield from families.values()
    yield events
