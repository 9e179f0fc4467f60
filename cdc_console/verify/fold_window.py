"""Step 3 of a verification (``verify.verifier``): the binlog from where each side stands to
the server's head, folded onto both, so that both are the table's state at the head.

Onto a chunk read from the source go the changes at or after its high watermark, the snapshot
reader's own rule for what a chunk has not seen; onto the mirror those at or after the position
before which it holds every change of the table. Partial row images fold as patches, or deletes
by their key (``mysql.partial_images``); a table without a unique key folds counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from cdc_console.config import SourceConfig
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableSchema
from cdc_console.core.splits import SnapshotSplit
from cdc_console.core.values import CanonicalRow
from cdc_console.mysql import partial_images
from cdc_console.mysql.binlog import RowChange, read_window
from cdc_console.mysql.key_weights import key_order
from cdc_console.values.canonical import RowNormalizer, raw_chunk_key
from cdc_console.verify.compare import Fold, Key


@dataclass
class SourceChunk:
    """One chunk as the source holds it at its high watermark, and how long it took to read."""

    split: SnapshotSplit
    rows: pa.Table
    high_watermark: BinlogOffset
    seconds: float


def fold_window(
    source: SourceConfig,
    server_id: int,
    schema: TableSchema,
    chunks: list[SourceChunk],
    source_folds: list[Fold],
    mirror_fold: Fold,
    mirror_at: list[BinlogOffset],
    start: BinlogOffset,
    head: BinlogOffset,
) -> None:
    """The binlog ``[start, head)`` of the table folded onto both sides: onto chunk i
    (``source_folds[i]``) its changes at or after the chunk's high watermark, onto the mirror
    (``mirror_fold``) those at or after ``mirror_at[i]``, the mirror's place for that chunk."""
    table_id = schema.table_id
    normalizer = RowNormalizer(schema)
    column = schema.column(schema.chunk_key)
    order = key_order(column, source)

    def chunk_of(image: Mapping[str, object] | None) -> int | None:
        if image is None:
            return None
        key = raw_chunk_key(column, image.get(schema.chunk_key), binlog=True)
        for index, chunk in enumerate(chunks):
            if chunk.split.range.contains(key, order):
                return index
        return None

    def apply(
        change: RowChange, index: int | None, key: Key, image: CanonicalRow, upsert: bool
    ) -> None:
        if index is None:
            return
        row = image if upsert else None
        for fold, since in (
            (source_folds[index], chunks[index].high_watermark),
            (mirror_fold, mirror_at[index]),
        ):
            if change.position >= since:
                if change.kind == "patch":
                    fold.patch(key, image)
                elif schema.counted:
                    fold.count(key, image, -1 if row is None else 1)
                elif row is None:
                    fold.delete(key)
                else:
                    fold.upsert(key, row)

    expected = {table_id: schema.binlog_names}
    # partial row images: a patch, or a delete by its key (``mysql.partial_images``)
    image_of = normalizer.binlog_columns
    for change in read_window(
        source,
        server_id,
        start,
        head,
        [table_id],
        expected,
        patchable=partial_images.patchable([schema]),
    ):
        if change.before is not None:
            convert = image_of if change.partial else normalizer.binlog_row
            before = convert(change.before, change.before_none_sources)
            apply(change, chunk_of(change.before), normalizer.key_of(before), before, False)
        if change.after is not None:
            convert = image_of if change.partial else normalizer.binlog_row
            after = convert(change.after, change.after_none_sources)
            apply(change, chunk_of(change.after), normalizer.key_of(after), after, True)
