"""Whether a table's new shape can be applied online, keeping its mirror exact.

When the binlog shows a captured table changing shape, the job holds the table at the change
and asks this module (``schema_changes = "evolve"``): a change the mirror can follow exactly is
applied (the table goes on in its new shape from right after the DDL), any other parks the
table until its re-dump, with the reason. Exact means every row of the mirror still equals the
source's row: a nullable column added at the end with no default holds NULL in every existing
row on both sides, so it qualifies; a column with a default, or a NOT NULL one, holds in
existing rows a value the binlog never carried, so it does not. Statements that change no
column (an index, a comment, an engine rebuild) go on unchanged; TRUNCATE, DROP and RENAME
TABLE change rows or names without row events and are parked.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, replace

from cdc_console.core.mysqltypes import TypeFamily
from cdc_console.core.schema import ColumnInfo, TableSchema, schema_to_dict
from cdc_console.values.arrow import codec_for

_ALTER = re.compile(
    r"^\s*ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:`[^`]+`|[^\s`]+)(?:\s*\.\s*(?:`[^`]+`|[^\s`]+))?\s*(.*)$",
    re.IGNORECASE | re.DOTALL,
)
#: ADD clauses that add no column
_ADD_NOT_COLUMN = {
    "INDEX",
    "KEY",
    "UNIQUE",
    "FULLTEXT",
    "SPATIAL",
    "CONSTRAINT",
    "FOREIGN",
    "CHECK",
    "PARTITION",
    "PERIOD",
    "SYSTEM",
    "VECTOR",
    "PRIMARY",
}
#: DROP clauses that drop no column (a primary key change is caught by the key comparison)
_DROP_NOT_COLUMN = {"INDEX", "KEY", "FOREIGN", "CONSTRAINT", "CHECK", "PARTITION", "PRIMARY"}
#: clauses that change no column: table options and algorithm hints
_OPTIONS = {
    "ENGINE",
    "COMMENT",
    "ROW_FORMAT",
    "AUTO_INCREMENT",
    "FORCE",
    "ALGORITHM",
    "LOCK",
    "KEY_BLOCK_SIZE",
    "STATS_PERSISTENT",
    "STATS_AUTO_RECALC",
    "STATS_SAMPLE_PAGES",
    "PACK_KEYS",
    "CHECKSUM",
    "DELAY_KEY_WRITE",
    "ENABLE",
    "DISABLE",
    "ORDER",
    "RENAME",
}


def _clauses(text: str) -> list[str]:
    """Top-level comma-separated clauses (commas inside parentheses or quotes do not split)."""
    parts: list[str] = []
    depth, quote = 0, ""
    current: list[str] = []
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def _name(token: str) -> str:
    return token.strip("`")


@dataclass(frozen=True)
class ColumnChange:
    """The columns a DDL adds (in order) and the ones it redefines in place."""

    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()


def column_change(statement: str) -> ColumnChange | str | None:
    """What a DDL does to the table's columns: None when nothing, the columns it adds or
    redefines in place, else why it is not applied online."""
    match = _ALTER.match(statement)
    if match is None:
        verb = " ".join(statement.split()[:2]).upper() or "the statement"
        return f"{verb} is not applied online (it changes rows or names without row events)"
    added: list[str] = []
    modified: list[str] = []
    for clause in _clauses(match.group(1)):
        words = clause.replace("=", " = ").split()
        head = words[0].upper()
        second = words[1].upper() if len(words) > 1 else ""
        if head == "ADD":
            if second in _ADD_NOT_COLUMN:
                continue
            if second == "COLUMN":
                rest = words[2:]
                if rest and rest[0].upper() == "IF":
                    rest = rest[3:]  # IF NOT EXISTS
            else:
                rest = words[1:]
            if not rest or rest[0].startswith("("):
                return f"clause {clause[:60]!r} is not applied online"
            added.append(_name(rest[0]))
        elif head in ("MODIFY", "CHANGE"):
            rest = words[2:] if second == "COLUMN" else words[1:]
            if rest and rest[0].upper() == "IF":
                rest = rest[2:]  # IF EXISTS
            names = [_name(w).lower() for w in rest[:2]]
            if not names or (head == "CHANGE" and (len(names) < 2 or names[0] != names[1])):
                return f"clause {clause[:60]!r} is not applied online (a column renamed)"
            modified.append(_name(rest[0]))
        elif head == "DROP" and second in _DROP_NOT_COLUMN:
            continue
        elif head == "ALTER" and (second == "INDEX" or "DEFAULT" in (w.upper() for w in words)):
            continue  # an index's visibility, a default (existing rows keep their values)
        elif head in _OPTIONS and not (head == "RENAME" and second in ("COLUMN", "TO", "AS")):
            if head == "RENAME" and second in ("INDEX", "KEY"):
                continue
            if head == "RENAME":
                return f"clause {clause[:60]!r} is not applied online"
            continue
        elif head == "DEFAULT" or head.startswith("CHARACTER") or head == "CHARSET":
            continue  # the table's default charset: existing columns keep theirs
        else:
            return (
                f"clause {clause[:60]!r} is not applied online (only added columns and widened "
                "ones are)"
            )
    if not added and not modified:
        return None
    return ColumnChange(tuple(added), tuple(modified))


def evolution(
    old: TableSchema, new: TableSchema, statement: str, null_default: Collection[str]
) -> TableSchema | str:
    """``new`` when the change from ``old`` keeps the mirror exact, else why not.

    ``null_default`` names the columns of ``new`` whose default is NULL (information_schema's
    ``COLUMN_DEFAULT``), which ``TableSchema`` does not carry.
    """
    change = column_change(statement)
    if isinstance(change, str):
        return change
    if new.primary_key != old.primary_key or new.chunk_key != old.chunk_key:
        return f"its key changed ({', '.join(old.primary_key)} -> {', '.join(new.primary_key)})"
    if change is None:
        # No column changed, whatever the table's shape is by now (a later DDL is met in
        # the binlog and settled on its own).
        return old
    want = [*old.column_names, *change.added]
    if new.column_names != want:
        return (
            f"the table's columns are now {', '.join(new.column_names)}, not "
            f"{', '.join(want)}: the columns were added elsewhere than at the end, or "
            "the table changed again since"
        )
    kept = len(old.columns)
    redefined = {name.lower() for name in change.modified}
    keys = {*old.primary_key, old.chunk_key}
    for was, now in zip(old.columns, new.columns[:kept], strict=True):
        if schema_to_dict(_one(old, was))["columns"] == schema_to_dict(_one(new, now))["columns"]:
            continue
        if was.name.lower() not in redefined:
            return f"existing column {was.name} changed, but the statement does not name it"
        why = _not_widened(was, now, was.name in keys)
        if why:
            return f"column {was.name}: {why}"
    for column in new.columns[kept:]:
        if column.family is None:
            return f"added column {column.name} has type {column.column_type}, not captured"
        if not column.nullable:
            return (
                f"added column {column.name} is NOT NULL: its value in existing rows never "
                "appears in the binlog"
            )
        if column.name not in null_default:
            return (
                f"added column {column.name} has a default: its value in existing rows never "
                "appears in the binlog"
            )
    return new


def _one(schema: TableSchema, column: ColumnInfo) -> TableSchema:
    return replace(schema, columns=(column,))


_TEXT_SIZES = ("tinytext", "text", "mediumtext", "longtext")
_BLOB_SIZES = ("tinyblob", "blob", "mediumblob", "longblob")


def _not_widened(was: ColumnInfo, now: ColumnInfo, is_key: bool) -> str:
    """Why redefining ``was`` as ``now`` could change stored values without row events (the
    binlog never tells), or "" when every existing value reads the same: the same family and
    Arrow type, no shorter length, no lost ENUM/SET member, no new NOT NULL, the same charset,
    and for a key column the same collation."""
    if was.family is None or was.family != now.family:
        return f"{was.column_type} -> {now.column_type} changes its type family"
    if codec_for(was).arrow_type != codec_for(now).arrow_type:
        return (
            f"{was.column_type} -> {now.column_type} changes its Delta type "
            f"({codec_for(was).arrow_type} -> {codec_for(now).arrow_type}), which needs a re-dump"
        )
    if was.nullable and not now.nullable:
        return "NOT NULL now: existing NULLs would change without row events"
    if (was.character_set or "") != (now.character_set or ""):
        return f"its charset changes ({was.character_set} -> {now.character_set})"
    if is_key and (was.collation or "") != (now.collation or ""):
        return "its collation changes, and it orders the table's key"
    if was.family is TypeFamily.BINARY and _length(now) != _length(was):
        return "BINARY values are zero-padded to the length: they would all change"
    if (was.numeric_scale or 0) != (now.numeric_scale or 0):
        return "its scale changes: every value's digits would change"
    if (was.datetime_precision or 0) != (now.datetime_precision or 0):
        return "its fractional-second precision changes: every value's text would change"
    if tuple(now.enum_values[: len(was.enum_values)]) != tuple(was.enum_values):
        return "members were removed or reordered"
    for sizes in (_TEXT_SIZES, _BLOB_SIZES):
        both = was.data_type in sizes and now.data_type in sizes
        if both and sizes.index(now.data_type) < sizes.index(was.data_type):
            return f"{was.data_type} -> {now.data_type} is narrower"
    was_length, now_length = _length(was), _length(now)
    if was_length is not None and now_length is not None and now_length < was_length:
        return f"{was.column_type} -> {now.column_type} is narrower"
    return ""


#: the length in characters (or bytes) the unsized string types hold
_UNSIZED = {"tinytext": 255, "tinyblob": 255}


def _length(column: ColumnInfo) -> int | None:
    """A column's declared length, or None when its type has none (TEXT holds more than any
    VARCHAR it may replace; TINYTEXT only 255)."""
    found = re.search(r"\((\d+)", column.column_type)
    if found:
        return int(found.group(1))
    return _UNSIZED.get(column.data_type)


def describe_evolution(old: TableSchema, new: TableSchema) -> str:
    """``added column(s) a, b``, ``widened column(s) c`` or ``no column changed``: what an
    applied change did."""
    added = [c.name for c in new.columns[len(old.columns) :]]
    widened = [
        a.name
        for a, b in zip(old.columns, new.columns, strict=False)
        if schema_to_dict(_one(old, a))["columns"] != schema_to_dict(_one(new, b))["columns"]
    ]
    parts = []
    if added:
        parts.append(f"added column(s) {', '.join(added)}")
    if widened:
        parts.append(f"widened column(s) {', '.join(widened)}")
    return "; ".join(parts) or "no column changed"
