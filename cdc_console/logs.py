"""Where log lines go and how they look: stderr for commands, a file while a full-screen app
owns the terminal; every line passes through ``redact`` so no secret reaches a log.

Below every command (``cli.py``, the console, the demo), so none of them imports another to log.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from cdc_console.errors import redact


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


LOG_FORMAT = "%(asctime)s %(levelname)-5s %(name)s: %(message)s"

#: how the job's Spark workers learn the driver's log format (they start with bare logging)
FORMAT_ENV = "CDC_LOG_FORMAT"
PIPELINE_ENV = "CDC_LOG_PIPELINE"

_SPLIT = re.compile(r"\bsplit ([^\s:]+\.[^\s:]+):(\d+)")
_BATCH = re.compile(r"\bbatch (\d+)")
_TABLE = re.compile(r"^([A-Za-z0-9_$]+\.[A-Za-z0-9_$]+)[: ]")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO 8601, UTC), level, logger, message, pipeline, and the
    table, batch and split a line is about (given as ``extra`` or named in the narration:
    "split shop.orders:3 step 1 ...", "batch 42 applied ...", "shop.orders: caught up ...")."""

    def __init__(self, pipeline: str | None = None) -> None:
        super().__init__()
        self.pipeline = pipeline

    def format(self, record: logging.LogRecord) -> str:
        message = redact(record.getMessage())
        if record.exc_info:
            message += "\n" + redact(self.formatException(record.exc_info))
        split = getattr(record, "split", None)
        table = getattr(record, "table", None)
        batch = getattr(record, "batch", None)
        found = _SPLIT.search(message)
        if split is None and found:
            split = f"{found.group(1)}:{found.group(2)}"
            table = table or found.group(1)
        if batch is None and (numbered := _BATCH.search(message)):
            batch = int(numbered.group(1))
        if table is None and (named := _TABLE.match(message)):
            table = named.group(1)
        stamp = dt.datetime.fromtimestamp(record.created, dt.UTC)
        return json.dumps(
            {
                "time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "level": record.levelname,
                "logger": record.name,
                "message": message,
                "pipeline": self.pipeline,
                "table": table,
                "batch": batch,
                "split": split,
            },
            ensure_ascii=False,
        )


def formatter(log_format: str = "text", pipeline: str | None = None) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter(pipeline)
    return RedactingFormatter(LOG_FORMAT, "%Y-%m-%d %H:%M:%S")


def from_environment() -> logging.Formatter:
    """The formatter the driver chose (``FORMAT_ENV``), for processes it started."""
    return formatter(os.environ.get(FORMAT_ENV, "text"), os.environ.get(PIPELINE_ENV))


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
    handler.setFormatter(RedactingFormatter(LOG_FORMAT, "%Y-%m-%d %H:%M:%S"))
    root.handlers[:] = [handler]
    try:
        yield
    finally:
        root.handlers[:] = previous
        handler.close()


def setup_logging(
    verbose: bool = False, log_format: str = "text", pipeline: str | None = None
) -> None:
    """Log to stderr as ``log_format``; processes started from here (Spark's workers) follow."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(log_format, pipeline))
    os.environ[FORMAT_ENV] = log_format
    if pipeline is not None:
        os.environ[PIPELINE_ENV] = pipeline
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    for noisy in ("py4j", "pymysqlreplication", "deltalake"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
