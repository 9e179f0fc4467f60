"""The key columns, footers and deletion vectors of a mirror's data files, kept between batches.

A merge-on-read batch must find where each changed key is live. Reading the key columns of
every active file again for each batch made the apply cost grow with the table, not with the
change. Data files and deletion vectors are never changed once written (a new version of a
file's vector is a new vector), so what was read of them stays true: a file's key columns are
kept by its path and size, a vector's positions by its identity, and what is kept is bounded
by a row budget, the least recently used going first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cdc_console.sinks.deletion_vectors import DeletionVector
from cdc_console.sinks.mirror_read import read_file

#: key values kept at most, over all mirrors (about 8 bytes each for an integer key)
KEPT_ROWS = 20_000_000
#: Parquet footers kept at most (a few KB each)
KEPT_FOOTERS = 4096


class FileKeys:
    """A bounded cache of data files' key columns and of deletion vectors' positions."""

    def __init__(self, budget: int = KEPT_ROWS) -> None:
        self._budget = budget
        self._held = 0
        self._keys: OrderedDict[tuple[Path, int, tuple[str, ...]], pa.Table] = OrderedDict()
        self._vectors: OrderedDict[tuple[Path, str, int | None], list[int]] = OrderedDict()
        self._footers: OrderedDict[tuple[Path, int], pq.FileMetaData] = OrderedDict()
        self._lock = threading.Lock()

    def key_columns(self, path: Path, size: int, columns: Sequence[str]) -> pa.Table:
        """``columns`` of the data file at ``path`` (of ``size`` bytes)."""
        entry = (path, size, tuple(columns))
        with self._lock:
            found = self._keys.get(entry)
            if found is not None:
                self._keys.move_to_end(entry)
                return found
        data = read_file(path, columns).combine_chunks()
        with self._lock:
            if entry not in self._keys:
                self._keys[entry] = data
                self._held += data.num_rows
                self._shrink()
        return data

    def footer(self, path: Path, size: int) -> pq.FileMetaData:
        """The Parquet footer of the data file at ``path`` (of ``size`` bytes)."""
        entry = (path, size)
        with self._lock:
            found = self._footers.get(entry)
            if found is not None:
                self._footers.move_to_end(entry)
                return found
        read = pq.read_metadata(path)
        with self._lock:
            self._footers[entry] = read
            while len(self._footers) > KEPT_FOOTERS:
                self._footers.popitem(last=False)
        return read

    def positions(self, root: Path, vector: DeletionVector) -> list[int]:
        """The row positions ``vector`` (of the table at ``root``) marks deleted."""
        entry = (root, vector.path_or_inline, vector.offset)
        with self._lock:
            found = self._vectors.get(entry)
            if found is not None:
                self._vectors.move_to_end(entry)
                return found
        read = vector.read(root)
        with self._lock:
            if entry not in self._vectors:
                self._vectors[entry] = read
                self._held += len(read)
                self._shrink()
        return read

    def remember(self, root: Path, vector: DeletionVector, positions: list[int]) -> None:
        """Keep the positions of a vector just written (the next batch touching its file
        reads them back otherwise)."""
        entry = (root, vector.path_or_inline, vector.offset)
        with self._lock:
            if entry not in self._vectors:
                self._vectors[entry] = positions
                self._held += len(positions)
                self._shrink()

    def _shrink(self) -> None:
        while self._held > self._budget and (self._keys or self._vectors):
            if self._keys:
                _, table = self._keys.popitem(last=False)
                self._held -= table.num_rows
            else:
                _, positions = self._vectors.popitem(last=False)
                self._held -= len(positions)


#: the one cache of the process (the sink's batches and maintenance read the same files)
FILE_KEYS = FileKeys()
