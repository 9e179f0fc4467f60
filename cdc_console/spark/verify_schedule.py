"""Scheduled verification: ``[verify] every = "6h"`` runs ``cdc-console verify`` from the job.

The job only decides *when*: the verification runs as a process of its own (the one a user or
the console starts, under the same lock and ``[verify] rows_per_second``), so it never shares the
driver's interpreter, never holds the applier's lock and never delays a batch; it reads the
source on its own connections and the mirror through Delta snapshots.

A verification is due ``every`` seconds after the last one the state records (any table's latest
verdict), or after the job started when none does; a verification still running is never
started twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.errors import redact
from cdc_console.state.store import StateStore
from cdc_console.units import span

log = logging.getLogger(__name__)

#: seconds between two looks at whether a verification is due
CHECK_EVERY = 10.0

Launch = Callable[[Path, Path], int]


def _launch(config_path: Path, log_path: Path) -> int:
    from cdc_console.launcher import launch_verify

    return launch_verify(config_path, log_path)


def _alive(pid: int) -> bool:
    from cdc_console.launcher import is_alive

    return is_alive(pid)


class VerifySchedule:
    def __init__(
        self,
        config: PipelineConfig,
        store: StateStore,
        *,
        clock: Callable[[], float] = time.time,
        launch: Launch = _launch,
        alive: Callable[[int], bool] = _alive,
    ) -> None:
        self.config = config
        self.store = store
        self.every = config.verify.every
        self._clock = clock
        self._launch = launch
        self._alive = alive
        self.started = clock()
        self.launched_at: float | None = None
        self.pid: int | None = None
        self._checked = 0.0

    @property
    def log_path(self) -> Path:
        return self.config.state_path.parent / "verify.log"

    def tick(self) -> int | None:
        """Start a verification if one is due; return its pid when it did."""
        if not self.every or self.config.path is None:
            return None
        now = self._clock()
        if now - self._checked < CHECK_EVERY:
            return None
        self._checked = now
        if self.pid is not None and self._alive(self.pid):
            return None
        last = max((r.verified_at for r in self.store.verifications()), default=self.started)
        if self.launched_at is not None:
            last = max(last, self.launched_at)
        if now - last < self.every:
            return None
        if not any(t.state == Lifecycle.STREAMING for t in self.store.tables()):
            return None
        try:
            self.pid = self._launch(self.config.path, self.log_path)
        except OSError as exc:
            log.warning("scheduled verification could not start: %s", redact(str(exc)))
            self.launched_at = now
            return None
        self.launched_at = now
        message = (
            f"scheduled verification started (every {span(self.every)}): pid {self.pid}, "
            f"log {self.log_path}"
        )
        log.info("%s", message)
        self.store.log_event("verify", message)
        return self.pid
