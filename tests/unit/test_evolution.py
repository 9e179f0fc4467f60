"""How each schema change is followed: in place, by reading the table again, or parked.

In place only when every mirror row still equals its source row after it and the new shape is
known to be the one right after the DDL; a re-read when the new shape is one the mirror can take
but rows changed without row events; parked when the change breaks the mirror's readers (a new
key, a type family change, a narrowed or a dropped column).
"""

from __future__ import annotations

import pytest

from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.source.evolution import (
    ColumnChange,
    Reread,
    column_change,
    describe_evolution,
    evolution,
)

T = TableId("shop", "orders")
ID = ColumnInfo("id", "int", "int(11)", nullable=False)
NOTE = ColumnInfo("note", "varchar", "varchar(20)")
LABEL = ColumnInfo("label", "varchar", "varchar(10)")
OLD = TableSchema(T, (ID, NOTE), ("id",), "id")


def shape(*columns: ColumnInfo, key: tuple[str, ...] = ("id",)) -> TableSchema:
    return TableSchema(T, columns, key, key[0])


@pytest.mark.parametrize(
    ("statement", "change"),
    [
        ("ALTER TABLE t ADD INDEX by_note (note)", None),
        ("ALTER TABLE t ENGINE=InnoDB, ALGORITHM=INPLACE, LOCK=NONE", None),
        ("ALTER TABLE t COMMENT = 'orders, kept'", None),
        ("ALTER TABLE t ALTER COLUMN note SET DEFAULT 'x'", None),
        ("ALTER TABLE t ADD KEY k (a), RENAME INDEX k TO k2", None),
        ("ALTER TABLE t ADD COLUMN label VARCHAR(10) NULL", ColumnChange(("label",))),
        (
            "ALTER TABLE `db`.`t` ADD a INT, ADD COLUMN IF NOT EXISTS b DECIMAL(10,2)",
            ColumnChange(("a", "b")),
        ),
        ("ALTER ONLINE TABLE t ADD COLUMN c ENUM('x,y','z')", ColumnChange(("c",))),
        ("ALTER TABLE t MODIFY note VARCHAR(40)", ColumnChange((), ("note",))),
        ("ALTER TABLE t CHANGE COLUMN note note TEXT, ADD d INT", ColumnChange(("d",), ("note",))),
        ("ALTER TABLE t DROP COLUMN note", ColumnChange(dropped=("note",))),
        ("ALTER TABLE t DROP IF EXISTS note", ColumnChange(dropped=("note",))),
        (
            "ALTER TABLE t CHANGE note memo VARCHAR(20)",
            ColumnChange(modified=("memo",), renamed=(("note", "memo"),)),
        ),
        ("ALTER TABLE t RENAME COLUMN note TO memo", ColumnChange(renamed=(("note", "memo"),))),
    ],
)
def test_what_a_statement_does_to_the_columns(statement: str, change: ColumnChange | None) -> None:
    assert column_change(statement) == change


@pytest.mark.parametrize(
    ("statement", "why"),
    [
        ("ALTER TABLE t RENAME TO orders_old", "is not followed column by column"),
        ("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4", "is not followed column by column"),
        ("TRUNCATE TABLE t", "TRUNCATE emptied it without row events"),
        ("RENAME TABLE t TO u, t_new TO t", "RENAME TABLE put another table under its name"),
        ("DROP TABLE t", "DROP TABLE changed it without row events"),
    ],
)
def test_other_statements_say_why_they_are_not_followed_column_by_column(
    statement: str, why: str
) -> None:
    reason = column_change(statement)
    assert isinstance(reason, str) and why in reason


def test_truncate_and_a_swapped_in_table_are_read_again() -> None:
    assert evolution(OLD, OLD, "TRUNCATE t", set()) == Reread(
        "TRUNCATE emptied it without row events", OLD
    )
    swapped = shape(ID, NOTE, LABEL)
    assert evolution(OLD, swapped, "RENAME TABLE t TO t_old, t_gho TO t", {"label"}) == Reread(
        "RENAME TABLE put another table under its name", swapped
    )


def test_a_nullable_column_added_without_default_is_applied_in_place_wherever_it_goes() -> None:
    new = shape(ID, NOTE, LABEL)
    assert (
        evolution(OLD, new, "ALTER TABLE t ADD COLUMN label VARCHAR(10)", {"note", "label"}) == new
    )
    assert describe_evolution(OLD, new) == "added column(s) label"
    first = shape(LABEL, ID, NOTE)
    assert evolution(OLD, first, "ALTER TABLE t ADD label VARCHAR(10) FIRST", {"label"}) == first


