"""Waiting out a source fault that passes: which errors are transient, and the backoff loop.

A restart, a failover, a full connection table or a lock wait ends by itself; paging someone to
restart the job for it is the failure this module exists to prevent. Every place that talks to
the source (planning, chunk readers, the binlog window reader, the lag probe, the start-up
preflight) runs its work through :func:`call_with_retry`: a transient error is retried with
exponential backoff and jitter, capped at :attr:`Backoff.cap`, until the fault has lasted
``[pipeline] source_outage_seconds``; then :class:`SourceUnreachableError` (exit status 3) says
so, with the last error. Anything else (a wrong password, a missing privilege, an unknown table,
a purged binlog) is raised at once, because waiting cannot fix it.

Retrying is only safe because every unit of work retried here is idempotent: a plan is
persisted only once it is complete, a chunk is read whole (low watermark, SELECT, high
watermark, backfill) before anything leaves the task, and a binlog window is immutable, so a
re-read yields the same events and the records already emitted are skipped by count.
"""

from __future__ import annotations

import logging
import random
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypedDict, TypeVar, Unpack

import pymysql

from cdc_console.core.outage import Outage
from cdc_console.errors import SourceError, SourceUnreachableError, redact
from cdc_console.units import span

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Server and client error numbers that a wait can cure.
TRANSIENT_CODES = frozenset(
    {
        1040,  # ER_CON_COUNT_ERROR: too many connections
        1053,  # ER_SERVER_SHUTDOWN: shutdown in progress
        1158,  # ER_NET_READ_ERROR
        1159,  # ER_NET_READ_INTERRUPTED
        1160,  # ER_NET_ERROR_ON_WRITE
        1161,  # ER_NET_WRITE_INTERRUPTED
        1205,  # ER_LOCK_WAIT_TIMEOUT (a chunk SELECT behind a long write lock)
        1213,  # ER_LOCK_DEADLOCK
        1290,  # ER_OPTION_PREVENTS_STATEMENT: --read-only, as during a failover
        1317,  # ER_QUERY_INTERRUPTED: the server killed the query while shutting down
        1836,  # ER_READ_ONLY_MODE
        1927,  # ER_CONNECTION_KILLED (MariaDB)
        2002,  # CR_CONNECTION_ERROR (socket)
        2003,  # CR_CONN_HOST_ERROR: connection refused
        2005,  # CR_UNKNOWN_HOST: a DNS name briefly gone during a failover
        2006,  # CR_SERVER_GONE_ERROR
        2013,  # CR_SERVER_LOST
        2055,  # CR_SERVER_LOST_EXTENDED
        4031,  # ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8: disconnected for inactivity)
    }
)


def error_code(exc: BaseException) -> int | None:
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        return code
    if exc.args and isinstance(exc.args[0], int):
        return exc.args[0]
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether waiting and trying again can cure ``exc``."""
    if isinstance(exc, SourceUnreachableError):
        return False
    if isinstance(exc, SourceError):
        return exc.transient
    if isinstance(exc, pymysql.err.InterfaceError):
        return True  # the connection was already closed under us
    if isinstance(exc, pymysql.err.MySQLError):
        return error_code(exc) in TRANSIENT_CODES
    return isinstance(exc, ConnectionError | TimeoutError | socket.timeout | EOFError)


def describe_error(exc: BaseException) -> str:
    """One line about ``exc``, without the password."""
    if isinstance(exc, SourceError):
        text = exc.message
    elif isinstance(exc, pymysql.err.MySQLError) and len(exc.args) > 1:
        text = f"({exc.args[0]}) {exc.args[1]}"
    else:
        text = str(exc) or type(exc).__name__
    return redact(" ".join(text.split()))[:300]


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with "equal jitter": half the step is fixed, half is random.

    The fixed half keeps a fleet of readers from hammering a server that is coming up; the
    random half keeps them from reconnecting in lockstep.
    """

    first: float = 0.5
    factor: float = 2.0
    cap: float = 30.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        step = min(self.cap, self.first * self.factor ** max(0, attempt - 1))
        return step / 2 + rng.uniform(0, step / 2)


class OutageObserver(Protocol):
    """Told about each wait and about the end of an outage (the state database, a test)."""

    def waiting(self, outage: Outage) -> None: ...

    def recovered(self, outage: Outage) -> None: ...


class RetryAbandoned(Exception):
    """The caller asked to stop waiting (the job is stopping); nothing was done."""


