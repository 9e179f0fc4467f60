"""The lake's layout as pyarrow sees it: where each table lives, its Delta schema, the
changelog's extra columns and which columns keep file statistics.

No delta-rs here: Spark's executors use this to write a first snapshot's files
(``delta_files``) and should not load delta-rs to do it. Creating and opening the Delta tables
is ``delta_tables``'.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa

from cdc_console.config import (
    CHANGELOG_DIR as CHANGELOG_DIR,  # the folder is the config's to refuse
)
from cdc_console.config import LakeConfig, MirrorPlaces
from cdc_console.core.options import DatetimeType
from cdc_console.core.schema import COUNT_COLUMN, TableId

_SAFE_DECIMAL = 18  # decimals up to this precision get correct statistics from delta-rs
_DEFAULT_INDEXED_COLUMNS = 32  # Delta's default delta.dataSkippingNumIndexedCols
#: rows per Parquet row group in the data files the pipeline writes. A merge-on-read batch
#: reads the held rows of its changed keys (the change feed's pre-images) by row group: one
#: group of 2,048 rows decodes in about a sixth of the time of a whole 8,096-row chunk file
#: (measured), and the files are no larger.
ROW_GROUP_ROWS = 2048
_WALL_CLOCK = pa.timestamp("us")
_WALL_CLOCK_AS_UTC = pa.timestamp("us", tz="UTC")


#: characters a lake folder name never holds as themselves: a path's own separators, the
#: escape character, ``%`` (URLs decode it), and what delta-rs refuses in a local table's URL
#: (it panics with "Invalid object store url" on ``[``, ``]``, ``^``, ``|``)
_ESCAPED = frozenset("/\\~%[]^|")


def folder_name(name: str) -> str:
    """A database or table name as a folder of the lake: the name itself, except that each
    character of ``_ESCAPED``, each control character and a leading dot are written ``~HH``
    (each UTF-8 byte in hex). Names of letters, digits and ordinary punctuation, any script,
    keep their folder; ``name_of_folder`` reverses it."""
    out = []
    for index, char in enumerate(name):
        if char in _ESCAPED or ord(char) < 0x20 or ord(char) == 0x7F or (char == "." and not index):
            out.append("".join(f"~{byte:02X}" for byte in char.encode()))
        else:
            out.append(char)
    return "".join(out)


def name_of_folder(folder: str) -> str:
    """The database or table name a lake folder stands for (``folder_name`` reversed)."""
    if "~" not in folder:
        return folder
    data = bytearray()
    index = 0
    while index < len(folder):
        if folder[index] == "~" and index + 2 < len(folder):
            data += bytes.fromhex(folder[index + 1 : index + 3])
            index += 3
        else:
            data += folder[index].encode()
            index += 1
    return data.decode()


#: mirrors placed by name (``[sink] mirrors``): a table's ``place/name`` instead of ``db/t``
MirrorNames = Mapping[TableId, str]


def _place(table_id: TableId, names: MirrorNames | None) -> tuple[str, str]:
    named = names.get(table_id) if names else None
    if named:
        place, name = named.split("/", 1)
        return place, name
    return table_id.database, table_id.table


def routed(names: MirrorNames | None, table_id: TableId) -> bool:
    """Whether ``[sink] mirrors`` routes ``table_id`` into a mirror shared by a pattern."""
    return isinstance(names, MirrorPlaces) and names.routed(table_id)


def table_app_id(app_id: str, table_id: TableId, names: MirrorNames | None) -> str:
    """The Delta app transaction id of ``table_id``'s commits: the pipeline's ``app_id``, or,
    for a table routed into a shared mirror, ``<app_id>/<db.table>``: the mirror then takes
    several tables' commits per batch, and each must be applied once."""
    return f"{app_id}/{table_id}" if routed(names, table_id) else app_id


