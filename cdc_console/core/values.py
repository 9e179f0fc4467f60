"""The types of the values a row carries through the pipeline.

A canonical value is what ``cdc_console.values.canonical`` makes of a driver's value, whichever
path read it (snapshot SELECT or binlog): ``int``, ``float``, ``str`` or ``None`` (the table of
which SQL type becomes which is in that module). Rows, keys, records and sinks all carry these;
only the drivers' own values (pymysql's, pymysqlreplication's) are left untyped, under the
names of ``core.untyped``.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

CanonicalValue = int | float | str | None
#: A canonical row: column name -> canonical value.
CanonicalRow = dict[str, CanonicalValue]
#: A chunk key as the server's driver shapes it, comparable with chunk boundaries.
RawKey = int | float | str | bytes | Decimal | dt.date | dt.datetime | dt.timedelta | None

#: A value of a JSON document, as the value types' ``to_dict`` forms are (stored in the state
#: database, carried in plans and task reports). Their ``from_dict`` take
#: ``Mapping[str, Loaded]`` (``core.untyped``): what ``json.loads`` returns, checked as read.
JSONValue = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]
JSONObject = dict[str, JSONValue]
