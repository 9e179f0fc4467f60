"""Where log lines go and how they look: stderr for commands, a file while a full-screen app
owns the terminal; every line passes through ``redact`` so no secret reaches a log.

Below every command (``cli.py``, the console, the demo), so none of them imports another to log.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

from cdc_console.errors import redact


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


LOG_FORMAT = "%(asctime)s %(levelname)-5s %(name)s: %(message)s"


@contextlib.contextmanager
def logging_to(path: Path) -> Iterator[None]:
    """Send all logging to ``path`` while a full-screen app owns the terminal (stderr output
    would tear the screen); a path that cannot be written silences logging instead."""
    root = logging.getLogger()
    previous = root.handlers[:]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(path, encoding="utf-8")
    except OSError:
        handler = logging.NullHandler()
    handler.setFormatter(RedactingFormatter(LOG_FORMAT, "%H:%M:%S"))
    root.handlers[:] = [handler]
    try:
        yield
    finally:
        root.handlers[:] = previous
        handler.close()


def setup_logging(verbose: bool = False) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter(LOG_FORMAT, "%H:%M:%S"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    for noisy in ("py4j", "pymysqlreplication", "deltalake"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
