"""The job's view of the source between batches: lag samples, and outages as they happen.

The driver's loop calls :meth:`LagMonitor.sample` twice a second. It probes the server's head
(and its binlog files, for bytes behind), records a lag sample per heartbeat, and, when the
source does not answer, records the outage (``state/outages.py``) and backs off, so the state
says "reconnecting" whichever part of the job met the fault first and a down server is not
probed twice a second.
"""

from __future__ import annotations

import logging
import math
import time

from cdc_console.config import PipelineConfig
from cdc_console.core.untyped import Connection
from cdc_console.errors import redact
from cdc_console.figures import last_event_ms
from cdc_console.mysql.binlog_settings import WATCHED, read_binlog_settings, setting_ok
from cdc_console.mysql.connection import close_quietly, connect
from cdc_console.mysql.gtid import server_identity
from cdc_console.mysql.lag import binlog_distance
from cdc_console.mysql.position import binary_logs, current_position
from cdc_console.mysql.retry import Backoff, Retrier
from cdc_console.state.store import StateStore

log = logging.getLogger(__name__)

#: how often the server's binlog settings are probed: a change shows within a minute
SETTINGS_EVERY_SECONDS = 30.0


class LagMonitor:
    """Samples committed position vs head; the event lag of an idle, caught-up stream is zero."""

    def __init__(self, config: PipelineConfig, store: StateStore) -> None:
        self.config = config
        self.store = store
        self.conn: Connection | None = None
        self.last_sample = 0.0
        self.next_probe = 0.0
        # It never gives up (the readers and the planner enforce source_outage_seconds); it
        # records the outage while it lasts, whichever part of the job meets it first.
        # Its backoff stops at a heartbeat: a cheap probe, and the one that notices the end of
        # an outage when no batch is waiting for the source.
        backoff = Backoff(cap=max(1.0, config.heartbeat_seconds))
        self.retrier = Retrier("lag probe", math.inf, observer=store, backoff=backoff)
        #: the server the probe reaches (``mysql.gtid.server_identity``), and the one a query
        #: restart was last asked for, so a failover restarts the query once
        self.server: str | None = None
        self._moved_to: str | None = None
        #: when the server's binlog settings are probed next (``mysql.binlog_settings``)
        self.next_settings_check = 0.0
        self._settings_seen = False

    def _watch_settings(self) -> None:
        """Record the server's binlog settings; journal a change, loudly when it is one that
        keeps the reader from turning changes into rows."""
        self.next_settings_check = time.monotonic() + SETTINGS_EVERY_SECONDS
        try:
            values = read_binlog_settings(self.conn)
        except Exception as exc:  # a probe, not the pipeline: the next one tries again
            log.warning("probing the binlog settings failed: %s", redact(str(exc)))
            return
        for setting in WATCHED:
            value = values.get(setting.name)
            if value is None:
                continue
            ok = setting_ok(setting, value)
            expected = setting.expected if setting.expected is not None else value
            if not self.store.record_source_setting(setting.name, value, expected, ok):
                continue
            if ok and not self._settings_seen:
                continue  # the first look at a right setting is no news
            if ok:
                message = f"source setting {setting.name} is now {value!r}"
                level = "info"
            else:
                message = (
                    f"source setting {setting.name} is {value!r}, not {setting.expected!r}: "
                    f"{setting.effect}. Fix: SET GLOBAL {setting.name} = '{setting.expected}' "
                    "(and in my.cnf)"
                )
                level = "warning"
            self.store.log_event("source", message, level=level)
            log.log(logging.WARNING if not ok else logging.INFO, "%s", message)
        self._settings_seen = True

    def sample(self) -> bool:
        if time.monotonic() < self.next_probe:
            return False
        try:
            if self.conn is None or not self.conn.open:
                self.conn = connect(self.config.source)
                self.server = server_identity(self.conn)
            head = current_position(self.conn)
            logs = binary_logs(self.conn)
        except Exception as exc:
            close_quietly(self.conn)
            self.conn = None
            try:
                delay = self.retrier.failed(exc, wait=False)
            except Exception:
                log.warning("lag probe failed: %s", redact(str(exc)))
                delay = self.config.heartbeat_seconds
            self.next_probe = time.monotonic() + delay
            return False
        self.retrier.succeeded()
        if time.monotonic() >= self.next_settings_check:
            self._watch_settings()
        committed = self.store.committed_offset()
        caught_up = committed is not None and committed >= head
        now = time.time()
        if now - self.last_sample >= self.config.heartbeat_seconds:
            self.last_sample = now
            behind = binlog_distance(committed, head, logs) if committed else (None, None)
            event_lag = 0 if caught_up else self._event_lag(now)
            self.store.add_lag_sample(committed, head, behind[0], behind[1], event_lag)
        return caught_up

    def source_moved(self) -> str | None:
        """The server the source failed over to, once, when the probe reaches a server other
        than the one the state's positions refer to; None otherwise.

        A batch in flight is pinned to the old server and would wait for it until the outage
        limit: the job restarts its query instead, and the planner re-maps the batch by GTID.
        """
        recorded = self.store.source_identity()
        if self.server is None or recorded is None or self.server in (recorded, self._moved_to):
            return None
        self._moved_to = self.server
        return self.server

    def _event_lag(self, now: float) -> int | None:
        newest = last_event_ms(self.store.tables())
        return int(now * 1000 - newest) if newest is not None else None
