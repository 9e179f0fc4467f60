"""A window read in parts: a table's changes from its first change of shape on are dropped.

One reader of a whole window stops emitting a table where its shape changes (a DDL on it, or
row events whose columns are not the expected ones) and reports that position. A window read
in parts (``spark.plan_tasks.window_parts``) cannot stop the parts after the one holding the DDL:
each starts at a transaction start of its own and never sees it, so they decode the table's
later rows in its new shape. The driver has every part's report (merged: the earliest change
per table) and drops those rows, so the parts' changes together are exactly what one reader
of the whole window emits. For a window read whole this drops nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from cdc_console.core.offset import binlog_file_index
from cdc_console.core.records import ChangeRecord
from cdc_console.core.reports import WindowResult

log = logging.getLogger(__name__)


def drop_reshaped(
    records: Sequence[ChangeRecord], window: WindowResult | None
) -> tuple[Sequence[ChangeRecord], WindowResult | None]:
    """``records`` without the binlog changes of a table at or after its reported change of
    shape, and ``window`` with its counts of emitted changes lowered to match."""
    if window is None or not window.schema_changes:
        return records, window
    cuts = {
        table: (binlog_file_index(change.position.file), change.position.pos)
        for table, change in window.schema_changes.items()
    }
    kept: list[ChangeRecord] = []
    dropped: dict[str, int] = {}
    for record in records:
        name = f"{record.database}.{record.table}"
        cut = cuts.get(name)
        if cut is not None and not record.split_id and (record.file_index, record.pos) >= cut:
            dropped[name] = dropped.get(name, 0) + 1
            continue
        kept.append(record)
    if not dropped:
        return records, window
    for name, count in dropped.items():
        log.info(
            "binlog: %d changes of %s after its change of shape at %s dropped (read by a later "
            "part of the window)",
            count,
            name,
            window.schema_changes[name].position,
        )
    emitted = {t: n - dropped.get(t, 0) for t, n in window.emitted.items()}
    return kept, replace(window, emitted={t: n for t, n in emitted.items() if n > 0})
