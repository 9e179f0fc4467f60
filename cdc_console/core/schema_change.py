"""A table's shape changing in the binlog: where, and what the DDL said.

The binlog window reader reports one per table (``read_window_events``' handler), the window's
control record carries it to the driver, and the committer either holds the table at it until
the planner applies the new shape (``schema_changes = "evolve"``) or parks the table there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.untyped import Loaded
from cdc_console.core.values import JSONObject


@dataclass(frozen=True)
class SchemaChange:
    """``position``: the start of the DDL's transaction (nothing of the table after it was
    emitted); ``after``: where its rows in the new shape begin (the end of the DDL's
    transaction, or ``position`` itself when the change showed only in the rows' columns)."""

    position: BinlogOffset
    after: BinlogOffset
    what: str

    def __str__(self) -> str:
        return f"{self.position} ({self.what})"

    def to_dict(self) -> JSONObject:
        return {
            "position": self.position.to_dict(),
            "after": self.after.to_dict(),
            "what": self.what,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Loaded]) -> SchemaChange:
        return cls(
            BinlogOffset.from_dict(data["position"]),
            BinlogOffset.from_dict(data["after"]),
            str(data["what"]),
        )
