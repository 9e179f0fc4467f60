"""Typed Arrow tables straight from a snapshot chunk's SELECT, for sinks that append them.

The per-record path (canonical row dict -> JSON -> ``ChangeRecord`` -> JSON parse -> typed
column) costs tens of microseconds per row; a first snapshot of a table only ever *adds* rows
to key ranges nothing else wrote, so its chunks can skip it: the reader returns the driver's
tuples (``SnapshotSplitReader`` in text mode) and this module converts them column by column.

The input is the chunk's raw text-protocol columns (``mysql.rawrows``). The result must equal
``rows_to_table(schema, canonical rows)`` exactly, value for value (the tests compare both for
every supported type). Per column:

- integer and plain character columns (VARCHAR, TEXT, ENUM) are cast by Arrow from their text
  (UTF-8 validated; a value Arrow refuses takes the per-value path and its real error);
- DECIMAL, DATE, DATETIME, TIMESTAMP arrive as the server's text, which has exactly the
  column's scale or fractional digits, i.e. the canonical text; Arrow parses it in C
  (TIMESTAMP text is UTC, the session's zone, and becomes a UTC instant). Values the canonical
  form maps to NULL -- zero or invalid dates, year 0, the epoch-0 TIMESTAMP -- and DECIMALs wider
  than Arrow's 38 digits take the per-value path instead, for that column of that chunk.
- every other type is decoded as the connection's cursor would have decoded it, then goes
  through the normaliser's own converter and the sink codec, exactly as a canonical row would.

The companion of a ``text``-ruled date column (``core.invalid_dates``) is built from that
column's values as the cursor decodes them: the text of each date the cursor could not hold
(all NULL when Arrow parsed the whole column, which it does only when no value is invalid).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from cdc_console.core.invalid_dates import InvalidDates
from cdc_console.core.mysqltypes import TEMPORAL, TypeFamily
from cdc_console.core.schema import ColumnInfo, TableSchema
from cdc_console.core.untyped import DriverValue
from cdc_console.core.values import CanonicalValue
from cdc_console.mysql.connection import text_mode_decoders
from cdc_console.mysql.rawrows import RawResult
from cdc_console.values.arrow import ColumnCodec, arrow_schema, codec_for
from cdc_console.values.canonical import invalid_date_text, snapshot_converter
from cdc_console.values.codecs import StoredKind

# Text a temporal value can start with whose canonical value is NULL (or needs a closer look):
# year 0, and the epoch-0 TIMESTAMP the binlog uses for the zero timestamp.
_SUSPECT_PREFIXES = ("0000",)
_SUSPECT_TIMESTAMP_PREFIXES = ("0000", "1970-01-01 00:00:00")


class SnapshotArrowBuilder:
    """Converts one table's text-mode snapshot tuples into its typed mirror schema."""

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.arrow_schema = arrow_schema(schema)
        decoders = text_mode_decoders(schema.columns)
        self._columns: list[_ColumnPlan] = [
            _ColumnPlan(column, codec_for(column), decode)
            for column, decode in zip(schema.columns, decoders, strict=True)
        ]
        #: Text columns of the last ``table()`` that Arrow could not parse and went value by value.
        self.per_value_columns: list[str] = []
        #: per companion column (``TableSchema.companions``), its date column's place
        self._companions = [
            i for i, c in enumerate(schema.columns) if c.invalid_dates is InvalidDates.TEXT
        ]

    def table(self, raw: RawResult) -> pa.Table:
        if len(raw.arrays) != len(self._columns):
            raise ValueError(
                f"{self.schema.table_id}: snapshot rows have {len(raw.arrays)} values for "
                f"{len(self._columns)} columns"
            )
        if raw.row_count == 0:
            return self.arrow_schema.empty_table()
        arrays = []
        self.per_value_columns = []
        driven: dict[int, list[DriverValue]] = {}
        for index, (plan, values) in enumerate(zip(self._columns, raw.arrays, strict=True)):
            array = None
            if plan.fast or plan.plain:
                try:
                    text = values.cast(pa.string())
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    pass  # not UTF-8: the driver's decoder raises the real error below
                else:
                    array = plan.fast_array(text) if plan.fast else plan.plain_array(text)
                if array is None:
                    self.per_value_columns.append(plan.column.name)
            if array is None:
                driver = [raw.driver_value(index, v) for v in raw.values(index)]
                if plan.decode is not None:
                    driver = [None if v is None else plan.decode(v) for v in driver]
                driven[index] = driver
                array = plan.codec.to_arrow(plan.converted(driver))
            arrays.append(array)
        for index in self._companions:
            if index not in driven:  # Arrow parsed every value: none was invalid
                arrays.append(pa.nulls(raw.row_count, pa.string()))
            else:
                driver = driven[index]
                arrays.append(pa.array([invalid_date_text(v) for v in driver], pa.string()))
        for value in self.schema.origin.values():
            arrays.append(pa.array([value] * raw.row_count, pa.string()))
        return pa.Table.from_arrays(arrays, schema=self.arrow_schema)


class _ColumnPlan:
    def __init__(
        self, column: ColumnInfo, codec: ColumnCodec, decode: Callable[[str], DriverValue] | None
    ) -> None:
        self.column = column
        self.codec = codec
        self.decode = decode
        self.convert = snapshot_converter(column)
        family = column.family
        self.temporal = family in TEMPORAL
        self.timestamp = family is TypeFamily.TIMESTAMP
        self.suspects = _SUSPECT_TIMESTAMP_PREFIXES if self.timestamp else _SUSPECT_PREFIXES
        self.fast = decode is not None and codec.kind in (
            StoredKind.DECIMAL,
            StoredKind.DATE,
            StoredKind.DATETIME,
            StoredKind.TIMESTAMP,
        )
        # Integer and character columns whose canonical value is the driver's own.
        self.plain = self.convert is None and (
            (family is TypeFamily.INTEGER and codec.kind in (StoredKind.INT, StoredKind.WIDE_INT))
            or (codec.kind is StoredKind.STRING and family is TypeFamily.STRING)
        )

    def converted(self, values: list[DriverValue]) -> list[CanonicalValue]:
        """Decoded driver values -> canonical ones."""
        convert = self.convert
        if convert is not None:
            values = [None if v is None else convert(v) for v in values]
        return values

    def plain_array(self, text: pa.Array) -> pa.Array | None:
        """An integer or character column from its text, or None (the per-value path)."""
        target = self.codec.arrow_type
        if pa.types.is_string(target):
            return text
        try:
            return pc.cast(text, target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None

    def fast_array(self, text: pa.Array) -> pa.Array | None:
        """The column parsed by Arrow, or None when a value needs the per-value path."""
        if self.temporal:
            for prefix in self.suspects:
                if pc.any(pc.starts_with(text, prefix)).as_py():
                    return None
        target = self.codec.arrow_type
        try:
            if self.timestamp:
                return pc.cast(pc.cast(text, pa.timestamp("us")), target)
            return pc.cast(text, target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
