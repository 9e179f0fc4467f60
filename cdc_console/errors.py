"""Errors a user can act on: each says what is wrong and what to do about it.

Every exception that reaches the CLI or the console derives from ``CdcError`` and carries a
``hint``: the statement to run on the server, the key to change in the config. Messages never
contain secrets; ``redact`` scrubs any that a lower layer let through.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import IntEnum


class ExitCode(IntEnum):
    """What a command's exit status tells a script, one meaning per code.

    Listed in ``cdc-console --help`` and the README; a script may branch on them (retry on 3,
    page a person on 5, file a bug on 70).
    """

    OK = 0
    #: ``check`` found a failing check, ``verify`` found a difference
    FINDINGS = 1
    #: a wrong option or argument (argparse's own code)
    USAGE = 2
    #: the source did not answer (for ``run``: not within ``source_outage_seconds``)
    SOURCE_UNREACHABLE = 3
    #: the config file is missing, unreadable or invalid
    CONFIG = 4
    #: the source or the state refuses; the message says what a person must do
    OPERATOR_ACTION = 5
    #: a bug: an exception nothing above expected (``EX_SOFTWARE`` of sysexits.h)
    INTERNAL = 70
    #: Ctrl-C
    INTERRUPTED = 130

    @property
    def meaning(self) -> str:
        return _MEANINGS[self]


_MEANINGS = {
    ExitCode.OK: "success (check: every check passed; verify: every mirror equals its source)",
    ExitCode.FINDINGS: "findings: check found a failing check, verify found a difference",
    ExitCode.USAGE: "usage: a wrong option or argument",
    ExitCode.SOURCE_UNREACHABLE: "source unreachable: the state is kept, start again",
    ExitCode.CONFIG: "config: the file is missing, unreadable or invalid (every problem listed)",
    ExitCode.OPERATOR_ACTION: "needs operator action: the message says the fix",
    ExitCode.INTERNAL: "internal error: a bug; the traceback is printed, please report it",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}


def exit_codes_help() -> str:
    """The exit-code table for ``--help`` epilogs."""
    return "exit codes:\n" + "\n".join(f"  {int(c):>3}  {c.meaning}" for c in ExitCode)


class CdcError(Exception):
    """A failure with an actionable fix: by default one a person must make (exit 5)."""

    #: the process exit status when this error ends a command
    exit_code: ExitCode = ExitCode.OPERATOR_ACTION

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  fix: {self.hint}" if self.hint else self.message


class UsageError(CdcError):
    """A command-line option or argument that cannot be used as given."""

    exit_code = ExitCode.USAGE


class ConfigError(CdcError):
    exit_code = ExitCode.CONFIG


class InternalError(CdcError):
    """A failure no layer expected (a bug, or a Spark failure with no error of ours in it)."""

    exit_code = ExitCode.INTERNAL


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
        if transient:
            self.exit_code = ExitCode.SOURCE_UNREACHABLE


class SourceUnreachableError(SourceError):
    """A transient fault that did not pass within ``[pipeline] source_outage_seconds``."""

    exit_code = ExitCode.SOURCE_UNREACHABLE

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
