"""The stream's row layout as Spark sees it: the change record fields plus a ``payload`` column.

Kept apart from ``protocol.py`` (which needs pyarrow, the sinks and the state) so that the data
source class Spark's helper processes import to plan a query stays light: each of those helpers
is a Python process of its own that lives as long as the job.
"""

from __future__ import annotations

from typing import Final

from cdc_console.core.records import FIELDS

WIRE_FIELDS: Final = (*FIELDS, ("payload", "binary"))
_SPARK_TYPES: Final = {"string": "STRING", "int64": "BIGINT", "int32": "INT", "binary": "BINARY"}
SPARK_SCHEMA_DDL: Final = ", ".join(f"{name} {_SPARK_TYPES[kind]}" for name, kind in WIRE_FIELDS)
