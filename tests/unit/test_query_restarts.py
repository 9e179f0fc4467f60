"""A Python worker that does not connect back in time restarts the query a few times, with
pauses that double; any other failure, or one too many in a row, ends the job."""

from __future__ import annotations

from cdc_console.spark.query_restarts import QueryRestarts, is_transient

WORKER = RuntimeError(
    "org.apache.spark.SparkException: Python worker failed to connect back.\n"
    "Caused by: java.net.SocketTimeoutException: Timed out while waiting for the Python worker "
    "to connect back"
)


def test_only_a_worker_that_did_not_connect_back_is_transient() -> None:
    assert is_transient(WORKER)
    assert not is_transient(RuntimeError("SinkError: mirror refused"))
    assert QueryRestarts().allow(ValueError("bug"), now=0.0) is None


def test_restarts_pause_longer_each_time_then_give_up_and_reset_after_a_quiet_spell() -> None:
    restarts = QueryRestarts(limit=3, first_pause=2.0)
    assert [restarts.allow(WORKER, now=t) for t in (0.0, 10.0, 20.0, 30.0)] == [2, 4, 8, None]
    assert restarts.allow(WORKER, now=700.0) == 2  # ten quiet minutes: the count starts again
