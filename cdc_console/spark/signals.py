"""One process of the job takes the stop signal: the driver's Python. Spark's own processes
leave it to the driver.

systemd stops a service by signalling every process of its control group at once, and
``kill -TERM -<pgid>`` every process of the job's group. A driver JVM that gets SIGTERM runs its
shutdown hooks (the SparkContext stops under the driver, whose drain then fails on a refused
connection); a Python worker that gets it dies mid-task (the batch fails, the JVM logs errors).
The driver's Python alone turns SIGTERM into a clean stop: it drains the batch in flight, stops
the query, then the session, and Spark's processes end with it. So the JVMs and Python workers
Spark starts for the job are started with SIGTERM ignored: a JVM does not override a shutdown
signal that was ignored when it started (that is how ``nohup`` works on it), and the workers'
daemon (``spark.daemon``) keeps SIGTERM ignored where pyspark would handle it. SIGKILL still
ends any of them, and each exits when the driver stops Spark or dies (its pipes close).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from types import ModuleType

from cdc_console.core.untyped import PassThrough


@contextlib.contextmanager
def jvm_ignores_sigterm() -> Iterator[None]:
    """A driver JVM launched inside the block starts with SIGTERM ignored (the children it
    starts, executor JVMs and Python daemons, inherit that). The driver itself keeps its
    handler: only the child's disposition is set, between its fork and its exec."""
    import pyspark.java_gateway

    gateway: PassThrough = pyspark.java_gateway
    original = gateway.Popen

    def popen(*args: PassThrough, **kwargs: PassThrough) -> PassThrough:
        inner: Callable[[], None] | None = kwargs.get("preexec_fn")

        def preexec() -> None:
            if inner is not None:
                inner()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        kwargs["preexec_fn"] = preexec
        return original(*args, **kwargs)

    gateway.Popen = popen
    try:
        yield
    finally:
        gateway.Popen = original


class _SigtermIgnored:
    """The ``signal`` module as pyspark's worker daemon sees it: a handler or the default
    action asked for SIGTERM leaves it ignored; everything else is the real module's."""

    def __getattr__(self, name: str) -> PassThrough:
        return getattr(signal, name)

    def signal(self, signum: int, handler: PassThrough) -> PassThrough:
        if signum == signal.SIGTERM:
            handler = signal.SIG_IGN
        return signal.signal(signum, handler)


def daemon_ignores_sigterm(daemon: ModuleType) -> None:
    """Make pyspark's daemon module (and the workers it forks) leave SIGTERM ignored."""
    setattr(daemon, "signal", _SigtermIgnored())  # noqa: B010 - the module's own global
