"""A Python worker that does not connect back in time restarts the query a few times, with
pauses that double; any other failure, or one too many in a row, ends the job."""

from __future__ import annotations

import pytest

from cdc_console.spark.query_restarts import QueryRestarts, is_transient, poll

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


class FailingQuery:
    """A query that fails at its ``at``-th read (0: before the first), as Spark ends one: the
    cause of death recorded first, then the query marked terminated."""

    def __init__(self, at: int) -> None:
        self.reads = 0
        self.at = at
        self.failure: BaseException | None = None
        self.active = True
        self._step()

    def _step(self) -> None:
        if self.reads == self.at:
            self.failure = WORKER
            self.active = False
        self.reads += 1

    @property
    def isActive(self) -> bool:
        active = self.active
        self._step()
        return active

    def exception(self) -> BaseException | None:
        failure = self.failure
        self._step()
        return failure


@pytest.mark.parametrize("at", [0, 1, 2, 3])
def test_a_query_that_fails_around_the_reads_is_never_seen_ended_cleanly(at: int) -> None:
    active, failure = poll(FailingQuery(at))
    assert active or failure is WORKER, (active, failure)


def test_a_query_that_ends_without_a_failure_is_seen_ended() -> None:
    class Ended:
        isActive = False

        def exception(self) -> BaseException | None:
            return None

    assert poll(Ended()) == (False, None)
