"""The JSON family: canonical JSON text, ``json.dumps(v, sort_keys=True, separators=(",", ":"),
ensure_ascii=False)``.

MariaDB's JSON is LONGTEXT with a ``json_valid()`` CHECK, and information_schema reports
``longtext``; both paths return the same text. Only columns whose ``data_type`` is ``json`` are
canonicalised as JSON, so a MariaDB JSON column must be reported as ``json`` by the schema loader
(otherwise it is, consistently, plain text). MySQL's binary JSON decodes to Python objects with
*bytes* keys and strings, ``Decimal`` for decimals and ``datetime``/``time`` for temporals; they
become what ``json.loads`` of MySQL's JSON text would give (bytes -> str, Decimal -> float,
temporals -> MySQL's text forms). A top-level JSON ``null`` literal is a value, kept apart from
SQL NULL: it is the text ``"null"`` on both paths. MariaDB's binlog holds its text; MySQL's
binary JSON decodes it to ``None``, which the decoder marks ``JSON_NULL_SOURCE`` in
``none_sources``.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

from cdc_console.core.schema import ColumnInfo
from cdc_console.core.untyped import DriverValue
from cdc_console.core.values import CanonicalValue
from cdc_console.values.codecs.base import ColumnPlan, Converter, FamilyCodec, KeyConverter
from cdc_console.values.codecs.temporal import time_text

_DURATION = time_text(6, False)


def _plain_json(value: DriverValue) -> object:
    """MySQL binary-JSON decoder output -> what ``json.loads`` of MySQL's JSON text would give."""
    if isinstance(value, dict):
        return {
            (k.decode("utf-8") if isinstance(k, bytes) else k): _plain_json(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_plain_json(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(" ", "microseconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        return value.isoformat("microseconds")
    if isinstance(value, dt.timedelta):
        return _DURATION(value)
    return value


def _json_text(decoded: bool) -> Converter:
    """Canonical JSON text. ``decoded``: the binlog may hand over already-parsed MySQL JSON."""

    def conv(value: DriverValue) -> CanonicalValue:
        if type(value) is str or (not decoded and isinstance(value, bytes)):
            parsed = json.loads(value)
        else:
            # MySQL binary JSON: a bytes value here is a decoded top-level JSON *string*.
            parsed = _plain_json(value)
        if parsed is None:
            return "null"
        return json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    return conv


_SNAPSHOT = _json_text(decoded=False)
_BINLOG = _json_text(decoded=True)


class JsonCodec(FamilyCodec):
    def plan(self, column: ColumnInfo) -> ColumnPlan:
        return ColumnPlan(
            _SNAPSHOT,
            _BINLOG,
            binlog_not_null=None if column.nullable else "null",
            is_json=True,
        )

    def key(self, column: ColumnInfo, plan: ColumnPlan, binlog: bool) -> KeyConverter | None:
        return plan.binlog if binlog else plan.snapshot
