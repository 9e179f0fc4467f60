"""The one place ``Any`` is spelled: what untyped third-party APIs hand the pipeline.

mypy runs strict over the whole package, so an ``Any`` hides a hole in the type checking. The
only holes allowed are the ones a library leaves: pymysql, mysql-replication and pyarrow ship
no type information, ``tomllib``, ``json`` and ``sqlite3`` return ``Any`` by design, deltalake
types a MERGE's metrics ``dict[str, Any]``, and Spark's Python data source API is typed loosely.
Each such boundary has a name here that says where the value
came from; code past the boundary works on the value types of ``core`` (``CanonicalValue``,
``RawKey``, ``JSONObject``...). ``tests/unit/test_untyped_boundaries.py`` keeps ``Any`` out of
every other module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

#: A pymysql connection (``pymysql.connections.Connection``): pymysql ships no types.
Connection: TypeAlias = Any
#: A pymysql cursor.
Cursor: TypeAlias = Any
#: One value as pymysql (text or binary protocol) or mysql-replication decoded it, before
#: ``values.canonical`` turns it into a ``CanonicalValue``.
DriverValue: TypeAlias = Any
#: A result row as pymysql returns it.
DriverRow: TypeAlias = tuple[Any, ...]
#: A row image as mysql-replication decodes it: column name -> value.
DriverImage: TypeAlias = dict[str, Any]
#: A mysql-replication event, packet or column descriptor (the library's classes are untyped).
BinlogLibObject: TypeAlias = Any
#: A Python value pyarrow hands back (``Array.to_pylist``, ``Scalar.as_py``): pyarrow ships no
#: types, so what the Arrow type decoded to is known to the column codec, not to mypy.
ArrowValue: TypeAlias = Any
#: The metrics dict of a delta-rs MERGE (``TableMerger.execute``; deltalake types it
#: ``dict[str, Any]``): counters such as ``num_target_rows_inserted``.
DeltaMetrics: TypeAlias = dict[str, Any]
#: A row as ``sqlite3`` returns it.
SqliteRow: TypeAlias = Sequence[Any]
#: A parsed TOML document or table (``tomllib`` returns ``dict[str, Any]``).
TomlTable: TypeAlias = dict[str, Any]
#: What ``json.loads`` returned, before it is checked against the shape expected.
Loaded: TypeAlias = Any
#: Keyword arguments passed through, unread, to an untyped library call.
PassThrough: TypeAlias = Any