def test_a_statement_that_changes_no_column_keeps_the_old_shape_whatever_came_later() -> None:
    later = shape(ID, NOTE, LABEL)  # a later DDL already added a column: not this one's doing
    assert evolution(OLD, later, "ALTER TABLE t ADD INDEX i (note)", set()) == OLD
    assert describe_evolution(OLD, OLD) == "no column changed"


BIG_ID = ColumnInfo("id", "bigint", "bigint(20)", nullable=False)


@pytest.mark.parametrize(
    ("new", "statement", "null_default", "reason"),
    [
        (
            shape(ID, NOTE, ColumnInfo("extra", "int", "int(11)", nullable=False)),
            "ALTER TABLE t ADD extra INT NOT NULL DEFAULT 7",
            set(),
            "added column extra is NOT NULL",
        ),
        (
            shape(ID, NOTE, LABEL),
            "ALTER TABLE t ADD label VARCHAR(10) DEFAULT 'x'",
            {"note"},
            "added column label has a default",
        ),
        (
            shape(ID, NOTE, LABEL, ColumnInfo("b", "int", "int(11)")),
            "ALTER TABLE t ADD label VARCHAR(10)",
            {"note", "label", "b"},
            "it changed again since",
        ),
        (
            shape(ID, ColumnInfo("note", "varchar", "varchar(40)"), LABEL),
            "ALTER TABLE t ADD label VARCHAR(10)",
            {"note", "label"},
            "existing column note changed, but the statement does not name it",
        ),
        (
            shape(BIG_ID, NOTE),
            "ALTER TABLE t MODIFY id BIGINT NOT NULL",
            {"note"},
            "changes its Delta type (int32 -> int64)",
        ),
        (
            shape(ID, ColumnInfo("note", "varchar", "varchar(20)", nullable=False)),
            "ALTER TABLE t MODIFY note VARCHAR(20) NOT NULL",
            set(),
            "NOT NULL now",
        ),
        (
            shape(ID, ColumnInfo("memo", "varchar", "varchar(20)")),
            "ALTER TABLE t RENAME COLUMN note TO memo",
            {"memo"},
            "column note renamed to memo",
        ),
        (
            shape(ID, ColumnInfo("note", "char", "char(20)")),
            "ALTER TABLE t MODIFY note CHAR(20)",
            {"note"},
            "changes its type family",
        ),
    ],
)
def test_changes_that_rewrote_rows_without_row_events_are_read_again(
    new: TableSchema, statement: str, null_default: set[str], reason: str
) -> None:
    result = evolution(OLD, new, statement, null_default)
    if "type family" in reason:  # VARCHAR -> CHAR: a family change, which parks
        assert isinstance(result, str) and reason in result, result
        return
    assert isinstance(result, Reread) and reason in result.reason, result
    assert result.schema == new


@pytest.mark.parametrize(
    ("old", "new", "statement", "reason"),
    [
        (
            OLD,
            shape(ID, ColumnInfo("note", "varchar", "varchar(10)")),
            "ALTER TABLE t MODIFY note VARCHAR(10)",
            "column note: varchar(20) -> varchar(10) is narrower",
        ),
        (
            shape(BIG_ID, NOTE),
            OLD,
            "ALTER TABLE t MODIFY id INT NOT NULL",
            "column id: bigint(20) -> int(11) is narrower",
        ),
        (
            shape(ID, ColumnInfo("p", "decimal", "decimal(10,2)", None, 10, 2)),
            shape(ID, ColumnInfo("p", "decimal", "decimal(10,3)", None, 10, 3)),
            "ALTER TABLE t MODIFY p DECIMAL(10,3)",
            "is narrower",
        ),
        (
            OLD,
            shape(ID, NOTE, ColumnInfo("u", "vector", "vector(3)")),
            "ALTER TABLE t ADD u VECTOR(3)",
            "column u has type vector(3), not captured",
        ),
        (
            OLD,
            shape(ID, NOTE, key=("note",)),
            "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (note)",
            "its key changed (id -> note)",
        ),
        (
            OLD,
            shape(ID, ColumnInfo("note", "int", "int(11)")),
            "ALTER TABLE t MODIFY note INT",
            "varchar(20) -> int(11) changes its type family",
        ),
    ],
)
def test_breaking_changes_park_the_table_with_why(
    old: TableSchema, new: TableSchema, statement: str, reason: str
) -> None:
    result = evolution(old, new, statement, {"note", "u"})
    assert isinstance(result, str) and reason in result, result


