"""The units of work: snapshot splits (one chunk each) and the binlog split.

Their ``__str__`` is what tests assert on, as Flink CDC's assigner tests do:
``"shop.orders [1000, 2000)"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cdc_console.core.chunk import ChunkRange
from cdc_console.core.keycodec import decode_key, encode_key
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.core.untyped import Loaded
from cdc_console.core.values import JSONObject


@dataclass(frozen=True)
class SnapshotSplit:
    """One chunk of one table, read once with a low and a high watermark around its SELECT."""

    table_id: TableId
    split_no: int
    chunk_key: str
    range: ChunkRange

    @property
    def split_id(self) -> str:
        return f"{self.table_id}:{self.split_no}"

    def __str__(self) -> str:
        return f"{self.table_id} {self.range}"

    def to_dict(self) -> JSONObject:
        return {
            "table": str(self.table_id),
            "split_no": self.split_no,
            "chunk_key": self.chunk_key,
            "start": encode_key(self.range.start),
            "end": encode_key(self.range.end),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Loaded]) -> SnapshotSplit:
        return cls(
            table_id=TableId.parse(data["table"]),
            split_no=int(data["split_no"]),
            chunk_key=str(data["chunk_key"]),
            range=ChunkRange(decode_key(data["start"]), decode_key(data["end"])),
        )


@dataclass(frozen=True)
class FinishedSnapshotSplitInfo:
    """What the binlog reader needs of a finished chunk: its key range and its high watermark."""

    split: SnapshotSplit
    high_watermark: BinlogOffset

    def __str__(self) -> str:
        return f"{self.split} hw={self.high_watermark}"

    def to_dict(self) -> JSONObject:
        return {"split": self.split.to_dict(), "hw": self.high_watermark.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Loaded]) -> FinishedSnapshotSplitInfo:
        return cls(SnapshotSplit.from_dict(data["split"]), BinlogOffset.from_dict(data["hw"]))


@dataclass(frozen=True)
class TableStreamFilter:
    """How the binlog reader treats one table inside a binlog window.

    Events before ``resume_from`` were already delivered (or are covered by the snapshot) and
    are skipped; later events are emitted when ``should_emit`` says the owning chunk's high
    watermark lies behind them. An empty ``finished_splits`` means the table streams freely.
    """

    table_id: TableId
    resume_from: BinlogOffset | None = None
    finished_splits: tuple[FinishedSnapshotSplitInfo, ...] = ()
    #: the ranges of its chunks being read (again) meanwhile: a change there is theirs
    pending_ranges: tuple[ChunkRange, ...] = ()

    @property
    def max_high_watermark(self) -> BinlogOffset | None:
        return max((f.high_watermark for f in self.finished_splits), default=None)

    def to_dict(self) -> JSONObject:
        return {
            "table": str(self.table_id),
            "resume_from": self.resume_from.to_dict() if self.resume_from else None,
            "finished": [f.to_dict() for f in self.finished_splits],
            "pending": [[encode_key(r.start), encode_key(r.end)] for r in self.pending_ranges],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Loaded]) -> TableStreamFilter:
        after = data.get("resume_from")
        return cls(
            table_id=TableId.parse(data["table"]),
            resume_from=BinlogOffset.from_dict(after) if after else None,
            finished_splits=tuple(FinishedSnapshotSplitInfo.from_dict(f) for f in data["finished"]),
            pending_ranges=tuple(
                ChunkRange(decode_key(a), decode_key(b)) for a, b in data.get("pending", ())
            ),
        )


@dataclass(frozen=True)
class BinlogSplit:
    """A bounded window ``[start, end)`` of the binlog and the tables to emit from it."""

    start: BinlogOffset
    end: BinlogOffset
    tables: tuple[TableStreamFilter, ...] = field(default=())

    @property
    def split_id(self) -> str:
        return "binlog"

    def __str__(self) -> str:
        names = ",".join(str(t.table_id) for t in self.tables)
        return f"binlog [{self.start}, {self.end}) {names}"

    def to_dict(self) -> JSONObject:
        return {
            "start": self.start.to_dict(),
            "end": self.end.to_dict(),
            "tables": [t.to_dict() for t in self.tables],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Loaded]) -> BinlogSplit:
        return cls(
            start=BinlogOffset.from_dict(data["start"]),
            end=BinlogOffset.from_dict(data["end"]),
            tables=tuple(TableStreamFilter.from_dict(t) for t in data["tables"]),
        )
