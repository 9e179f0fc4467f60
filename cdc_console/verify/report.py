"""What a verification found, per chunk and table, for people (``describe``) and scripts
(``to_dict``), and as the state's per-chunk rows.

A report names the first differing keys of each chunk and, for a differing row, its differing
columns with both values, truncated. Columns matching ``[verify] hide_values`` (passwords, card
numbers) are named but their values never shown, here or in the state.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field

from cdc_console.core.lifecycle import Verdict
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.core.values import CanonicalValue, JSONObject, JSONValue
from cdc_console.errors import ExitCode
from cdc_console.state.store import VerificationRow
from cdc_console.verify.compare import Difference, DifferenceKind

#: keys a report names per chunk and kind of difference
SAMPLE_KEYS = 5
_VALUE_CHARS = 40
HIDDEN = "(hidden)"

#: exit codes of ``cdc-console verify``, in the CLI's one scheme (``errors.ExitCode``): a table
#: that could not be verified says why and needs a person, like any other refusal
EXIT_EQUAL = ExitCode.OK
EXIT_DIFFERS = ExitCode.FINDINGS
EXIT_ERROR = ExitCode.OPERATOR_ACTION


def hidden_columns(table_id: TableId, columns: list[str], patterns: tuple[str, ...]) -> set[str]:
    """The columns of ``table_id`` whose values match a ``hide_values`` pattern."""
    return {
        c
        for c in columns
        if any(fnmatch.fnmatchcase(f"{table_id}.{c}".lower(), p.lower()) for p in patterns)
    }


def shown_value(value: CanonicalValue) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


@dataclass
class ChunkResult:
    """One chunk's verdict; ``differences`` holds every key still differing after the re-check."""

    table_id: TableId
    split_no: int
    range: str
    verdict: Verdict
    rows: int = 0
    differences: list[Difference] = field(default_factory=list)
    position: BinlogOffset | None = None
    seconds: float = 0.0
    reason: str = ""
    verified_at: float = 0.0

    def count(self, kind: DifferenceKind) -> int:
        return sum(1 for d in self.differences if d.kind == kind)

    def detail(self, hide: set[str]) -> JSONObject:
        """The first keys of each kind and, for differing rows, the columns and values."""
        out: JSONObject = {}
        for kind in DifferenceKind:
            found = [d for d in self.differences if d.kind == kind][:SAMPLE_KEYS]
            if not found:
                continue
            if kind == DifferenceKind.DIFFERS:
                out[str(kind)] = [
                    {
                        "key": list(d.key),
                        "columns": {
                            name: (HIDDEN if name in hide else [shown_value(s), shown_value(m)])
                            for name, (s, m) in d.columns.items()
                        },
                    }
                    for d in found
                ]
            else:
                out[str(kind)] = [list(d.key) for d in found]
        if self.reason:
            out["reason"] = self.reason
        return out

    def state_row(self, hide: set[str]) -> VerificationRow:
        return VerificationRow(
            table_id=self.table_id,
            split_no=self.split_no,
            verified_at=self.verified_at,
            position=self.position,
            verdict=self.verdict,
            rows=self.rows,
            missing=self.count(DifferenceKind.MISSING),
            extra=self.count(DifferenceKind.EXTRA),
            differing=self.count(DifferenceKind.DIFFERS),
            detail=self.detail(hide),
        )


