"""What a zero or invalid date becomes in the mirror: one rule per column, the same on every path.

MySQL and MariaDB store dates no calendar holds when a session's ``sql_mode`` lets them
(``'0000-00-00'``, ``'2024-00-10'``, ``'2024-04-31'`` under ``ALLOW_INVALID_DATES``, the zero
TIMESTAMP). A Delta DATE or TIMESTAMP cannot hold them, so every DATE, DATETIME and TIMESTAMP
column has a rule (``[pipeline] invalid_dates``), applied where a driver's value becomes the
canonical value, so the snapshot, the binlog, the change feed and ``verify`` agree:

- ``null`` (the default, as Debezium does for nullable columns): the value is NULL;
- ``sentinel``: the value is the earliest date Delta holds, ``0001-01-01`` (``0001-01-01
  00:00:00`` with the column's fractional digits for DATETIME and TIMESTAMP), so a reader can
  tell "the source held a date we could not keep" from "the source held NULL";
- ``text``: the value is NULL and the mirror has a companion string column, the column's name
  with ``COMPANION_SUFFIX`` (``shipped__text``), that holds the source's own text of the
  invalid date (``'2024-04-31'``, ``'0000-00-00 00:00:00.000'``) and is NULL in every other
  row, so nothing the source held is lost and the date column keeps its type.

The rule travels with the column (``ColumnInfo.invalid_dates``): the Spark executors and the
binlog reader apply the rule the table was captured with, and a change of rule is a change of
the table's shape, which reads the table again so old rows follow the new rule too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from cdc_console.core.mysqltypes import TypeFamily


class InvalidDates(StrEnum):
    NULL = "null"
    SENTINEL = "sentinel"
    TEXT = "text"


#: the name of a ``text``-ruled column's companion is the column's name with this after it
COMPANION_SUFFIX = "__text"


def companion_name(column: str) -> str:
    """The mirror column that holds the source text of ``column``'s invalid dates."""
    return column + COMPANION_SUFFIX


def zero_text(family: TypeFamily, precision: int) -> str:
    """The server's text of a zero value of a date column (``0000-00-00 00:00:00.000`` for a
    DATETIME(3)): what the binlog's epoch-0 TIMESTAMP stands for."""
    return _text_at("0000-00-00", family, precision, zone=False)


def _text_at(day: str, family: TypeFamily, precision: int, *, zone: bool) -> str:
    if family is TypeFamily.DATE:
        return day
    text = f"{day} 00:00:00" + (f".{'0' * min(precision, 6)}" if precision > 0 else "")
    return text + "Z" if zone and family is TypeFamily.TIMESTAMP else text


#: the families the rule applies to, by the name the config uses for them
DATE_FAMILIES: dict[str, TypeFamily] = {
    "date": TypeFamily.DATE,
    "datetime": TypeFamily.DATETIME,
    "timestamp": TypeFamily.TIMESTAMP,
}

SENTINEL_DAY = "0001-01-01"


def sentinel_text(family: TypeFamily, precision: int) -> str:
    """The canonical sentinel of a column: its type's text form at ``0001-01-01`` midnight."""
    return _text_at(SENTINEL_DAY, family, precision, zone=True)


@dataclass(frozen=True)
class InvalidDateRules:
    """``[pipeline] invalid_dates`` resolved: a rule per date family, and per table pattern a
    rule per column (``"*"``: every date column of the table). A column's own rule wins over its
    table's, which wins over its family's."""

    by_family: Mapping[TypeFamily, InvalidDates] = field(default_factory=dict)
    by_table: Mapping[str, Mapping[str, InvalidDates]] = field(default_factory=dict)

    def rule(
        self, family: TypeFamily | None, name: str, table: Mapping[str, InvalidDates]
    ) -> InvalidDates:
        """The rule of column ``name`` of ``family``, given its table's entries (``table``)."""
        if family not in DATE_FAMILIES.values():
            return InvalidDates.NULL
        for key in (name, "*"):
            for column, rule in table.items():
                if column.lower() == key.lower():
                    return rule
        assert family is not None
        return self.by_family.get(family, InvalidDates.NULL)
