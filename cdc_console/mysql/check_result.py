"""One preflight requirement's outcome, and the words every check uses to say it.

A failed check says the exact statement to run on the server or the config key to change; its
detail and fix are redacted, so a secret in a server's message never reaches a screen.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from cdc_console.core.values import JSONObject
from cdc_console.errors import redact

#: Error codes meaning "not allowed" (1045 can come back when a proxy re-authenticates).
ACCESS_DENIED_ERRORS = (1044, 1045, 1142, 1143, 1227)

Severity = Literal["error", "warning"]
Area = Literal["server", "privilege", "config"]


@dataclass(frozen=True)
class CheckResult:
    """One requirement, whether it holds, and (when not) what to run or change to meet it.

    ``severity`` "error" blocks the pipeline; "warning" is shown but does not. ``area`` tells a
    server-side problem (fix on the server) from a config mistake (fix the TOML file).
    """

    name: str
    ok: bool
    detail: str
    fix: str = ""
    severity: Severity = "error"
    area: Area = "server"

    @property
    def blocking(self) -> bool:
        return not self.ok and self.severity == "error"

    def to_dict(self) -> JSONObject:
        return asdict(self)


def passed(name: str, detail: str, area: Area = "server") -> CheckResult:
    return CheckResult(name, True, detail, "", "error", area)


def failed(
    name: str, detail: str, fix: str, area: Area = "server", severity: Severity = "error"
) -> CheckResult:
    return CheckResult(name, False, redact(detail), redact(fix), severity, area)


def my_cnf_line(line: str) -> str:
    return f"and add '{line}' under [mysqld] in my.cnf so it survives a restart"
