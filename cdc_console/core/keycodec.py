"""A lossless JSON form for chunk-key values, so split ranges survive SQLite and Spark offsets.

JSON has no Decimal, bytes, date or big-integer-safe number; key values of those types are
wrapped in a one-key tagged dict. Plain ints and strings stay as they are, which keeps the stored
state readable (``{"start": 1000, "end": 2000}``).
"""

from __future__ import annotations

import base64
import datetime as dt
from decimal import Decimal

from cdc_console.core.untyped import Loaded
from cdc_console.core.values import JSONValue, RawKey


def encode_key(value: RawKey) -> JSONValue:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**53 else {"$int": str(value)}
    if isinstance(value, str):
        return value
    if isinstance(value, Decimal):
        return {"$dec": str(value)}
    if isinstance(value, bytes | bytearray):
        return {"$b64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dt.datetime):
        return {"$dt": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$date": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"$td": value.total_seconds()}
    if isinstance(value, float):
        return {"$f": repr(value)}
    raise TypeError(f"cannot encode chunk key value of type {type(value).__name__}")


def decode_key(value: Loaded) -> RawKey:
    """``value``: a parsed JSON value, not yet checked (``json.loads`` output: ``Loaded``)."""
    if not isinstance(value, dict):
        plain: RawKey = value
        return plain
    ((tag, raw),) = value.items()
    if tag == "$int":
        return int(raw)
    if tag == "$dec":
        return Decimal(raw)
    if tag == "$b64":
        return base64.b64decode(raw)
    if tag == "$dt":
        return dt.datetime.fromisoformat(raw)
    if tag == "$date":
        return dt.date.fromisoformat(raw)
    if tag == "$td":
        return dt.timedelta(seconds=float(raw))
    if tag == "$f":
        return float(raw)
    raise ValueError(f"unknown chunk key tag {tag!r}")
