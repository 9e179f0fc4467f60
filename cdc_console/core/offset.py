"""Binlog positions as immutable, totally ordered value objects.

A position names a point *between* events: ``(file, pos)`` is where the next event starts, as
reported by ``SHOW MASTER STATUS`` or an event's end. Resuming inside a multi-row event, or inside
a transaction, needs more than a byte offset, so a position also carries how many row events of the
transaction starting at ``pos`` and how many rows of the next row event were already consumed
(Flink CDC's ``BinlogOffset`` does the same with ``events``/``rows``).

The GTID set, when known, travels along for display and failover but never takes part in ordering:
two servers of a failover pair give different files for the same GTID.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import total_ordering

from cdc_console.core.untyped import Loaded
from cdc_console.core.values import JSONObject

_FILE_INDEX = re.compile(r"\.(\d+)$")


def binlog_file_index(file: str) -> int:
    """The numeric suffix of a binlog file name (``binlog.000042`` -> 42).

    Servers number their binlog files with a growing suffix; comparing the suffix, not the name,
    keeps ordering right when the basename changes or the suffix outgrows its zero padding.
    """
    match = _FILE_INDEX.search(file)
    if match is None:
        raise ValueError(f"not a binlog file name: {file!r} (expected '<basename>.<number>')")
    return int(match.group(1))


@total_ordering
@dataclass(frozen=True, eq=False)
class BinlogOffset:
    """A point in the server's binlog, ordered across file rotation and inside multi-row events."""

    file: str
    pos: int
    events_to_skip: int = 0
    rows_to_skip: int = 0
    gtid: str | None = field(default=None)

    def __post_init__(self) -> None:
        binlog_file_index(self.file)
        if self.pos < 0 or self.events_to_skip < 0 or self.rows_to_skip < 0:
            raise ValueError(f"negative component in binlog offset {self.to_dict()}")

    @property
    def sort_key(self) -> tuple[int, int, int, int]:
        return (binlog_file_index(self.file), self.pos, self.events_to_skip, self.rows_to_skip)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BinlogOffset):
            return NotImplemented
        return self.sort_key == other.sort_key

    def __lt__(self, other: BinlogOffset) -> bool:
        return self.sort_key < other.sort_key

    def __hash__(self) -> int:
        return hash(self.sort_key)

    def at_event_boundary(self) -> BinlogOffset:
        """The same ``(file, pos)`` with no skip counters: where a reader must reopen the stream."""
        return replace(self, events_to_skip=0, rows_to_skip=0)

    def to_dict(self) -> JSONObject:
        """Canonical dict form, used in SQLite, Spark offsets and JSON output."""
        out: JSONObject = {"file": self.file, "pos": self.pos}
        if self.events_to_skip:
            out["events"] = self.events_to_skip
        if self.rows_to_skip:
            out["rows"] = self.rows_to_skip
        if self.gtid:
            out["gtid"] = self.gtid
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Loaded]) -> BinlogOffset:
        return cls(
            file=str(data["file"]),
            pos=int(data["pos"]),
            events_to_skip=int(data.get("events", 0)),
            rows_to_skip=int(data.get("rows", 0)),
            gtid=data.get("gtid"),
        )

    def __str__(self) -> str:
        text = f"{self.file}:{self.pos}"
        if self.events_to_skip or self.rows_to_skip:
            text += f"+{self.events_to_skip}e{self.rows_to_skip}r"
        return text

    def __repr__(self) -> str:
        return f"BinlogOffset({self})"
