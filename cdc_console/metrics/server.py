"""The job's HTTP endpoint: ``/metrics`` (Prometheus text or OpenMetrics), ``/healthz``, ``/readyz``.

``/healthz`` answers 200 while the job's driver loop turns (it beats twice a second; a loop
stuck for ``STUCK_SECONDS`` is unhealthy), for a liveness probe that restarts a wedged process.
``/readyz`` answers 200 while the pipeline streams within its lag budget: no table parked, and
every table that has a position no further behind than ``[console] lag_alert_seconds``; the body
says which table is why. A table still reading its chunks does not count against it.
"""

from __future__ import annotations

import logging
import platform
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.exposition import choose_encoder

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.schema import TableId
from cdc_console.errors import redact
from cdc_console.metrics.collector import PREFIX, PipelineCollector
from cdc_console.sinks.base import SinkStats
from cdc_console.state.store import StateStore
from cdc_console.status import PipelineStatus, collect_status

log = logging.getLogger(__name__)

#: seconds without a beat of the driver loop after which the job is unhealthy
STUCK_SECONDS = 30.0
#: the sink's per-table counts, and the ``op`` label each is exported as
_OPS = {"inserted": "insert", "updated": "update", "deleted": "delete"}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


class JobMetrics:
    """What only the running job sees, the collector over the state, and the health answers."""

    def __init__(
        self,
        config: PipelineConfig,
        store: StateStore,
        status: Callable[[], PipelineStatus] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.status = status or (lambda: collect_status(config, store))
        self.registry = CollectorRegistry()
        self.registry.register(PipelineCollector(config, store, self.status))
        name = config.name
        self.batch_seconds = Histogram(
            f"{PREFIX}_batch_duration_seconds",
            "Time to apply one batch to the lake and commit it",
            ["pipeline"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
            registry=self.registry,
        ).labels(name)
        self.batch_records = Histogram(
            f"{PREFIX}_batch_records",
            "Change records and snapshot rows in one batch",
            ["pipeline"],
            buckets=(0, 10, 100, 1_000, 10_000, 100_000, 1_000_000),
            registry=self.registry,
        ).labels(name)
        self.changes = Counter(
            f"{PREFIX}_changes_applied",
            "Mirror rows inserted, updated or deleted by the job (this run)",
            ["pipeline", "table", "op"],
            registry=self.registry,
        )
        start = Gauge(
            f"{PREFIX}_job_start_time_seconds",
            "When this run of the job started",
            ["pipeline"],
            registry=self.registry,
        )
        start.labels(name).set(time.time())
        Info(
            f"{PREFIX}_build", "Versions this job runs", ["pipeline"], registry=self.registry
        ).labels(name).info(
            {
                "version": _version("cdc-console"),
                "python": platform.python_version(),
                "pyspark": _version("pyspark"),
                "deltalake": _version("deltalake"),
            }
        )
        self._beat = time.monotonic()

    def beat(self) -> None:
        """The driver loop turned."""
        self._beat = time.monotonic()

    def observe_batch(
        self, seconds: float, records: int, stats: Mapping[TableId, SinkStats]
    ) -> None:
        self.batch_seconds.observe(seconds)
        self.batch_records.observe(records)
        for table_id, table_stats in stats.items():
            for stat, op in _OPS.items():
                count = table_stats.get(stat)
                if isinstance(count, int) and count > 0:
                    self.changes.labels(self.config.name, str(table_id), op).inc(count)

    def health(self) -> tuple[bool, str]:
        stuck = time.monotonic() - self._beat
        if stuck > STUCK_SECONDS:
            return False, f"the driver loop has not turned for {stuck:.0f} s"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        healthy, why = self.health()
        if not healthy:
            return False, why
        budget = self.config.console.lag_alert_seconds
        status = self.status()
        problems = []
        for table in status.tables:
            if table.state == Lifecycle.NEEDS_REDUMP:
                problems.append(f"{table.table} is parked (NEEDS_REDUMP)")
            elif table.lag_seconds is not None and table.lag_seconds > budget:
                problems.append(f"{table.table} lags {table.lag_seconds:.0f} s > {budget:g} s")
        if problems:
            return False, "not ready: " + "; ".join(problems)
        return True, "ready"


class MetricsServer:
    """Serves ``JobMetrics`` on ``host:port`` from a daemon thread (port 0: any free port)."""

    def __init__(self, metrics: JobMetrics, host: str, port: int) -> None:
        self.metrics = metrics
        handler = _handler(metrics)
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="metrics", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> MetricsServer:
        self.thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _handler(metrics: JobMetrics) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            try:
                if path == "/metrics":
                    encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
                    self._send(200, encoder(metrics.registry), content_type)
                elif path in ("/healthz", "/readyz"):
                    ok, text = metrics.health() if path == "/healthz" else metrics.ready()
                    self._send(200 if ok else 503, f"{text}\n".encode(), "text/plain")
                else:
                    self._send(404, b"try /metrics, /healthz or /readyz\n", "text/plain")
            except Exception as exc:
                log.warning("metrics endpoint %s failed: %s", path, redact(str(exc)))
                self._send(500, f"{redact(str(exc))}\n".encode(), "text/plain")

        def _send(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Scrapes every few seconds are not news: keep them out of the job's log."""

    return Handler


def serve_metrics(config: PipelineConfig, store: StateStore, run_id: int) -> MetricsServer | None:
    """Start the endpoint on ``[metrics] listen`` and record its address with the run; None when
    metrics are off or the address is taken (the job runs on, and says so: a busy port must not
    stop a pipeline)."""
    address = config.metrics.address
    if address is None:
        return None
    try:
        server = MetricsServer(JobMetrics(config, store), *address).start()
    except OSError as exc:
        message = (
            f"metrics not served: cannot listen on {config.metrics.listen} ({exc.strerror}); "
            'set [metrics] listen to a free port, "127.0.0.1:0" for any, or "" for none'
        )
        log.warning("%s", message)
        store.log_event("job", message, level="warning")
        return None
    store.update_run(run_id, metrics_url=server.url)
    log.info("metrics on %s/metrics (health: /healthz, /readyz)", server.url)
    return server
