"""The character families: CHAR, STRING (VARCHAR, *TEXT, ENUM) and SET.

Both drivers hand back decoded text (the binlog decoders decode each column with its own
character set, ``mysql.charsets``), so the canonical value is that text, with two exceptions:

* CHAR never keeps trailing spaces on retrieval; a session with PAD_CHAR_TO_FULL_LENGTH would add
  them back on the snapshot path only, so they are stripped on both.
* SET: pymysql gives ``'a,c'``, the binlog a Python ``set``, and for the empty set ``None``, the
  same as SQL NULL. The decoder records why in ``none_sources`` (``"empty set"`` vs ``"null"``);
  without it, ``None`` on a NOT NULL SET column still becomes ``''``, and on a nullable one stays
  ``None``. The canonical value lists the members in definition order joined by ``,``.
"""

from __future__ import annotations

from cdc_console.core.schema import ColumnInfo
from cdc_console.core.untyped import DriverValue
from cdc_console.core.values import CanonicalValue
from cdc_console.values.codecs.base import ColumnPlan, Converter, FamilyCodec


def _char(value: str) -> CanonicalValue:
    return value.rstrip(" ")


class CharCodec(FamilyCodec):
    def plan(self, column: ColumnInfo) -> ColumnPlan:
        return ColumnPlan(_char, _char)


class StringCodec(FamilyCodec):
    """VARCHAR, the TEXTs and ENUM: the drivers' text is the canonical value."""


def _set_text(members: tuple[str, ...]) -> Converter:
    """SET as its member list in definition order; pymysql already sends that text."""

    def conv(value: DriverValue) -> CanonicalValue:
        if type(value) is str:
            return value
        chosen = [m for m in members if m in value]
        if len(chosen) != len(value):  # members unknown to our schema: keep them, deterministically
            chosen.extend(sorted(set(value).difference(members)))
        return ",".join(chosen)

    return conv


class SetCodec(FamilyCodec):
    def plan(self, column: ColumnInfo) -> ColumnPlan:
        conv = _set_text(column.enum_values)
        not_null = "" if not column.nullable else None
        return ColumnPlan(conv, conv, binlog_not_null=not_null, is_set=True)
