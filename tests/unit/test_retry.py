"""Waiting out source faults: what counts as transient, the backoff, the deadline, the record.

The clock and the sleep are fakes, so these run in milliseconds; the real thing (a MariaDB
stopped under a running job) is ``tests/integration/test_source_outage.py``.
"""

from __future__ import annotations

import random
from pathlib import Path

import pymysql
import pytest

from cdc_console.core.outage import Outage
from cdc_console.errors import SourceError, SourceUnreachableError
from cdc_console.mysql.retry import (
    Backoff,
    Retrier,
    RetryAbandoned,
    call_with_retry,
    is_transient,
    iterate_with_retry,
)
from cdc_console.state.store import StateStore
from cdc_console.status import outage_note


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Recorder:
    def __init__(self) -> None:
        self.waits: list[Outage] = []
        self.ends: list[Outage] = []

    def waiting(self, outage: Outage) -> None:
        self.waits.append(outage)

    def recovered(self, outage: Outage) -> None:
        self.ends.append(outage)


def refused() -> pymysql.err.OperationalError:
    return pymysql.err.OperationalError(2003, "Can't connect to MySQL server (Connection refused)")


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (refused(), True),
        (pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query"), True),
        (pymysql.err.OperationalError(2006, "MySQL server has gone away"), True),
        (pymysql.err.OperationalError(1040, "Too many connections"), True),
        (pymysql.err.OperationalError(1205, "Lock wait timeout exceeded"), True),
        (pymysql.err.OperationalError(1213, "Deadlock found"), True),
        (pymysql.err.OperationalError(1053, "Server shutdown in progress"), True),
        (pymysql.err.InternalError(1290, "running with the --read-only option"), True),
        (pymysql.err.InterfaceError(0, ""), True),
        (ConnectionResetError(104, "Connection reset by peer"), True),
        (SourceError("cannot reach", code=2003, transient=True), True),
        (pymysql.err.OperationalError(1045, "Access denied for user"), False),
        (pymysql.err.OperationalError(1142, "SELECT command denied"), False),
        (pymysql.err.ProgrammingError(1146, "Table 'shop.nope' doesn't exist"), False),
        (SourceError("access denied", code=1045), False),
        (SourceUnreachableError("source unreachable for 600 s"), False),
        (ValueError("a bug"), False),
    ],
)
def test_only_faults_that_pass_are_transient(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient


def test_a_transient_fault_is_waited_out_with_growing_capped_jittered_delays() -> None:
    fake, seen = FakeTime(), Recorder()
    failures = iter([refused()] * 12)

    def work() -> str:
        error = next(failures, None)
        if error is not None:
            raise error
        return "planned"

    dropped: list[BaseException] = []
    result = call_with_retry(
        work,
        what="planner",
        outage_seconds=600,
        observer=seen,
        on_failure=dropped.append,
        backoff=Backoff(first=0.5, cap=30),
        rng=random.Random(1),
        clock=fake.clock,
        sleep=fake.sleep,
    )
    assert result == "planned"
    assert len(dropped) == 12, "every failure drops the broken connection"
    assert [w.attempts for w in seen.waits] == list(range(1, 13))
    steps = [min(30.0, 0.5 * 2 ** (n - 1)) for n in range(1, 13)]
    waits = _waits_per_attempt(fake.slept, 12)
    for waited, step in zip(waits, steps, strict=True):
        assert step / 2 - 1e-9 <= waited <= step + 1e-9
    assert max(waits) <= 30
    assert "Connection refused" in seen.waits[-1].last_error
    assert len(seen.ends) == 1 and seen.ends[0].attempts == 12


def _waits_per_attempt(slept: list[float], attempts: int) -> list[float]:
    """The fake sleeps in slices of at most 0.5 s; add them up per wait."""
    waits: list[float] = []
    current = 0.0
    for piece in slept:
        current += piece
        if piece < 0.5 - 1e-9:
            waits.append(current)
            current = 0.0
    if current:
        waits.append(current)
    return waits[:attempts]


def test_past_the_deadline_the_job_stops_with_exit_3_and_the_last_error() -> None:
    fake = FakeTime()

    def work() -> None:
        raise refused()

    with pytest.raises(SourceUnreachableError) as caught:
        call_with_retry(work, what="planner", outage_seconds=60, clock=fake.clock, sleep=fake.sleep)
    error = caught.value
    assert error.exit_code == 3
    assert str(error).startswith("source unreachable for 60 s: (2003) Can't connect")
    assert "state kept, start again" in str(error)
    assert "source_outage_seconds" in error.hint
    assert 60 <= fake.now < 61, "the last try is at the deadline, not a backoff step past it"


def test_a_permanent_error_fails_at_once() -> None:
    fake = FakeTime()

    def work() -> None:
        raise pymysql.err.OperationalError(1045, "Access denied for user 'cdc'")

    with pytest.raises(pymysql.err.OperationalError):
        call_with_retry(work, what="x", outage_seconds=600, clock=fake.clock, sleep=fake.sleep)
    assert fake.slept == []


def test_a_stop_ends_the_wait() -> None:
    fake = FakeTime()

    def work() -> None:
        raise refused()

    with pytest.raises(RetryAbandoned):
        call_with_retry(
            work,
            what="planner",
            outage_seconds=600,
            abandon=lambda: fake.now > 3,
            clock=fake.clock,
            sleep=fake.sleep,
        )
    assert fake.now < 5


def test_a_re_read_stream_yields_each_item_once() -> None:
    fake, seen = FakeTime(), Recorder()
    opened: list[int] = []

    def open_items() -> object:
        opened.append(1)
        attempt = len(opened)
        for item in range(1, 8):
            if (attempt == 1 and item == 4) or (attempt == 2 and item == 2):
                raise ConnectionResetError("reset")
            yield item

    items = list(
        iterate_with_retry(
            open_items,  # type: ignore[arg-type]
            what="window",
            outage_seconds=600,
            observer=seen,
            clock=fake.clock,
            sleep=fake.sleep,
        )
    )
    assert items == [1, 2, 3, 4, 5, 6, 7]
    assert len(opened) == 3
    assert [w.attempts for w in seen.waits] == [1, 2], "no progress in between: one outage"
    assert len(seen.ends) == 1


def test_a_stream_that_never_gets_further_hits_the_deadline() -> None:
    fake = FakeTime()

    def open_items() -> object:
        yield 1
        raise ConnectionResetError("reset")

    seen: list[int] = []
    with pytest.raises(SourceUnreachableError):
        for item in iterate_with_retry(
            open_items,  # type: ignore[arg-type]
            what="window",
            outage_seconds=30,
            clock=fake.clock,
            sleep=fake.sleep,
        ):
            seen.append(item)
    assert seen == [1]


def test_a_poller_gets_the_delay_instead_of_sleeping() -> None:
    fake = FakeTime()
    retrier = Retrier("lag probe", float("inf"), clock=fake.clock, sleep=fake.sleep)
    delays = [retrier.failed(refused(), wait=False) for _ in range(10)]
    assert fake.slept == []
    assert 0.25 <= delays[0] <= 0.5 and max(delays) <= 30


def test_the_state_records_an_outage_once_and_its_end(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    store.waiting(Outage("planner", 1000.0, 1, 1001.0, "(2003) Connection refused"))
    store.waiting(Outage("planner", 1000.0, 4, 1016.0, "(2003) Connection refused"))
    store.waiting(Outage("lag probe", 1002.0, 2, 1005.0, "(2003) Connection refused"))
    now = store.open_outage()
    assert now is not None and now.component == "planner" and now.attempts == 4
    assert outage_note(now, 1008.0).startswith(
        "reconnecting (attempt 4, next in 8 s) for 8.0 s: (2003) Connection refused"
    )
    store.recovered(Outage("planner", 1000.0, 5, 1030.0, "", ended_at=1030.0))
    store.close_outages("a new run started")
    assert store.open_outage() is None
    messages = [e.message for e in store.events() if e.kind == "source"]
    assert messages[0] == (
        "source unreachable (planner): (2003) Connection refused; reconnecting with backoff"
    )
    assert messages[1].startswith("source unreachable (lag probe)")
    assert messages[2] == "source reachable again (planner) after 30 s, 5 attempt(s)"
    assert messages[3] == "outage of lag probe closed: a new run started"
    store.close()
