"""Errors a user can act on: each says what is wrong and what to do about it.

Every exception that reaches the CLI or the console derives from ``CdcError`` and carries a
``hint``: the statement to run on the server, the key to change in the config. Messages never
contain secrets; ``redact`` scrubs any that a lower layer let through.
"""

from __future__ import annotations

import re
from collections.abc import Iterable


class CdcError(Exception):
    """A failure with an actionable fix."""

    #: the process exit status when this error ends a command
    exit_code = 2

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  fix: {self.hint}" if self.hint else self.message


class ConfigError(CdcError):
    pass


class SourceError(CdcError):
    """The source server refused or cannot serve what the pipeline needs.

    ``code`` is the server's (or the client library's) error number when there was one, and
    ``transient`` says whether waiting can cure it (a restart, a failover, a lock wait): those
    are retried with backoff (``cdc_console.mysql.retry``) instead of stopping the job.
    """

    def __init__(
        self, message: str, hint: str = "", *, code: int | None = None, transient: bool = False
    ) -> None:
        super().__init__(message, hint)
        self.code = code
        self.transient = transient


class SourceUnreachableError(SourceError):
    """A transient fault that did not pass within ``[pipeline] source_outage_seconds``."""

    exit_code = 3

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message, hint)


class SchemaChangedError(SourceError):
    """DDL on a captured table mid-stream: the pipeline stops rather than write wrong rows.

    ``tables`` (the tables hit) and ``statement`` (the DDL, or what changed) let a reader that
    parks tables instead of stopping say which and why.
    """

    def __init__(
        self,
        message: str,
        hint: str = "",
        *,
        tables: tuple[object, ...] = (),
        statement: str = "",
    ) -> None:
        super().__init__(message, hint)
        self.tables = tables
        self.statement = statement


class BinlogPurgedError(SourceError):
    pass


_SECRETS: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember a secret so ``redact`` can scrub it from any text that leaves the process."""
    if value and len(value) >= 3:
        _SECRETS.add(value)


def redact(text: str, extra: Iterable[str] = ()) -> str:
    for secret in sorted({*_SECRETS, *extra}, key=len, reverse=True):
        if secret:
            text = text.replace(secret, "******")
    # a placeholder in a fix ("export CDC_SOURCE_PASSWORD=...", "<password>", "$VAR") is no secret
    return re.sub(
        r"(password\s*[=:]\s*)(?!(\.\.\.|<\w+>|\$\{?[A-Z_][A-Z0-9_]*\}?|\*{6})([\s,;)]|$))(\S+)",
        r"\1******",
        text,
        flags=re.IGNORECASE,
    )