class Retrier:
    """The state of one component's wait for the source: tell it each failure and each success.

    :meth:`failed` re-raises what waiting cannot fix, raises :class:`SourceUnreachableError`
    once the fault has lasted ``outage_seconds``, and otherwise sleeps the backoff; the first
    :meth:`succeeded` after failures ends the outage. Progress resets the clock, so a server
    that flaps but lets work through is not mistaken for one that is down.
    """

    def __init__(
        self,
        what: str,
        outage_seconds: float,
        *,
        observer: OutageObserver | None = None,
        abandon: Callable[[], bool] | None = None,
        backoff: Backoff = Backoff(),
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.what = what
        self.outage_seconds = outage_seconds
        self.observer = observer
        self.abandon = abandon
        self.backoff = backoff
        self.rng = rng or random.Random()
        self.clock = clock
        self.sleep = sleep
        self.attempts = 0
        self._started = 0.0
        self._since = 0.0

    def failed(self, exc: BaseException, *, wait: bool = True) -> float:
        """Count one failure and wait the backoff (``wait=False``: return it, for a poller that
        must not block)."""
        if not is_transient(exc):
            raise exc
        now = self.clock()
        if self.attempts == 0:
            self._started, self._since = now, time.time()
        self.attempts += 1
        elapsed = now - self._started
        error = describe_error(exc)
        if elapsed >= self.outage_seconds:
            raise SourceUnreachableError(
                f"source unreachable for {elapsed:.0f} s: {error}; state kept, start again",
                "bring the source server back (or point source.host at its replacement), "
                "then 'cdc-console run' resumes from the last committed batch; raise "
                "[pipeline] source_outage_seconds to wait longer",
            ) from None
        delay = min(self.backoff.delay(self.attempts, self.rng), self.outage_seconds - elapsed)
        log.warning(
            "%s: source unreachable, reconnecting (attempt %d, next in %s) for %s: %s",
            self.what,
            self.attempts,
            span(delay),
            span(elapsed),
            error,
        )
        if self.observer is not None:
            outage = Outage(self.what, self._since, self.attempts, time.time() + delay, error)
            self.observer.waiting(outage)
        if not wait:
            return delay
        deadline = self.clock() + delay
        while True:
            if self.abandon is not None and self.abandon():
                raise RetryAbandoned()
            left = deadline - self.clock()
            if left <= 0:
                return delay
            self.sleep(min(left, 0.5))

    def succeeded(self) -> None:
        if self.attempts == 0:
            return
        duration = self.clock() - self._started
        log.info(
            "%s: source reachable again after %s (%d attempt%s)",
            self.what,
            span(duration),
            self.attempts,
            "" if self.attempts == 1 else "s",
        )
        if self.observer is not None:
            ended = time.time()
            outage = Outage(self.what, self._since, self.attempts, ended, "", ended_at=ended)
            self.observer.recovered(outage)
        self.attempts = 0


class RetryOptions(TypedDict, total=False):
    """The keyword options of :class:`Retrier`, passed through by the ``*_with_retry`` helpers."""

    observer: OutageObserver | None
    abandon: Callable[[], bool] | None
    backoff: Backoff
    rng: random.Random | None
    clock: Callable[[], float]
    sleep: Callable[[float], None]


def call_with_retry(
    work: Callable[[], T],
    *,
    what: str,
    outage_seconds: float,
    on_failure: Callable[[BaseException], None] | None = None,
    **options: Unpack[RetryOptions],
) -> T:
    """``work()``, retried on transient errors for up to ``outage_seconds`` (see
    :class:`Retrier` for ``options``); ``on_failure`` runs after each transient failure, to
    drop the broken connection."""
    retrier = Retrier(what, outage_seconds, **options)
    while True:
        try:
            result = work()
        except Exception as exc:
            if on_failure is not None and is_transient(exc):
                on_failure(exc)
            retrier.failed(exc)
            continue
        retrier.succeeded()
        return result


def iterate_with_retry(
    open_items: Callable[[], Iterator[T]],
    *,
    what: str,
    outage_seconds: float,
    **options: Unpack[RetryOptions],
) -> Iterator[T]:
    """The items of ``open_items()``, re-opened after a transient failure, each yielded once.

    For a stream that reads the same items again when re-opened (a binlog window: the binlog
    between two positions never changes): the items already yielded are skipped by count.
    """
    retrier = Retrier(what, outage_seconds, **options)
    sent = 0
    while True:
        try:
            skip = sent
            for item in open_items():
                if skip:
                    skip -= 1
                    continue
                if retrier.attempts:
                    retrier.succeeded()
                sent += 1
                yield item
            retrier.succeeded()
            return
        except Exception as exc:
            retrier.failed(exc)
