"""A poll that reschedules itself only once it has reported back, backing off while it fails.

A timer firing every interval would pile up polls behind a slow disk or server; here the next run
is scheduled by the handler of the previous run's message, so at most one run of each poll is in
flight, and an operator's action ("show me that table now") runs it at once or right after the
run in flight.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.message_pump import MessagePump
from textual.timer import Timer

MAX_BACKOFF_SECONDS = 5.0


def one_shot(
    owner: MessagePump, delay: float, callback: Callable[[], None], name: str = "poll"
) -> Timer:
    """Run ``callback`` once, ``delay`` seconds from now or as soon as the loop gets to it
    after that: ``set_timer`` without the skip that can drop its only tick."""
    timer = Timer(
        owner, delay, name=name, callback=partial(owner.call_next, callback), repeat=0, skip=False
    )
    timer._start()  # the step MessagePump.set_timer takes; Timer has no public start
    return timer


class PollLoop:
    def __init__(
        self,
        run: Callable[[], object],
        interval: float,
        set_timer: Callable[[float, Callable[[], None]], Timer],
        call_next: Callable[[Callable[[], None]], object],
    ) -> None:
        self._run = run
        self.interval = interval
        self._set_timer = set_timer
        self._call_next = call_next
        self._timer: Timer | None = None
        self.running = False
        self._again = False
        self.failures = 0
        self._stopped = False

    def start(self) -> None:
        if self._stopped:
            return
        self.running = True
        self._run()

    def now(self) -> None:
        """Run as soon as possible: at once, or right after the run in flight."""
        if self.running:
            self._again = True
            return
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.start()

    def finished(self, failed: bool) -> None:
        self.running = False
        self.failures = self.failures + 1 if failed else 0
        if self._again:
            self._again = False
            self._call_next(self.start)
            return
        delay = (
            min(self.interval * 2**self.failures, MAX_BACKOFF_SECONDS) if failed else self.interval
        )
        self._timer = self._set_timer(delay, self.start)

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.stop()
