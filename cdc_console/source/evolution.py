"""Whether a table's new shape can be followed online, and how, keeping its mirror exact.

When the binlog shows a captured table changing shape, the job holds the table at the change
and asks this module (``schema_changes = "evolve"``). There are three answers:

- **In place**: every existing mirror row still equals its source row in the new shape, so the
  table goes on from right after the DDL. A nullable column added with no default holds NULL in
  every existing row on both sides; a VARCHAR lengthened or an ENUM member appended changes no
  stored value; an index, a comment or an engine rebuild changes no column at all; a dropped
  column is kept (below).
- **Re-read** (:class:`Reread`): the new shape is one the mirror can take, but rows changed
  without row events (TRUNCATE, a column added with a default, INT -> BIGINT, a renamed
  column, RENAME TABLE swapping in another table as online schema change tools do). The table
  is read again online, lock-free, chunk by chunk, as a re-dump does, while the others stream.
- **Park** (a reason): a breaking change a person should look at before the mirror follows
  it: a new key, a column type changing family, a narrowed column, a column of a type not
  captured.

A dropped column stays in the mirror (``TableSchema.retired``) with the values it holds, and
NULL in rows inserted from then on: nothing a user stored is destroyed, not even by a later
re-read, and readers of the mirror keep their columns.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, replace

from cdc_console.core.mysqltypes import INTEGER_BITS, TypeFamily
from cdc_console.core.schema import ColumnInfo, TableSchema
from cdc_console.core.schema_change import SchemaChange

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
    """What an ALTER does to the columns: added (in order), redefined in place, renamed
    (old, new) and dropped."""

    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    dropped: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reread:
    """The table takes ``schema`` by being read again online: why in-place was not exact."""

    reason: str
    schema: TableSchema

    def __str__(self) -> str:
        return self.reason


#: what a settled change does: the shape to go on with, a re-read, or why the table is parked
Evolution = TableSchema | Reread | str


#: first words of a statement that changes a table (anything else describes a change seen only
#: in the rows or the table's description)
_DDL_VERBS = frozenset({"ALTER", "CREATE", "DROP", "RENAME", "TRUNCATE"})


def _not_alter(statement: str) -> str:
    words = statement.split()
    if not words or words[0].upper() not in _DDL_VERBS:
        return "the binlog it reads does not say how"
    verb = " ".join(words[:2]).upper()
    if verb.startswith("TRUNCATE"):
        return "TRUNCATE emptied it without row events"
    if verb == "RENAME TABLE":
        return "RENAME TABLE put another table under its name"
    return f"{verb} changed it without row events"


def column_change(statement: str) -> ColumnChange | str | None:
    """What a DDL does to the table's columns: None when nothing, the columns it adds,
    redefines, renames or drops, else why its effect cannot be followed column by column."""
    match = _ALTER.match(statement)
    if match is None:
        return _not_alter(statement)
    added: list[str] = []
    modified: list[str] = []
    renamed: list[tuple[str, str]] = []
    dropped: list[str] = []
    for clause in _clauses(match.group(1)):
        words = clause.replace("=", " = ").split()
        head = words[0].upper()
        second = words[1].upper() if len(words) > 1 else ""
        if head == "ADD":
            if second in _ADD_NOT_COLUMN:
                continue
            rest = _after_column(words, "IF NOT EXISTS")
            if not rest or rest[0].startswith("("):
                return f"clause {clause[:60]!r} is not followed column by column"
            added.append(_name(rest[0]))
        elif head in ("MODIFY", "CHANGE"):
            rest = _after_column(words, "IF EXISTS")
            names = [_name(w) for w in rest[:2]]
            if not names or (head == "CHANGE" and len(names) < 2):
                return f"clause {clause[:60]!r} is not followed column by column"
            if head == "CHANGE" and names[0].lower() != names[1].lower():
                renamed.append((names[0], names[1]))
            modified.append(names[1] if head == "CHANGE" else names[0])
        elif head == "RENAME" and second == "COLUMN" and len(words) >= 5:
            renamed.append((_name(words[2]), _name(words[4])))
        elif head == "DROP":
            if second in _DROP_NOT_COLUMN:
                continue
            rest = _after_column(words, "IF EXISTS")
            if not rest:
                return f"clause {clause[:60]!r} is not followed column by column"
            dropped.append(_name(rest[0]))
        elif head == "ALTER" and (second == "INDEX" or "DEFAULT" in (w.upper() for w in words)):
            continue  # an index's visibility, a default (existing rows keep their values)
        elif (head == "RENAME" and second in ("INDEX", "KEY")) or (
            head in _OPTIONS and head != "RENAME"
        ):
            continue
        elif head == "DEFAULT" or head.startswith("CHARACTER") or head == "CHARSET":
            continue  # the table's default charset: existing columns keep theirs
        else:
            return f"clause {clause[:60]!r} is not followed column by column"
    if not (added or modified or renamed or dropped):
        return None
    return ColumnChange(tuple(added), tuple(modified), tuple(renamed), tuple(dropped))


def _after_column(words: list[str], condition: str) -> list[str]:
    """The words after ``ADD|MODIFY|CHANGE|DROP [COLUMN] [IF [NOT] EXISTS]``."""
    rest = words[2:] if len(words) > 1 and words[1].upper() == "COLUMN" else words[1:]
    skip = len(condition.split())
    if [w.upper() for w in rest[:skip]] == condition.split():
        rest = rest[skip:]
    return rest


def evolution(
    old: TableSchema, new: TableSchema, statement: str, null_default: Collection[str]
) -> Evolution:
    """How the mirror follows ``old`` becoming ``new`` through ``statement``: ``new`` (or
    ``old`` when no column changed) in place, a :class:`Reread`, or why the table is parked.

    ``null_default`` names the columns of ``new`` whose default is NULL (information_schema's
    ``COLUMN_DEFAULT``), which ``TableSchema`` does not carry.
    """
    if new.primary_key != old.primary_key or new.chunk_key != old.chunk_key:
        return f"its key changed ({', '.join(old.primary_key)} -> {', '.join(new.primary_key)})"
    if new.counted != old.counted:
        return "it gained or lost its only unique key: its rows are identified anew"
    change = column_change(statement)
    if change is None:
        # No column changed, whatever the table's shape is by now (a later DDL is met in
        # the binlog and settled on its own).
        return old
    if new.counted:
        # A row's content is its identity: any column change gives every mirror row a new one.
        return Reread(f"{statement.split()[0].upper()} of a table without a unique key", new)
    renames = dict(change.renamed) if isinstance(change, ColumnChange) else {}
    dropped = {n.lower() for n in change.dropped} if isinstance(change, ColumnChange) else set()
    now_by_name = {c.name.lower(): c for c in new.columns}
    retired = list(old.retired)
    unexplained: list[str] = []
    for was in old.columns:
        now = now_by_name.get(renames.get(was.name, was.name).lower())
        if now is None:
            # kept in the mirror with the values it holds; rows inserted from now on hold NULL
            retired.append(replace(was, nullable=True))
            if was.name.lower() not in dropped:
                unexplained.append(was.name)
            continue
        why = _narrowed(was, now)
        if why:
            return f"column {was.name}: {why}"
    for column in new.columns:
        if column.family is None:
            return f"column {column.name} has type {column.column_type}, not captured"
    back = [r.name for r in retired if r.name.lower() in now_by_name]
    new = replace(new, retired=tuple(r for r in retired if r.name.lower() not in now_by_name))
    if back:
        why = f"column {back[0]} was dropped before and the mirror still holds its old values"
    elif unexplained:
        why = (
            f"column {unexplained[0]} is gone though the statement does not drop it (the table "
            "changed again since); the mirror keeps it"
        )
    elif isinstance(change, str):
        why = change
    else:
        why = _not_in_place(old, new, change, null_default)
    return Reread(why, new) if why else new


def _not_in_place(
    old: TableSchema, new: TableSchema, change: ColumnChange, null_default: Collection[str]
) -> str:
    """Why following ``change`` in place could leave a mirror row unlike its source row, or ""
    when every existing row reads the same in the new shape (columns match by name, so an
    added column's place does not matter)."""
    if change.renamed:
        old_name, new_name = change.renamed[0]
        return f"column {old_name} renamed to {new_name}"
    dropped = {name.lower() for name in change.dropped}
    before = {c.name.lower(): c for c in old.columns if c.name.lower() not in dropped}
    added = {name.lower() for name in change.added}
    if {c.name.lower() for c in new.columns} != before.keys() | added:
        return (
            f"the table's columns are now {', '.join(new.column_names)}, not those of "
            f"{', '.join(old.column_names)} as the statement changes them: it changed again "
            "since"
        )
    redefined = {name.lower() for name in change.modified}
    keys = {*old.primary_key, old.chunk_key}
    for now in new.columns:
        was = before.get(now.name.lower())
        if was is None:
            if not now.nullable:
                return (
                    f"added column {now.name} is NOT NULL: its value in existing rows never "
                    "appears in the binlog"
                )
            if now.name not in null_default:
                return (
                    f"added column {now.name} has a default: its value in existing rows never "
                    "appears in the binlog"
                )
            continue
        if was == now:
            continue
        if was.name.lower() not in redefined:
            return f"existing column {was.name} changed, but the statement does not name it"
        why = _rewritten(was, now, was.name in keys)
        if why:
            return f"column {was.name}: {why}"
    return ""


_TEXT_SIZES = ("tinytext", "text", "mediumtext", "longtext")
_BLOB_SIZES = ("tinyblob", "blob", "mediumblob", "longblob")
#: family changes that keep every value: the re-read gives each row its new form
_WIDER_FAMILY = {(TypeFamily.FLOAT, TypeFamily.DOUBLE), (TypeFamily.CHAR, TypeFamily.STRING)}


def _narrowed(was: ColumnInfo, now: ColumnInfo) -> str:
    """Why ``was`` -> ``now`` breaks the mirror's readers (a type family change, or a type that
    holds less), or "" when every value of ``was`` fits ``now``."""
    change = f"{was.column_type} -> {now.column_type}"
    if was.family is None or (
        was.family != now.family and (was.family, now.family) not in _WIDER_FAMILY
    ):
        return f"{change} changes its type family"
    if was.family is TypeFamily.INTEGER:
        (was_low, was_high), (now_low, now_high) = _integer_range(was), _integer_range(now)
        if now_low > was_low or now_high < was_high:
            return f"{change} is narrower"
    if was.family is TypeFamily.DECIMAL:
        was_scale, now_scale = was.numeric_scale or 0, now.numeric_scale or 0
        was_digits = (was.numeric_precision or 0) - was_scale
        if now_scale < was_scale or (now.numeric_precision or 0) - now_scale < was_digits:
            return f"{change} is narrower"
    if (now.datetime_precision or 0) < (was.datetime_precision or 0):
        return f"{change} keeps fewer fractional digits"
    if not set(was.enum_values) <= set(now.enum_values):
        return f"{change} removes members"
    for sizes in (_TEXT_SIZES, _BLOB_SIZES):
        both = was.data_type in sizes and now.data_type in sizes
        if both and sizes.index(now.data_type) < sizes.index(was.data_type):
            return f"{change} is narrower"
    was_length, now_length = _length(was), _length(now)
    if was_length is not None and now_length is not None and now_length < was_length:
        return f"{change} is narrower"
    return ""


def _integer_range(column: ColumnInfo) -> tuple[int, int]:
    bits = INTEGER_BITS.get(column.data_type, 64)
    if column.unsigned:
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _rewritten(was: ColumnInfo, now: ColumnInfo, is_key: bool) -> str:
    """Why redefining ``was`` as the no narrower ``now`` could change stored values or their
    Delta type without row events (the binlog never tells), or "" when every existing value
    reads the same: the same Arrow type, no new NOT NULL, the same charset, scale and
    fractional digits, members only appended, and for a key column the same collation."""
    # Here, not at the top: the planner (in Spark's streaming runner) imports this module, and
    # the Arrow codecs pull in pyarrow.compute, which only a DDL needs there.
    from cdc_console.values.arrow import codec_for

    change = f"{was.column_type} -> {now.column_type}"
    if codec_for(was).arrow_type != codec_for(now).arrow_type:
        return (
            f"{change} changes its Delta type "
            f"({codec_for(was).arrow_type} -> {codec_for(now).arrow_type})"
        )
    if was.nullable and not now.nullable:
        return "NOT NULL now: existing NULLs may have changed without row events"
    if (was.character_set or "") != (now.character_set or ""):
        return f"its charset changes ({was.character_set} -> {now.character_set})"
    if is_key and (was.collation or "") != (now.collation or ""):
        return "its collation changes, and it orders the table's key"
    if was.family is TypeFamily.BINARY and _length(now) != _length(was):
        return "BINARY values are zero-padded to the length: they all changed"
    if (was.numeric_scale or 0) != (now.numeric_scale or 0):
        return "its scale changes: every value's digits changed"
    if (was.datetime_precision or 0) != (now.datetime_precision or 0):
        return "its fractional-second precision changes: every value's text changed"
    if tuple(now.enum_values[: len(was.enum_values)]) != tuple(was.enum_values):
        return "its members were reordered"
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
    before = {c.name.lower(): c for c in old.columns}
    added = [c.name for c in new.columns if c.name.lower() not in before]
    widened = [c.name for c in new.columns if before.get(c.name.lower(), c) != c]
    kept = [c.name for c in new.retired[len(old.retired) :]]
    parts = []
    if added:
        parts.append(f"added column(s) {', '.join(added)}")
    if widened:
        parts.append(f"widened column(s) {', '.join(widened)}")
    if kept:
        parts.append(f"dropped column(s) {', '.join(kept)} kept in the mirror, null from now on")
    return "; ".join(parts) or "no column changed"


def reshaped_unseen(old: TableSchema, new: TableSchema) -> Reread | str:
    """How to follow a change the binlog the job reads does not show (made while it was
    down, when the server can describe only the new shape): read again, or why to park."""
    ruled = rule_changed(old, new)
    if ruled:
        return Reread(ruled, new)
    result = evolution(old, new, "", ())
    return result if isinstance(result, Reread | str) else Reread(_not_alter(""), new)


def _rule_changed(old: TableSchema, new: TableSchema) -> str:
    """Why the table is read again when only the config's rule for invalid dates of a column
    changed (``core.invalid_dates``): the rows already mirrored follow the old rule. "" when
    anything else changed too."""
    if len(old.columns) != len(new.columns):
        return ""
    dates, masks = [], []
    for was, now in zip(old.columns, new.columns, strict=True):
        if replace(was, invalid_dates=now.invalid_dates, mask=now.mask) != now:
            return ""
        if was.invalid_dates != now.invalid_dates:
            dates.append(f"{now.name} {was.invalid_dates} -> {now.invalid_dates}")
        if was.mask != now.mask:
            masks.append(f"{now.name} {_mask_text(was)} -> {_mask_text(now)}")
    parts = []
    if dates:
        parts.append(f"pipeline.invalid_dates changed for column {', '.join(dates)}")
    if masks:
        parts.append(f"pipeline.mask_columns changed for column {', '.join(masks)}")
    return "; ".join(parts)


def _mask_text(column: ColumnInfo) -> str:
    """A column's mask as a rule change names it; a new key reads as one."""
    mask = column.mask
    if mask is None:
        return "unmasked"
    return mask.describe() + (f" {mask.key_check[:4]}…" if mask.key_check else "")


def rule_changed(old: TableSchema, new: TableSchema) -> str:
    """Why the table is read again when only the config's rules for it changed (invalid dates,
    masks, left-out columns): the rows already mirrored follow the old ones. "" when the
    table's own shape changed too (then ``evolution`` decides) or nothing did."""
    return _rule_changed(old, new) or _exclusion_changed(old, new)


def _exclusion_changed(old: TableSchema, new: TableSchema) -> str:
    """Why the table is read again when ``[pipeline] exclude_columns`` now leaves out a column
    it mirrored (whose values the mirror's rows still hold) or mirrors one it left out (whose
    values no mirrored row holds yet). "" when it leaves out the same columns as before, or
    when the source's columns, keys or the columns mirrored both times changed too."""
    if (
        old.binlog_names != new.binlog_names
        or old.primary_key != new.primary_key
        or old.chunk_key != new.chunk_key
    ):
        return ""
    before = {c.name: c for c in old.columns}
    for column in new.columns:
        mirrored = before.get(column.name)
        if (
            mirrored is not None
            and replace(mirrored, invalid_dates=column.invalid_dates, mask=column.mask) != column
        ):
            return ""
    both = set(new.binlog_names)
    was, now = set(old.left_out) & both, set(new.left_out) & both
    if was == now:
        return ""
    parts = []
    if now - was:
        parts.append(f"now leaves out {', '.join(sorted(now - was))}")
    if was - now:
        parts.append(f"now mirrors {', '.join(sorted(was - now))}")
    return f"pipeline.exclude_columns changed: it {' and '.join(parts)}"


def follow_rows_change(old: TableSchema, new: TableSchema, change: SchemaChange) -> Reread | str:
    """How to follow a change of a table's rows that the binlog does not carry as full row
    images (a DML logged as a statement, a partial image, an event that does not decode):
    read the table again online where that makes it exact (its shape permitting, as for an
    unseen DDL), else why it is parked."""
    if not change.cause.heals:
        return "the binlog event cannot be applied exactly, and reading the table again would meet it again"
    result = evolution(old, new, "", ())
    if isinstance(result, str):
        return result
    schema = result.schema if isinstance(result, Reread) else result
    return Reread("its rows changed without full row images in the binlog", schema)
