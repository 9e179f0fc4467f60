"""Turning an existing mirror merge-on-read, and back to copy-on-write.

``[lake] deletion_vectors`` decides the layout of *new* mirrors; a mirror keeps the layout it
was created with, because the sink applies a batch by deletion vectors exactly when the table's
protocol has the feature. These two moves change one mirror:

- **to merge-on-read**: one protocol commit adds the ``deletionVectors`` feature (reader 3 /
  writer 7). No data file changes; the next batch marks rows in vectors. Readers that refuse the
  feature (delta-rs ``to_pyarrow_table``) refuse the table from then on.
- **to copy-on-write**: the protocol lets no writer take a feature away again within a table's
  history (a reader of an old version must still find it), so the mirror is rebuilt: its live
  rows are written, in key order, into a new table at ``<mirror>.converting`` with the same
  properties and without the feature, carrying the pipeline's app transaction (so the next
  batch continues exactly where the mirror was); then the old mirror is set aside whole as
  ``<mirror>.before-copy-on-write-v<N>`` (its history and change feed stay readable there) and
  the new one takes its place. Interrupted between the two renames, the next run finishes it.

Both run only while no job runs (the command refuses otherwise): the job commits to the mirror.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from cdc_console.sinks.delta_tables import open_table, set_aside
from cdc_console.sinks.mirror_read import (
    enable_deletion_vectors,
    has_deletion_vectors,
    read_delta,
    table_schema,
)

CONVERTING = ".converting"
ENABLE_VECTORS = "delta.enableDeletionVectors"


class Layout(StrEnum):
    MERGE_ON_READ = "merge-on-read"
    COPY_ON_WRITE = "copy-on-write"


@dataclass(frozen=True)
class Converted:
    path: Path
    layout: Layout
    changed: bool
    rows: int
    set_aside: Path | None = None

    def describe(self) -> str:
        if not self.changed:
            return f"already {self.layout}"
        aside = f"; the old mirror is kept, readable, at {self.set_aside}" if self.set_aside else ""
        return f"{self.layout} ({self.rows:,} live rows){aside}"


def layout_of(table: DeltaTable) -> Layout:
    return Layout.MERGE_ON_READ if has_deletion_vectors(table) else Layout.COPY_ON_WRITE


def finish_interrupted(root: Path) -> list[Path]:
    """Mirrors whose move to copy-on-write stopped between its two renames, put in place."""
    finished = []
    for building in sorted(root.glob(f"**/*{CONVERTING}")):
        target = building.with_name(building.name.removesuffix(CONVERTING))
        if not target.exists() and DeltaTable.is_deltatable(str(building)):
            building.rename(target)
            finished.append(target)
    return finished


def convert(
    path: Path, to: Layout, app_id: str, key_columns: Sequence[str] = (), dry_run: bool = False
) -> Converted:
    """Bring the mirror at ``path`` to layout ``to`` (see the module docstring)."""
    table = open_table(path)
    if layout_of(table) == to:
        return Converted(path, to, changed=False, rows=0)
    if to == Layout.MERGE_ON_READ:
        if not dry_run:
            enable_deletion_vectors(table)
        return Converted(path, to, changed=True, rows=0)
    rows = read_delta(table)
    if dry_run:
        return Converted(path, to, changed=True, rows=rows.num_rows)
    return _rebuild(path, table, rows, app_id, key_columns)


def _rebuild(
    path: Path, table: DeltaTable, rows: pa.Table, app_id: str, key_columns: Sequence[str]
) -> Converted:
    building = path.with_name(path.name + CONVERTING)
    if building.exists():
        shutil.rmtree(building)  # an earlier attempt that stopped before its first rename
    building.mkdir(parents=True)
    keys = [k for k in key_columns if k in rows.column_names]
    if keys and rows.num_rows:
        rows = rows.sort_by([(k, "ascending") for k in keys])
    configuration = dict(table.metadata().configuration)
    configuration.pop(ENABLE_VECTORS, None)
    schema = table_schema(table)
    new = DeltaTable.create(
        str(building), schema, configuration=configuration, name=table.metadata().name
    )
    batch = table.transaction_version(app_id)
    properties = CommitProperties(
        app_transactions=[Transaction(app_id, batch)] if batch is not None else None,
        custom_metadata={"cdc_console.convert": f"{Layout.COPY_ON_WRITE} from v{table.version()}"},
    )
    target = configuration.get("delta.targetFileSize")
    write_deltalake(
        new,
        rows.cast(schema),
        mode="append",
        target_file_size=int(target) if target else None,
        commit_properties=properties,
    )
    written = DeltaTable(str(building))
    if has_deletion_vectors(written) or written.version() < 1:
        raise RuntimeError(f"{building}: the rebuilt mirror is not what was written")
    held = written.to_pyarrow_dataset().count_rows()
    if held != rows.num_rows or written.transaction_version(app_id) != batch:
        raise RuntimeError(
            f"{building}: the rebuilt mirror holds {held:,} rows where the mirror holds "
            f"{rows.num_rows:,}; the mirror is unchanged"
        )
    aside = set_aside(path, f"before-copy-on-write-v{table.version()}")
    building.rename(path)
    return Converted(path, Layout.COPY_ON_WRITE, changed=True, rows=rows.num_rows, set_aside=aside)
