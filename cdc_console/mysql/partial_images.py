"""Partial row images (a writer's ``binlog_row_image = MINIMAL`` or ``NOBLOB``), applied exactly.

A session may log its row events with fewer columns than the table has, long after the server's
FULL setting was checked. Measured on MariaDB 10.11:

- MINIMAL UPDATE: the before image holds the primary key only, the after image only the columns
  the statement set (not the key, unless it set it); MINIMAL DELETE: the key only;
- MINIMAL INSERT: the columns the statement named; the rest took their defaults, which the
  binlog does not carry;
- NOBLOB: both images lack the BLOB/TEXT columns the statement did not change;
- a table without a primary key is logged with whole images either way.

What each row becomes, by what its images hold (``halves``):

- whole images (a before image with every column; an after image completed by the before
  image's values for the columns the update did not log): ordinary ``-U``/``+U``/``-D``;
- an update whose before image names the row (its key columns and chunk key present) and whose
  after image does not change them: ``+P``, a patch of the columns it holds, applied to the row
  the key names (``sinks.netting``);
- a delete whose before image names the row: ``-P``, a delete by key.

Everything else cannot be applied exactly (``refusal``): an insert that lacks columns, an image
without the key, a key changed under a partial image, a table whose rows are told apart by
their whole content; its table is held and read again online, never given a NULL for a column
that was merely absent.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from cdc_console.core.records import (
    OP_DELETE,
    OP_DELETE_KEY,
    OP_PATCH,
    OP_UPDATE_AFTER,
    OP_UPDATE_BEFORE,
)
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.untyped import DriverImage, DriverValue

#: ``none_sources`` entry of a column the row image does not hold (pymysqlreplication's
#: ``NONE_SOURCE.COLS_BITMAP``)
ABSENT = "cols bitmap"

Image = dict[str, DriverValue]
Sources = dict[str, str]
#: (op, the image's present columns, their none-sources) per record of one row
Half = tuple[str, Image, Sources]


def patchable(schemas: Iterable[TableSchema]) -> dict[TableId, tuple[str, ...]]:
    """Per table that can take partial row images, the columns that name one of its rows (its
    key columns and chunk key); a counted table's rows are told apart by their whole content."""
    return {
        s.table_id: tuple(
            dict.fromkeys(c for c in (*s.key_columns, s.chunk_key) if c not in s.origin)
        )
        for s in schemas
        if not s.counted
    }


def present(image: Mapping[str, DriverValue], sources: Mapping[str, str] | None) -> Image:
    """The columns an image holds: those its bitmap names."""
    if not sources:
        return dict(image)
    return {name: value for name, value in image.items() if sources.get(name) != ABSENT}


def _sources(sources: Mapping[str, str] | None, image: Mapping[str, DriverValue]) -> Sources:
    return {k: v for k, v in (sources or {}).items() if k in image and v != ABSENT}


def refusal(
    kind: str, rows: Sequence[Mapping[str, DriverImage]], needed: Collection[str] | None
) -> str:
    """Why the rows of a partial event cannot be applied exactly, or "" when they can.

    ``needed`` are the columns that name a row of the table (its key columns and chunk key), or
    None where the table takes no patches (the sink cannot apply them, or its rows are told
    apart by their whole content).
    """
    if needed is None:
        return "this table's changes need whole images"
    if kind == "insert":
        return "an INSERT's image lacks the columns it left to their defaults"
    image_key, sources_key = (
        ("values", "none_sources") if kind == "delete" else ("before_values", "before_none_sources")
    )
    for row in rows:
        before = present(row[image_key], row.get(sources_key))
        missing = [name for name in needed if name not in before]
        if missing:
            return f"its before image lacks key column {missing[0]}"
        if kind == "update":
            after = present(row["after_values"], row.get("after_none_sources"))
            moved = [n for n in needed if n in after and after[n] != before[n]]
            if moved:
                return f"it changes key column {moved[0]}"
    return ""


def halves(kind: str, row: Mapping[str, DriverImage], columns: Collection[str]) -> list[Half]:
    """The records of one row of a partial event that ``refusal`` accepted, in order."""
    if kind == "delete":
        before = present(row["values"], row.get("none_sources"))
        sources = _sources(row.get("none_sources"), before)
        return [(OP_DELETE if len(before) == len(columns) else OP_DELETE_KEY, before, sources)]
    before = present(row["before_values"], row.get("before_none_sources"))
    after = present(row["after_values"], row.get("after_none_sources"))
    before_sources = _sources(row.get("before_none_sources"), before)
    after_sources = _sources(row.get("after_none_sources"), after)
    if len(before) == len(columns):
        whole = {name: after.get(name, before[name]) for name in before}
        kept = {k: v for k, v in before_sources.items() if k not in after}
        whole_sources = {**kept, **after_sources}
        return [
            (OP_UPDATE_BEFORE, before, before_sources),
            (OP_UPDATE_AFTER, whole, whole_sources),
        ]
    return [(OP_PATCH, {**before, **after}, {**before_sources, **after_sources})]