def test_a_dropped_column_is_kept_in_the_mirror_in_place_until_it_comes_back() -> None:
    required = ColumnInfo("note", "varchar", "varchar(20)", nullable=False)
    kept = evolution(shape(ID, required), shape(ID), "ALTER TABLE t DROP COLUMN note", set())
    assert isinstance(kept, TableSchema)
    assert kept.columns == (ID,) and kept.retired == (NOTE,)  # nullable from now on
    assert describe_evolution(shape(ID, required), kept) == (
        "dropped column(s) note kept in the mirror, null from now on"
    )
    # dropped with another change that needs a re-read: the re-read keeps it too
    both = evolution(
        shape(ID, NOTE),
        shape(ID, LABEL),
        "ALTER TABLE t DROP note, ADD label VARCHAR(10) DEFAULT 'x'",
        set(),
    )
    assert isinstance(both, Reread) and both.schema.retired == (NOTE,)
    # gone without this statement dropping it (a later DDL did): read again, still kept
    later = evolution(OLD, shape(ID, LABEL), "ALTER TABLE t ADD label VARCHAR(10)", {"label"})
    assert isinstance(later, Reread) and "column note is gone" in later.reason
    assert later.schema.retired == (NOTE,)
    # added again: the mirror still holds the old values, so the table is read again
    back = evolution(kept, shape(ID, NOTE), "ALTER TABLE t ADD note VARCHAR(20)", {"note"})
    assert isinstance(back, Reread) and "dropped before" in back.reason
    assert back.schema == shape(ID, NOTE)


def test_widening_to_a_larger_type_is_read_again_not_parked() -> None:
    unsigned = ColumnInfo("n", "int", "int(10) unsigned")
    signed_big = ColumnInfo("n", "bigint", "bigint(20)")
    signed = ColumnInfo("n", "int", "int(11)")
    # INT UNSIGNED already travels as int64: BIGINT changes no stored value
    assert evolution(
        shape(ID, unsigned), shape(ID, signed_big), "ALTER TABLE t MODIFY n BIGINT", {"n"}
    ) == shape(ID, signed_big)
    assert isinstance(
        evolution(shape(ID, signed), shape(ID, signed_big), "ALTER TABLE t MODIFY n BIGINT", {"n"}),
        Reread,
    )
    narrowed = evolution(
        shape(ID, signed), shape(ID, unsigned), "ALTER TABLE t MODIFY n INT UNSIGNED", {"n"}
    )
    assert isinstance(narrowed, str) and "is narrower" in narrowed
    small = ColumnInfo("p", "decimal", "decimal(10,2)", None, 10, 2)
    wide = ColumnInfo("p", "decimal", "decimal(14,4)", None, 14, 4)
    assert isinstance(
        evolution(shape(ID, small), shape(ID, wide), "ALTER TABLE t MODIFY p DECIMAL(14,4)", {"p"}),
        Reread,
    )
    single = ColumnInfo("f", "float", "float")
    double = ColumnInfo("f", "double", "double")
    assert isinstance(
        evolution(shape(ID, single), shape(ID, double), "ALTER TABLE t MODIFY f DOUBLE", {"f"}),
        Reread,
    )


def test_adding_a_primary_key_adds_no_column() -> None:
    assert column_change("ALTER TABLE t ADD PRIMARY KEY (id)") is None


def test_a_widened_column_is_applied_online() -> None:
    wider = shape(ID, ColumnInfo("note", "text", "text"))
    result = evolution(OLD, wider, "ALTER TABLE t MODIFY note TEXT", {"note"})
    assert result == wider
    assert describe_evolution(OLD, wider) == "widened column(s) note"
    more = ColumnInfo("s", "enum", "enum('a','b','c')", enum_values=("a", "b", "c"))
    fewer = ColumnInfo("s", "enum", "enum('a','b')", enum_values=("a", "b"))
    grown = evolution(
        shape(ID, fewer), shape(ID, more), "ALTER TABLE t MODIFY s ENUM('a','b','c')", set()
    )
    assert grown == shape(ID, more)
    shrunk = evolution(
        shape(ID, more), shape(ID, fewer), "ALTER TABLE t MODIFY s ENUM('a','b')", set()
    )
    assert isinstance(shrunk, str) and "removes members" in shrunk
