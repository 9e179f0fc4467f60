"""The change record: the one shape every reader emits and every sink consumes.

Snapshot splits and binlog ranges both produce ``ChangeRecord`` values, so a Spark micro-batch is a
single homogeneous stream for all captured tables (the way Spark users already ingest Debezium
topics); the sinks turn it into typed per-table tables. Values stay in their *canonical* JSON form
(see ``cdc_console.values.canonical``) until a sink decodes them, which keeps the record schema
independent of the captured tables' schemas.

Ordering: the records of one key are applied in order of ``sort_key`` =
``(file_index, pos, event_index, row_index, tier, seq)``. A snapshot row carries the position of
its split's high watermark (HW) with ``event_index = -1`` (changelog readers tell snapshot rows
from binlog changes by it), so any binlog change of the same key that the split filter lets
through (it is after that watermark) sorts after it. ``tier`` (0 for snapshot rows, 1 for binlog
changes) settles the one tie the position cannot: a binlog change recorded exactly at a split's
HW happened after the split's SELECT, and ``seq`` cannot decide because snapshot and binlog
readers number their records independently.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from cdc_console.core.schema import TableId
from cdc_console.core.untyped import Loaded
from cdc_console.core.values import CanonicalRow, CanonicalValue

OP_INSERT: Final = "+I"
OP_UPDATE_BEFORE: Final = "-U"
OP_UPDATE_AFTER: Final = "+U"
OP_DELETE: Final = "-D"
OPS: Final = frozenset({OP_INSERT, OP_UPDATE_BEFORE, OP_UPDATE_AFTER, OP_DELETE})
# After one of these the key holds the record's row image; after the others it is absent.
UPSERT_OPS: Final = frozenset({OP_INSERT, OP_UPDATE_AFTER})
#: Changes logged with a partial row image (a writer's binlog_row_image MINIMAL or NOBLOB;
#: ``mysql.partial_images``), whose row holds only some columns: ``+P`` sets the columns its row
#: holds in the row its key names, the others keep their values; ``-P`` deletes the row its
#: key names. Only a sink that holds the rows can apply them (``sinks.netting``).
OP_PATCH: Final = "+P"
OP_DELETE_KEY: Final = "-P"
PARTIAL_OPS: Final = frozenset({OP_PATCH, OP_DELETE_KEY})

# The change record's fields in declaration order, with their wire types. The Arrow schema and the
# Spark schema of the change stream are both generated from this one list (``spark/protocol.py``).
FIELDS: Final = (
    ("database", "string"),
    ("table", "string"),
    ("op", "string"),
    ("key", "string"),
    ("row", "string"),
    ("file_index", "int64"),
    ("pos", "int64"),
    ("event_index", "int32"),
    ("row_index", "int32"),
    ("seq", "int64"),
    ("ts_ms", "int64"),
    ("split_id", "string"),
)
FIELD_NAMES: Final = tuple(name for name, _ in FIELDS)
#: A change record as a plain dict in ``FIELD_NAMES`` order (``ChangeRecord.to_dict``); the wire
#: adds a ``bytes`` payload (``spark/protocol.py``).
RecordDict = dict[str, str | int | bytes | None]

_ROW_PREVIEW = 120


@dataclass(frozen=True, slots=True)
class ChangeRecord:
    """One row change (or one snapshot row, as ``+I``) of one captured table.

    ``key`` is the JSON list of the canonical key-column values (``"[1001]"``) so records can be
    grouped and compared per key without decoding the row. ``row`` is the JSON object of column ->
    canonical value, in column order: the before image for ``-U``/``-D``, the after image for
    ``+I``/``+U``. ``split_id`` is ``""`` for binlog changes and the split id (``"shop.orders:3"``)
    for snapshot rows.
    """

    database: str
    table: str
    op: str
    key: str
    row: str
    file_index: int
    pos: int
    event_index: int
    row_index: int
    seq: int
    ts_ms: int
    split_id: str = ""

    def __post_init__(self) -> None:
        if self.op not in OPS and self.op not in PARTIAL_OPS:
            choices = sorted(OPS | PARTIAL_OPS)
            raise ValueError(f"change op must be one of {choices}, not {self.op!r}")

    @property
    def table_id(self) -> TableId:
        return TableId(self.database, self.table)

    @property
    def sort_key(self) -> tuple[int, int, int, int, int, int]:
        """Apply order of the records of one key: binlog position, snapshot before binlog at the
        same position, then the reader's sequence number."""
        return (
            self.file_index,
            self.pos,
            self.event_index,
            self.row_index,
            0 if self.split_id else 1,
            self.seq,
        )

    @property
    def position(self) -> tuple[int, int, int, int]:
        """The binlog position: (file_index, pos, event_index, row_index)."""
        return (self.file_index, self.pos, self.event_index, self.row_index)

    @property
    def is_upsert(self) -> bool:
        """True when the key holds ``row`` after this change (``+I``/``+U``)."""
        return self.op in UPSERT_OPS

    @property
    def is_snapshot(self) -> bool:
        return self.split_id != ""

    def key_values(self) -> tuple[CanonicalValue, ...]:
        """The canonical key values as a tuple (hashable, comparable with other records' keys)."""
        values = json.loads(self.key)
        if not isinstance(values, list):
            raise ValueError(f"change key must be a JSON list, got {self.key!r}")
        return tuple(values)

    def row_dict(self) -> CanonicalRow:
        """The row image as a dict of column -> canonical value, in column order."""
        row = json.loads(self.row)
        if not isinstance(row, dict):
            raise ValueError(f"change row must be a JSON object, got {self.row[:_ROW_PREVIEW]!r}")
        return row

    def to_dict(self) -> RecordDict:
        """Plain dict in ``FIELD_NAMES`` order (for Arrow batches, JSON and SQLite).

        Built by hand: ``dataclasses.asdict`` deep-copies and cost a quarter of a reader's CPU.
        """
        return {
            "database": self.database,
            "table": self.table,
            "op": self.op,
            "key": self.key,
            "row": self.row,
            "file_index": self.file_index,
            "pos": self.pos,
            "event_index": self.event_index,
            "row_index": self.row_index,
            "seq": self.seq,
            "ts_ms": self.ts_ms,
            "split_id": self.split_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Loaded]) -> ChangeRecord:
        """Inverse of ``to_dict``; unknown keys are rejected so schema drift fails loudly."""
        unknown = set(data) - set(FIELD_NAMES)
        if unknown:
            raise ValueError(f"unknown change record fields: {sorted(unknown)}")
        return cls(
            database=str(data["database"]),
            table=str(data["table"]),
            op=str(data["op"]),
            key=str(data["key"]),
            row=str(data["row"]),
            file_index=int(data["file_index"]),
            pos=int(data["pos"]),
            event_index=int(data["event_index"]),
            row_index=int(data["row_index"]),
            seq=int(data["seq"]),
            ts_ms=int(data["ts_ms"]),
            split_id=str(data.get("split_id") or ""),
        )

    def __str__(self) -> str:
        origin = f"split {self.split_id}" if self.split_id else "binlog"
        row = self.row if len(self.row) <= _ROW_PREVIEW else self.row[: _ROW_PREVIEW - 1] + "…"
        return (
            f"{self.op} {self.database}.{self.table} key={self.key} "
            f"@{self.file_index}:{self.pos}/{self.event_index}/{self.row_index} "
            f"seq={self.seq} ({origin}) {row}"
        )
