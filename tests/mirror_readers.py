"""A mirror read three ways: ours, delta-rs' ``QueryBuilder`` and Polars.

Merge-on-read mirrors are written by our own commit code (deletion vectors are not a thing a
Python library writes), so what we write must read the same through readers that share none of
our code: DataFusion over delta-kernel (``QueryBuilder``) and Polars' ``read_delta`` and
``scan_delta``. After every integration test, each mirror it left behind (a kill -9's, a
re-dump's, a fixture's, a type test's) is read through :func:`read_mirror` (``check_lake``), so
all of them are checked by every reader at their final version.
"""

from __future__ import annotations

import os
import shutil
import string
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# One thread: the check runs beside the Spark job under test on a 2-core box.
os.environ.setdefault("POLARS_MAX_THREADS", "1")

import polars as pl
import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder

from cdc_console.sinks.mirror_read import read_delta


def read_mirror(path: Path | str) -> pa.Table:
    """The mirror's live rows as our reader gives them, once the independent readers agree.

    Every reader reads the same version: a test polls mirrors while the job commits to them."""
    table = DeltaTable(str(path))
    ours = read_delta(table)
    for reader, theirs in independent_reads(str(path), table.version()):
        assert_same_rows(ours, theirs, reader)
    return ours


def independent_reads(path: str, version: int) -> Iterator[tuple[str, pa.Table]]:
    table = DeltaTable(path, version=version)
    query = QueryBuilder().register("m", table).execute("SELECT * FROM m").read_all()
    yield "delta-rs QueryBuilder", pa.table(query)
    with polars_readable(Path(path)) as readable:
        yield "Polars read_delta", pl.read_delta(str(readable), version=version).to_arrow()
        scanned = pl.scan_delta(str(readable), version=version).collect()
        yield "Polars scan_delta", scanned.to_arrow()


#: what Polars 2.1's own Delta reader finds in a local table's path: it percent-encodes any
#: other character (a space, a quote, any non-ASCII letter) and then looks for the encoded name
POLARS_PATH = frozenset(string.ascii_letters + string.digits + "/-_.~!$&'()*+,;=:@")


@contextmanager
def polars_readable(path: Path) -> Iterator[Path]:
    """The table at a path Polars can open: itself, or a copy under a plain name (a symlink
    does not do, Polars resolves it). The data is the same files and log, byte for byte."""
    if set(str(path.resolve())) <= POLARS_PATH:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="polars-") as plain:
        copy = Path(plain) / "mirror"
        shutil.copytree(path, copy)
        yield copy


def assert_same_rows(ours: pa.Table, theirs: pa.Table, reader: str) -> None:
    """The same columns and the same multiset of rows, compared in our schema (readers differ
    in how they spell a type, ``string_view`` or ``large_string``, not in the values)."""
    assert sorted(theirs.column_names) == sorted(ours.column_names), reader
    aligned = theirs.select(ours.column_names).cast(ours.schema)
    assert aligned.num_rows == ours.num_rows, f"{reader}: {aligned.num_rows} != {ours.num_rows}"
    if same_when_sorted(ours, aligned):
        return
    missing = rows_of(ours) - rows_of(aligned)
    extra = rows_of(aligned) - rows_of(ours)
    assert not missing and not extra, f"{reader} reads otherwise: {missing=} {extra=}"


def same_when_sorted(ours: pa.Table, theirs: pa.Table) -> bool:
    """Whether both hold the same rows, proven in Arrow: floats compared by their bits (so
    ``-0.0`` and ``0.0`` differ, as their ``repr`` does), rows sorted on every column that
    sorts. ``False`` proves nothing (ties on a nested column may sort apart): the row-by-row
    multiset comparison then decides. It exists because that comparison took minutes on a
    million-row mirror."""
    left, right = bitwise(ours), bitwise(theirs)
    keys = [
        (name, "ascending") for name in left.column_names if sortable(left.schema.field(name).type)
    ]
    if keys:
        try:
            left, right = left.sort_by(keys), right.sort_by(keys)
        except pa.ArrowNotImplementedError:
            return False
    return left.equals(right)


def bitwise(table: pa.Table) -> pa.Table:
    columns = []
    for column in table.columns:
        if pa.types.is_floating(column.type):
            width = {16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[column.type.bit_width]
            column = pa.chunked_array([chunk.view(width) for chunk in column.chunks], width)
        columns.append(column)
    return pa.table(columns, names=table.column_names)


def sortable(kind: pa.DataType) -> bool:
    return not pa.types.is_nested(kind) and not pa.types.is_dictionary(kind)


def rows_of(table: pa.Table) -> Counter[tuple[str, ...]]:
    def canonical(row: dict[str, Any]) -> tuple[str, ...]:
        return tuple(repr(row[name]) for name in table.column_names)

    return Counter(canonical(row) for row in table.to_pylist())


def mirrors_under(root: Path) -> list[Path]:
    """The Delta mirrors anywhere under ``root`` (not the append-only change feeds)."""
    return sorted(
        log.parent
        for log in root.rglob("_delta_log")
        if log.is_dir() and "_changelog" not in log.parent.parts
    )


def check_lake(root: Path) -> int:
    """Read every mirror under ``root`` three ways (``read_mirror``); how many there were."""
    found = mirrors_under(root)
    for path in found:
        read_mirror(path)
    return len(found)
