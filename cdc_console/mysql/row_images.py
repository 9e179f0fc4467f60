"""Row images decoded straight from a row event's bytes, exactly as pymysqlreplication decodes them.

:class:`RowsPlan` holds one precompiled reader per column of a table (from its TABLE_MAP's
columns) and decodes a row event's images with them, replicating the library's value decoding
(1.0.17) byte for byte, its quirks included (see ``cdc_console.values.canonical``): same Python
value, same none-source side effects. A column type it does not cover makes ``compile`` return
None, and the caller leaves the table to the library's decoder; a value it cannot read raises,
and the caller lets the library decode (or fail on) the untouched event.

Each image is decoded in C (``_rowimages.c``, built at install when a C compiler is there) for
the common column types, the others keeping their Python reader, called from C: the Python
image loop and its readers were 40% of a binlog reader's CPU. Without the compiled module, or
with ``CDC_CONSOLE_PURE_PYTHON_ROWS=1``, the Python loop below decodes; the tests hold both to
the library.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable, Sequence
from types import ModuleType

from pymysqlreplication.bitmap import BitCount
from pymysqlreplication.constants import FIELD_TYPE, NONE_SOURCE

from cdc_console.core.untyped import BinlogLibObject, DriverImage
from cdc_console.mysql.native import compiled_rows_wanted
from cdc_console.mysql.row_readers import (
    NoneSources,
    Reader,
    UnsupportedColumn,
    column_reader,
    encoding_of,
)

_rowimages: ModuleType | None
try:
    from cdc_console.mysql import _rowimages
except ImportError:  # no C compiler at install: the Python image loop below
    _rowimages = None

__all__ = ["NoneSources", "RowDict", "RowsPlan"]

#: A row of a row event as mysql-replication shapes it: ``values``/``before_values``/
#: ``after_values`` -> the image, ``none_sources``/... -> column -> ``NONE_SOURCE``.
RowDict = dict[str, DriverImage]
#: ``(data, pos, present, null_bytes, full, sources) -> (values, none-sources, pos)``: one image
ImageReader = Callable[
    [bytes, int, tuple[bool, ...], int, bool, NoneSources], tuple[DriverImage, dict[str, str], int]
]

# Each reader mirrors the branch of RowsEvent.__read_values_name (1.0.17) for one column type:
# same byte layout, same Python value, same none-source side effects.


# ``_rowimages.c``'s column kinds (its ``enum Kind``)
_K_PYTHON, _K_INT, _K_INT24, _K_FLOAT, _K_DOUBLE, _K_STRING = range(6)
_K_DECIMAL, _K_DATETIME2, _K_DATE, _K_TIMESTAMP2, _K_YEAR = range(6, 11)
_INT_SIZES = {FIELD_TYPE.TINY: 1, FIELD_TYPE.SHORT: 2, FIELD_TYPE.LONG: 4, FIELD_TYPE.LONGLONG: 8}
NativeSpec = tuple[str, str | None, int, int, int, object, str]


def _native_spec(
    column: BinlogLibObject,
    key: str,
    reader: Reader,
    ignore_decode_errors: bool,
    exact: str | None = None,
) -> NativeSpec:
    """How ``_rowimages.c`` reads ``column``: its own decoder for the common types, else the
    column's Python reader. Called after ``column_reader`` accepted the column."""
    kind = column.type
    name = column.name
    unsigned = int(bool(column.unsigned))
    errors = "ignore" if ignore_decode_errors else "strict"
    if kind in _INT_SIZES:
        return (key, name, _K_INT, _INT_SIZES[kind], unsigned, None, errors)
    if kind == FIELD_TYPE.INT24:
        return (key, name, _K_INT24, 3, unsigned, None, errors)
    if kind == FIELD_TYPE.FLOAT:
        return (key, name, _K_FLOAT, 4, 0, None, errors)
    if kind == FIELD_TYPE.DOUBLE:
        return (key, name, _K_DOUBLE, 8, 0, None, errors)
    if kind in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING, FIELD_TYPE.BLOB):
        size = (
            column.length_size if kind == FIELD_TYPE.BLOB else (2 if column.max_length > 255 else 1)
        )
        encoding = encoding_of(column, exact)
        if 1 <= size <= 8 and (encoding is None or isinstance(encoding, str)):
            return (key, name, _K_STRING, size, 0, encoding, errors)
    if kind == FIELD_TYPE.NEWDECIMAL:
        return (key, name, _K_DECIMAL, column.precision, column.decimals, None, errors)
    if kind == FIELD_TYPE.DATETIME2:
        return (key, name, _K_DATETIME2, column.fsp, 0, None, errors)
    if kind == FIELD_TYPE.DATE:
        return (key, name, _K_DATE, 0, 0, None, errors)
    if kind == FIELD_TYPE.TIMESTAMP2:
        return (key, name, _K_TIMESTAMP2, column.fsp, 0, None, errors)
    if kind == FIELD_TYPE.YEAR:
        return (key, name, _K_YEAR, 1, 0, None, errors)
    return (key, name, _K_PYTHON, 0, 0, reader, errors)


