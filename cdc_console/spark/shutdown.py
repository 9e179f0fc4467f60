"""Stopping the streaming query cleanly: drain the batch in flight, then stop Spark quietly.

``query.stop()`` while a micro-batch runs cancels its Spark job: the ``foreachBatch`` call fails
with ``SPARK_JOB_CANCELLED``, py4j logs it as an ERROR with a Python traceback, and the stream
thread can die of a ``StackOverflowError`` formatting the cancellation. Nothing is lost (the
batch was not committed, so the next start reads it again), but an operator reading the log of a
routine stop sees a crash. So a stop first *drains*: the state database's draining flag makes
the planner plan nothing new (``HybridSplitAssigner.next_plan``), the batch already planned
completes and commits, and only then, with no Spark job running, is the query stopped. A batch
still running after ``grace`` seconds is abandoned (still recoverable: it was never committed).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from cdc_console.core.lifecycle import BatchStatus
from cdc_console.state.store import StateStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

#: loggers that report the cancellation of an abandoned batch as errors with tracebacks
_NOISY_ON_STOP = ("py4j", "py4j.clientserver", "py4j.java_gateway")


def in_flight(store: StateStore, query: StreamingQuery) -> int | None:
    """The batch planned but not yet applied (or a trigger Spark is still running), if any."""
    last = store.last_batch()
    if last is not None and last.status != BatchStatus.APPLIED:
        return last.batch_no
    try:
        active = bool(query.status.get("isTriggerActive"))
    except Exception:  # the query already stopped, or the JVM is going away
        return None
    return (last.batch_no + 1 if last else 1) if active else None


def drain(
    store: StateStore,
    query: StreamingQuery,
    grace: float,
    *,
    tick: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Plan no new batch and wait up to ``grace`` seconds for the one in flight; True when
    nothing is left running. ``tick`` runs between checks (the job keeps its heartbeat)."""
    store.set_draining(True)
    deadline = clock() + grace
    batch = in_flight(store, query)
    if batch is not None:
        log.info("stopping: no new batches; waiting up to %.0f s for batch %d", grace, batch)
    while batch is not None:
        if query.exception() is not None or not query.isActive:
            return True
        if clock() >= deadline:
            log.warning(
                "stopping: batch %d still running after %.0f s; abandoning it (not committed: "
                "the next start reads it again)",
                batch,
                grace,
            )
            return False
        tick()
        sleep(0.2)
        batch = in_flight(store, query)
    return True


@contextlib.contextmanager
def quiet_cancellations() -> Iterator[None]:
    """Silence py4j's error reports of the cancelled callbacks while the query stops."""
    loggers = [logging.getLogger(name) for name in _NOISY_ON_STOP]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def stop_query(query: StreamingQuery, spark: SparkSession) -> None:
    """Stop the query and the session; errors of an already stopping JVM are logged, not raised."""
    with quiet_cancellations():
        for what, stop in (("streaming query", query.stop), ("Spark session", spark.stop)):
            try:
                stop()
            except Exception as exc:
                first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
                log.warning("stopping the %s: %s", what, first or type(exc).__name__)
