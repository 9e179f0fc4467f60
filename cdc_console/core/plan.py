"""``BatchPlan``: what one micro-batch reads, fixed before it runs so a replay reads the same.

A plan names the snapshot splits to read (each with its own replication server id, because the
backfill opens a binlog connection) and at most one binlog window with a per-table filter. It is
persisted in the state database under its batch number before any task starts; the Spark offset
is just ``{"batch": n}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.core.splits import BinlogSplit, SnapshotSplit
from cdc_console.core.untyped import Loaded
from cdc_console.core.values import JSONObject


@dataclass(frozen=True)
class PlannedSplit:
    """A split to read in this batch. ``replace`` marks a re-dump chunk: its rows replace the
    mirror's key range (keys absent from the chunk at its high watermark are deleted) instead of
    being upserted into a range the sink has never seen."""

    split: SnapshotSplit
    server_id: int
    replace: bool = False

    def to_dict(self) -> JSONObject:
        data: JSONObject = {"split": self.split.to_dict(), "server_id": self.server_id}
        if self.replace:
            data["replace"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Loaded]) -> PlannedSplit:
        return cls(
            SnapshotSplit.from_dict(data["split"]),
            int(data["server_id"]),
            bool(data.get("replace", False)),
        )


@dataclass(frozen=True)
class BatchPlan:
    batch_no: int
    snapshot: tuple[PlannedSplit, ...] = ()
    binlog: BinlogSplit | None = None
    binlog_server_id: int = 0
    head: BinlogOffset | None = None
    #: tables whose schema change was applied in place while this batch was planned: their
    #: mirror takes the new columns in this batch, rows or not
    reshaped: tuple[TableId, ...] = ()
    #: the chunk budget its chunks were planned under while other tables streamed
    #: (``[snapshot] batch_seconds_while_streaming``); None: no budget applied
    budget_seconds: float | None = None

    @property
    def is_empty(self) -> bool:
        return not self.snapshot and self.binlog is None and not self.reshaped

    def reader_groups(self) -> list[tuple[int, tuple[PlannedSplit, ...]]]:
        """The snapshot splits per server id, in plan order: one task reads each group in turn.

        Two binlog connections with one server id make the server drop the older one, so splits
        that share an id (their backfill reads the binlog) must never run at the same time.
        """
        groups: dict[int, list[PlannedSplit]] = {}
        for planned in self.snapshot:
            groups.setdefault(planned.server_id, []).append(planned)
        return [(server_id, tuple(group)) for server_id, group in groups.items()]

    def describe(self) -> str:
        parts = [f"batch {self.batch_no}:"]
        if self.snapshot:
            parts.append(
                "splits "
                + ", ".join(
                    p.split.split_id + (" (replace)" if p.replace else "") for p in self.snapshot
                )
            )
        if self.binlog is not None:
            parts.append(str(self.binlog))
        return " ".join(parts)

    def to_dict(self) -> JSONObject:
        return {
            "batch": self.batch_no,
            "snapshot": [p.to_dict() for p in self.snapshot],
            "binlog": self.binlog.to_dict() if self.binlog else None,
            "binlog_server_id": self.binlog_server_id,
            "head": self.head.to_dict() if self.head else None,
            "reshaped": [str(t) for t in self.reshaped],
            **({"budget_seconds": self.budget_seconds} if self.budget_seconds else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Loaded]) -> BatchPlan:
        return cls(
            batch_no=int(data["batch"]),
            snapshot=tuple(PlannedSplit.from_dict(p) for p in data["snapshot"]),
            binlog=BinlogSplit.from_dict(data["binlog"]) if data.get("binlog") else None,
            binlog_server_id=int(data.get("binlog_server_id", 0)),
            head=BinlogOffset.from_dict(data["head"]) if data.get("head") else None,
            reshaped=tuple(TableId.parse(str(t)) for t in data.get("reshaped") or ()),
            budget_seconds=float(data["budget_seconds"]) if data.get("budget_seconds") else None,
        )


@dataclass(frozen=True)
class BatchTiming:
    """An applied batch: how many snapshot chunks it carried and planned-to-applied seconds."""

    chunks: int
    seconds: float


@dataclass(frozen=True)
class ChunkBatchTiming:
    """An applied batch that carried chunks, as a read's pace is measured from it."""

    chunks: int
    #: its chunks replace rows a mirror holds (a re-dump's), rather than fill an empty one
    replacing: bool
    #: the chunk budget it was planned under while other tables streamed (None: none)
    budget_seconds: float | None
    #: planning plus planned-to-applied seconds
    seconds: float
