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

from cdc_console.core.schema import TableSchema, schema_to_dict

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


def column_change(statement: str) -> list[str] | str | None:
    """What a DDL does to the table's columns: None when nothing, the names it adds when it only
    adds columns, else why it is not applied online."""
    match = _ALTER.match(statement)
    if match is None:
        verb = " ".join(statement.split()[:2]).upper() or "the statement"
        return f"{verb} is not applied online (it changes rows or names without row events)"
    added: list[str] = []
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
            return f"clause {clause[:60]!r} is not applied online (only added columns are)"
    return added or None


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
    want = [*old.column_names, *change]
    if new.column_names != want:
        return (
            f"the table's columns are now {', '.join(new.column_names)}, not "
            f"{', '.join(want)}: the columns were added elsewhere than at the end, or "
            "the table changed again since"
        )
    before = schema_to_dict(old)["columns"]
    after = schema_to_dict(new)["columns"]
    kept = len(before)
    if after[:kept] != before:
        changed = [b["name"] for b, a in zip(before, after, strict=False) if a != b]
        return f"existing column(s) changed: {', '.join(changed)}"
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


def describe_evolution(old: TableSchema, new: TableSchema) -> str:
    """``added columns a, b`` or ``no column changed``: what an applied change did."""
    added = [c.name for c in new.columns[len(old.columns) :]]
    return f"added column(s) {', '.join(added)}" if added else "no column changed"
