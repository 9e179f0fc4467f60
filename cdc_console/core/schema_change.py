"""A change the binlog reader cannot apply row by row: where, why, and what it said.

The binlog window reader reports one per table (``read_window_events``' handler), the window's
control record carries it to the driver, and the committer either holds the table at it until
the planner follows it (``schema_changes = "evolve"``) or parks the table there.

Most are a table's shape changing (a DDL). The rest are changes of the table's rows that the
binlog does not carry as full row images (:class:`ChangeCause`): a DML logged as a statement,
a row logged without all its columns, an event that cannot be decoded. The reader never drops
one of those in silence: the table is held at it, then read again online or parked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.untyped import Loaded
from cdc_console.core.values import JSONObject


class ChangeCause(StrEnum):
    """Why the reader held a table: what it met in the binlog."""

    #: a DDL, or row images whose columns are not the table's
    DDL = "ddl"
    #: DML logged as SQL text (a session's ``binlog_format`` STATEMENT or MIXED)
    STATEMENT = "statement"
    #: a row image without every column (a session's ``binlog_row_image`` MINIMAL or NOBLOB)
    PARTIAL_IMAGE = "partial-image"
    #: an event of the table whose rows or values cannot be decoded
    UNDECODABLE = "undecodable"
    #: an event that may carry changes of any table and is not decoded (a transaction
    #: payload, an incident, an event type the reader does not know)
    OPAQUE = "opaque"
    #: a change whose chunk key falls in none of the table's finished chunks, so that whether
    #: its chunk's snapshot already holds it cannot be told
    UNPLACED = "unplaced"

    @property
    def headline(self) -> str:
        """What happened to the table, as the journal says it (``<table> <headline> at ...``)."""
        return _HEADLINES[self]

    @property
    def heals(self) -> bool:
        """Whether reading the table again online makes its mirror exact (else it is parked:
        the same event would stop it again, or a person must change a setting first)."""
        return self in (ChangeCause.STATEMENT, ChangeCause.PARTIAL_IMAGE, ChangeCause.UNPLACED)


_HEADLINES = {
    ChangeCause.DDL: "changed shape",
    ChangeCause.STATEMENT: "was changed by a statement the binlog logged as SQL, not as rows",
    ChangeCause.PARTIAL_IMAGE: "had a row logged without all its columns",
    ChangeCause.UNDECODABLE: "has a binlog change that cannot be decoded",
    ChangeCause.OPAQUE: "may be changed by a binlog event that is not decoded",
    ChangeCause.UNPLACED: "had a change whose chunk key falls in none of its chunks",
}


@dataclass(frozen=True)
class SchemaChange:
    """``position``: the start of the change's transaction (nothing of the table after it was
    emitted); ``after``: where its rows in the new shape begin (the end of the DDL's
    transaction, or ``position`` itself when the change showed only in the rows' columns);
    ``cause``: what the reader met there (a DDL unless said otherwise)."""

    position: BinlogOffset
    after: BinlogOffset
    what: str
    cause: ChangeCause = ChangeCause.DDL

    def __str__(self) -> str:
        return f"{self.position} ({self.what})"

    def to_dict(self) -> JSONObject:
        data: JSONObject = {
            "position": self.position.to_dict(),
            "after": self.after.to_dict(),
            "what": self.what,
        }
        if self.cause is not ChangeCause.DDL:
            data["cause"] = self.cause.value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Loaded]) -> SchemaChange:
        return cls(
            BinlogOffset.from_dict(data["position"]),
            BinlogOffset.from_dict(data["after"]),
            str(data["what"]),
            ChangeCause(str(data.get("cause", ChangeCause.DDL.value))),
        )