@dataclass
class TableResult:
    table_id: TableId
    key_columns: tuple[str, ...] = ()
    chunks: list[ChunkResult] = field(default_factory=list)
    #: why the table was not verified at all (a paused or snapshotting table)
    skipped: str = ""
    error: str = ""
    hide: set[str] = field(default_factory=set)

    @property
    def verdict(self) -> Verdict:
        if self.error or any(c.verdict == Verdict.ERROR for c in self.chunks):
            return Verdict.ERROR
        if any(c.verdict == Verdict.DIFFERS for c in self.chunks):
            return Verdict.DIFFERS
        if self.skipped:
            return Verdict.SKIPPED
        return Verdict.EQUAL

    @property
    def rows(self) -> int:
        return sum(c.rows for c in self.chunks)

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.chunks)

    def differing_chunks(self) -> list[ChunkResult]:
        return [c for c in self.chunks if c.verdict == Verdict.DIFFERS]

    def describe(self) -> list[str]:
        if self.error:
            return [f"{self.table_id}: error: {self.error}"]
        if self.skipped:
            return [f"{self.table_id}: skipped: {self.skipped}"]
        rate = self.rows / self.seconds if self.seconds > 0 else 0.0
        head = (
            f"{self.table_id}: {self.verdict}: {len(self.chunks)} chunk(s), {self.rows:,} rows "
            f"in {self.seconds:.1f} s ({rate:,.0f} rows/s)"
        )
        lines = [head]
        for chunk in self.chunks:
            if chunk.verdict == Verdict.EQUAL:
                continue
            lines.append(f"  chunk {chunk.split_no} {chunk.range}: {self.chunk_summary(chunk)}")
        return lines

    def chunk_summary(self, chunk: ChunkResult) -> str:
        """What differs in one chunk: counts by kind, the first keys, the differing columns."""
        if chunk.verdict != Verdict.DIFFERS:
            return f"{chunk.verdict}: {chunk.reason}"
        parts = []
        for kind, words in (
            (DifferenceKind.MISSING, "missing from the mirror"),
            (DifferenceKind.EXTRA, "in the mirror only"),
            (DifferenceKind.DIFFERS, "differ"),
        ):
            found = [d for d in chunk.differences if d.kind == kind]
            if not found:
                continue
            shown = "; ".join(self._difference(d) for d in found[:SAMPLE_KEYS])
            more = len(found) - SAMPLE_KEYS
            parts.append(
                f"{len(found)} row(s) {words} ({shown}"
                + (f"; and {more} more)" if more > 0 else ")")
            )
        return "; ".join(parts)

    def _difference(self, difference: Difference) -> str:
        key = ", ".join(
            f"{name}={shown_value(value)}"
            for name, value in zip(self.key_columns, difference.key, strict=False)
        )
        if not difference.columns:
            return key
        columns = ", ".join(
            f"{name} {HIDDEN}"
            if name in self.hide
            else f"{name} {shown_value(s)} != {shown_value(m)}"
            for name, (s, m) in difference.columns.items()
        )
        return f"{key}: {columns}"

    def journal_entry(self) -> tuple[str, str]:
        """The line the Events screen shows for this verification, and its level: a
        difference is an error (f on Events repairs it), a verification that failed a
        warning."""
        verdict = self.verdict
        if verdict == Verdict.EQUAL:
            message = (
                f"verify {self.table_id}: equal ({self.rows:,} rows, {len(self.chunks)} chunks)"
            )
        elif verdict == Verdict.DIFFERS:
            chunks = "; ".join(
                f"chunk {c.split_no} {c.range}: {self.chunk_summary(c)}"
                for c in self.differing_chunks()
            )
            message = f"verify {self.table_id}: {chunks} (f on Events repairs)"
        else:
            message = "verify " + " ".join(self.describe())
        level = {Verdict.DIFFERS: "error", Verdict.ERROR: "warning"}.get(verdict, "info")
        return message, level


@dataclass
class VerifyReport:
    tables: list[TableResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def exit_code(self) -> ExitCode:
        verdicts = {t.verdict for t in self.tables}
        if Verdict.ERROR in verdicts:
            return EXIT_ERROR
        if Verdict.DIFFERS in verdicts:
            return EXIT_DIFFERS
        return EXIT_EQUAL

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)

    def describe(self) -> str:
        if not self.tables:
            return "no captured tables to verify"
        lines = [line for t in self.tables for line in t.describe()]
        rate = self.rows / self.seconds if self.seconds > 0 else 0.0
        lines.append(
            f"verified {self.rows:,} rows in {self.seconds:.1f} s ({rate:,.0f} rows/s): "
            + {EXIT_EQUAL: "equal", EXIT_DIFFERS: "mirrors differ", EXIT_ERROR: "errors"}[
                self.exit_code
            ]
        )
        return "\n".join(lines)

    def to_dict(self) -> JSONObject:
        tables: list[JSONValue] = []
        for t in self.tables:
            chunks: list[JSONValue] = [
                {
                    "chunk": c.split_no,
                    "range": c.range,
                    "verdict": str(c.verdict),
                    "rows": c.rows,
                    "missing": c.count(DifferenceKind.MISSING),
                    "extra": c.count(DifferenceKind.EXTRA),
                    "differing": c.count(DifferenceKind.DIFFERS),
                    "position": c.position.to_dict() if c.position else None,
                    "seconds": round(c.seconds, 3),
                    "detail": c.detail(t.hide),
                }
                for c in t.chunks
            ]
            tables.append(
                {
                    "table": str(t.table_id),
                    "verdict": str(t.verdict),
                    "rows": t.rows,
                    "seconds": round(t.seconds, 3),
                    "skipped": t.skipped or None,
                    "error": t.error or None,
                    "chunks": chunks,
                }
            )
        return {
            "verdict": {EXIT_EQUAL: "equal", EXIT_DIFFERS: "differs", EXIT_ERROR: "error"}[
                self.exit_code
            ],
            "rows": self.rows,
            "seconds": round(self.seconds, 3),
            "rows_per_second": round(self.rows / self.seconds) if self.seconds > 0 else None,
            "tables": tables,
        }