def mirror_path(root: Path, table_id: TableId, names: MirrorNames | None = None) -> Path:
    place, name = _place(table_id, names)
    return root / folder_name(place) / folder_name(name)


def changelog_path(root: Path, table_id: TableId, names: MirrorNames | None = None) -> Path:
    place, name = _place(table_id, names)
    return root / CHANGELOG_DIR / folder_name(place) / folder_name(name)


def table_of_folders(place: str, name: str, names: MirrorNames | None = None) -> TableId:
    """The table whose mirror (or change feed) is at ``place/name``, folder names as written:
    the one named to it, else the table of that database and name."""
    found = TableId(name_of_folder(place), name_of_folder(name))
    for table_id, named in (names or {}).items():
        if named == f"{found.database}/{found.table}":
            return table_id
    return found


#: appended to the typed row columns in the changelog table, in this order
CHANGELOG_FIELDS: tuple[pa.Field, ...] = (
    pa.field("_op", pa.string()),
    pa.field("_file_index", pa.int64()),
    pa.field("_pos", pa.int64()),
    pa.field("_event_index", pa.int64()),
    pa.field("_row_index", pa.int64()),
    pa.field("_seq", pa.int64()),
    pa.field("_ts_ms", pa.int64()),
    pa.field("_batch_id", pa.int64()),
)


def changelog_schema(lake: pa.Schema) -> pa.Schema:
    """The changelog table's schema for a mirror whose lake schema is ``lake``: one row per
    change, so a counted mirror's multiplicity is not among its columns."""
    return pa.schema([*(f for f in lake if f.name != COUNT_COLUMN), *CHANGELOG_FIELDS])


def lake_schema(typed: pa.Schema, lake: LakeConfig) -> pa.Schema:
    """The Delta schema of a table whose pipeline (canonical) Arrow schema is ``typed``.

    With ``[lake] datetime = "timestamp"`` a DATETIME column (``timestamp[us]``, Delta
    ``timestamp_ntz``, which needs reader 3 / writer 7) is stored as ``timestamp[us, tz=UTC]``
    holding the same wall-clock digits, which readers of protocol 1 open; they show it as UTC.
    """
    if lake.datetime == DatetimeType.TIMESTAMP_NTZ:
        return typed
    return pa.schema(
        [f.with_type(_WALL_CLOCK_AS_UTC) if f.type == _WALL_CLOCK else f for f in typed],
        metadata=typed.metadata,
    )


def to_lake(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """Rows in the pipeline's types, cast to the lake's: naive -> UTC keeps the digits. Columns
    of ``schema`` the rows lack (retired: the source dropped them) are null."""
    if data.schema == schema:
        return data
    for field_ in schema:
        if data.schema.get_field_index(field_.name) < 0:
            data = data.append_column(field_, pa.nulls(data.num_rows, field_.type))
    if data.column_names != schema.names:
        data = data.select(schema.names)
    return data.cast(schema)


def from_lake(data: pa.Table, typed: pa.Schema) -> pa.Table:
    """Rows read from the lake, their wall-clock columns back in the pipeline's types."""
    columns = []
    for name in data.column_names:
        column = data.column(name)
        if typed.get_field_index(name) >= 0 and typed.field(name).type == _WALL_CLOCK:
            column = column.cast(_WALL_CLOCK)
        columns.append(column)
    return pa.Table.from_arrays(columns, names=data.column_names)


def unsafe_decimals(schema: pa.Schema) -> list[str]:
    return [
        f.name for f in schema if pa.types.is_decimal(f.type) and f.type.precision > _SAFE_DECIMAL
    ]


def stats_columns(schema: pa.Schema) -> list[str]:
    """The columns whose file statistics a table created by ``table_properties`` keeps: the
    first 32, the decimals delta-rs gets wrong left out (``stats_properties``)."""
    unsafe = set(unsafe_decimals(schema))
    return [f.name for f in schema if f.name not in unsafe][:_DEFAULT_INDEXED_COLUMNS]