def _native_decoder(specs: list[NativeSpec]) -> ImageReader | None:
    """The compiled image decoder of a table, or None (not built, switched off, refused)."""
    if _rowimages is None or not compiled_rows_wanted():
        return None
    try:
        decoder = _rowimages.ImageDecoder(
            list(specs),
            decimal.Decimal,
            datetime.datetime.utcfromtimestamp,
            NONE_SOURCE.NULL,
            NONE_SOURCE.COLS_BITMAP,
        )
    except (TypeError, ValueError):
        return None
    image: ImageReader = decoder.image
    return image


class RowsPlan:
    """The compiled decoders of one table's columns: ``(value key, none-source key, reader)``."""

    def __init__(
        self, columns: list[tuple[str, str | None, Reader]], native: ImageReader | None = None
    ) -> None:
        self.columns = columns
        self.count = len(columns)
        self._bitmaps: dict[bytes, tuple[tuple[bool, ...], int, bool]] = {}
        #: the image decoder: compiled (``_rowimages``) or this class's Python loop
        self.image: ImageReader = native if native is not None else self._python_image
        self.compiled = native is not None

    @classmethod
    def compile(
        cls,
        columns: BinlogLibObject,
        ignore_decode_errors: bool,
        exact: Sequence[str | None] = (),
    ) -> RowsPlan | None:
        """The plan of a table's columns; ``exact`` holds, per column, the codec that decodes
        its strings as the server converts them (None: the library's pick)."""
        compiled = []
        specs = []
        try:
            for index, column in enumerate(columns):
                name = column.name
                key = name if name else "UNKNOWN_COL" + str(index)
                codec = exact[index] if index < len(exact) else None
                reader = column_reader(column, index, ignore_decode_errors, codec)
                compiled.append((key, name, reader))
                specs.append(_native_spec(column, key, reader, ignore_decode_errors, codec))
        except (UnsupportedColumn, AttributeError, TypeError, KeyError):
            return None
        return cls(compiled, _native_decoder(specs))

    def _bitmap(self, bitmap: bytes) -> tuple[tuple[bool, ...], int, bool]:
        info = self._bitmaps.get(bitmap)
        if info is None:
            present = tuple(bool(bitmap[i >> 3] & (1 << (i & 7))) for i in range(self.count))
            info = (present, (BitCount(bitmap) + 7) // 8, all(present))
            self._bitmaps[bitmap] = info
        return info

    def _python_image(
        self,
        data: bytes,
        pos: int,
        present: tuple[bool, ...],
        null_bytes: int,
        full: bool,
        sources: NoneSources,
    ) -> tuple[DriverImage, dict[str, str], int]:
        """One image and its none-sources (as the library keeps them), in Python."""
        nulls = data[pos : pos + null_bytes]
        if len(nulls) != null_bytes:
            raise ValueError("short null bitmap")
        pos += null_bytes
        values: DriverImage = {}
        null_index = 0
        null_source = NONE_SOURCE.NULL
        for i, (key, source_key, read) in enumerate(self.columns):
            if not full and not present[i]:
                sources[source_key] = NONE_SOURCE.COLS_BITMAP
                values[key] = None
                continue
            if nulls[null_index >> 3] & (1 << (null_index & 7)):
                sources[source_key] = null_source
                values[key] = None
            else:
                values[key], pos = read(data, pos, sources)
            null_index += 1
        none_sources = {k: sources.get(k, "null") for k, v in values.items() if v is None}
        return values, none_sources, pos

    def single_images(
        self, data: bytes, pos: int, end: int, bitmap: bytes, sources: NoneSources
    ) -> tuple[list[RowDict], int]:
        present, null_bytes, full = self._bitmap(bitmap)
        rows = []
        image = self.image
        while pos < end:
            values, none_sources, pos = image(data, pos, present, null_bytes, full, sources)
            rows.append({"values": values, "none_sources": none_sources})
        if pos != end:
            raise ValueError("row images overran the event")
        return rows, pos

    def update_images(
        self,
        data: bytes,
        pos: int,
        end: int,
        bitmap: bytes,
        bitmap2: bytes,
        sources: NoneSources,
    ) -> tuple[list[RowDict], int]:
        present, null_bytes, full = self._bitmap(bitmap)
        present2, null_bytes2, full2 = self._bitmap(bitmap2)
        rows = []
        image = self.image
        while pos < end:
            before, before_sources, pos = image(data, pos, present, null_bytes, full, sources)
            after, after_sources, pos = image(data, pos, present2, null_bytes2, full2, sources)
            rows.append(
                {
                    "before_values": before,
                    "before_none_sources": before_sources,
                    "after_values": after,
                    "after_none_sources": after_sources,
                }
            )
        if pos != end:
            raise ValueError("row images overran the event")
        return rows, pos
