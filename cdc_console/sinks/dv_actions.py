"""A merge-on-read commit's files and log entry, written as the Delta protocol states them.

No Python library writes a deletion vector, so this one step is ours (``PROTOCOL.md`` in the
delta-io/delta repository): the ``remove`` and re-``add`` of a touched file, the ``add`` of a new
data file with its statistics, a change-feed ``cdc`` file, and the commit itself, put only where
that version does not exist yet.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cdc_console.core.untyped import Loaded
from cdc_console.core.values import JSONObject
from cdc_console.sinks.base import SinkError
from cdc_console.sinks.delta_files import dictionary_columns
from cdc_console.sinks.delta_log import ActiveFile
from cdc_console.sinks.lake_layout import ROW_GROUP_ROWS

#: the stats of the new data file: the columns of these types get min/max (data skipping)
BOUNDED_TYPES = (pa.types.is_integer, pa.types.is_date)


class CommitConflict(SinkError):
    """Another writer committed the version this batch was planned on; plan it again."""


def with_num_records(stats: Loaded, rows: int) -> str:
    """A file's stats with its physical row count, which a file with a vector must have, and
    ``tightBounds: false``: its min/max and null counts were taken before rows were deleted, so
    they only bound the valid rows (a reader may answer ``MIN(col)`` from tight bounds)."""
    parsed = json.loads(stats) if isinstance(stats, str) and stats else {}
    parsed["numRecords"] = rows
    parsed["tightBounds"] = False
    return json.dumps(parsed, separators=(",", ":"))


def plain_action(action: Mapping[str, Loaded]) -> dict[str, Loaded]:
    """An action read from the log (JSON or a checkpoint's struct) as JSON again."""
    out: dict[str, Loaded] = {}
    for name, value in action.items():
        if value is None:
            continue
        if name in ("partitionValues", "tags") and isinstance(value, list):
            value = dict(value)  # a checkpoint's map arrives as (key, value) pairs
        out[name] = value
    out.setdefault("partitionValues", {})
    return out


def remove_action(file: ActiveFile, now: int) -> dict[str, Loaded]:
    add = plain_action(file.action)
    remove: dict[str, Loaded] = {
        "path": add["path"],
        "deletionTimestamp": now,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": add.get("partitionValues", {}),
        "size": add.get("size"),
    }
    if "deletionVector" in add:
        remove["deletionVector"] = add["deletionVector"]
    # No stats: they are optional on a remove, and a batch of random changes removes and
    # re-adds every file of the table, so they would double its log entry.
    return remove


def write_data_file(root: Path, data: pa.Table, now: int) -> dict[str, Loaded]:
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    pq.write_table(
        data,
        root / name,
        compression="snappy",
        row_group_size=ROW_GROUP_ROWS,
        # a dictionary tried on unique values and abandoned leaves files a quarter larger
        use_dictionary=dictionary_columns(data),
    )
    nulls: dict[str, Loaded] = {}
    lows: dict[str, Loaded] = {}
    highs: dict[str, Loaded] = {}
    for column_field in data.schema:
        column = data.column(column_field.name)
        nulls[column_field.name] = column.null_count
        bounded = any(test(column_field.type) for test in BOUNDED_TYPES)
        if bounded and column.null_count < len(column):
            low, high = pc.min_max(column).values()
            lows[column_field.name] = stat_value(low.as_py())
            highs[column_field.name] = stat_value(high.as_py())
    stats = {"numRecords": data.num_rows, "nullCount": nulls, "minValues": lows, "maxValues": highs}
    return {
        "path": name,
        "partitionValues": {},
        "size": (root / name).stat().st_size,
        "modificationTime": now,
        "dataChange": True,
        "stats": json.dumps(stats, separators=(",", ":")),
    }


def stat_value(value: Loaded) -> Loaded:
    """A statistic as the log writes it: a date as ``YYYY-MM-DD``."""
    isoformat = getattr(value, "isoformat", None)
    return str(isoformat()) if isoformat is not None else value


def write_change_file(root: Path, changes: pa.Table) -> dict[str, Loaded]:
    folder = root / "_change_data"
    folder.mkdir(exist_ok=True)
    name = f"_change_data/cdc-00000-{uuid.uuid4()}.snappy.parquet"
    pq.write_table(changes, root / name, compression="snappy")
    return {
        "path": name,
        "partitionValues": {},
        "size": (root / name).stat().st_size,
        "dataChange": False,
    }


def put_if_absent(path: Path, actions: Sequence[JSONObject]) -> None:
    """Write a commit file only if that version does not exist yet (the protocol's "never
    overwrite a log entry"): a temporary file, linked into place."""
    staged = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with staged.open("w", encoding="utf-8") as handle:
        for action in actions:
            handle.write(json.dumps(action, separators=(",", ":")) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(staged, path)
    except FileExistsError:
        raise CommitConflict(f"{path.name} was committed by another writer") from None
    finally:
        staged.unlink(missing_ok=True)
