"""Does every mirror equal its source, row for row? Compared in canonical values.

The *Exactly once* invariant says that after a quiet period the sink equals the source. The check reads both
sides into the representation the pipeline itself defines as the truth: the source through the
snapshot path's own SELECT list and ``RowNormalizer`` (so a FLOAT or a TIMESTAMP is read exactly
as a chunk read would), the mirror through the sink's type codecs back to canonical values
(``sinks.types.table_to_rows``). Comparing raw driver values instead would flag representation
differences (naive vs UTC datetimes, Decimal vs str) that are not errors, and would miss none
that are.

The source side is read as the pipeline's own least-privileged user, in one consistent snapshot
transaction across all tables, so a writer that has not quite stopped cannot make two tables
disagree with each other.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field

from deltalake import DeltaTable

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.options import SinkKind
from cdc_console.core.schema import TableSchema
from cdc_console.core.untyped import Cursor
from cdc_console.core.values import CanonicalRow, CanonicalValue
from cdc_console.mysql.connection import connect
from cdc_console.sinks.lake_layout import from_lake, mirror_path
from cdc_console.sinks.mirror_read import read_delta
from cdc_console.state.store import StateStore
from cdc_console.values.arrow import arrow_schema, table_to_rows
from cdc_console.values.canonical import RowNormalizer

#: How many differing keys a report names per kind and table.
SAMPLE_KEYS = 5
_FETCH_ROWS = 5_000


@dataclass
class TableComparison:
    table: str
    key_columns: tuple[str, ...]
    source_rows: int = 0
    mirror_rows: int = 0
    missing: list[Hashable] = field(default_factory=list)
    extra: list[Hashable] = field(default_factory=list)
    changed: list[tuple[Hashable, list[str]]] = field(default_factory=list)
    missing_count: int = 0
    extra_count: int = 0
    changed_count: int = 0
    error: str | None = None

    @property
    def equal(self) -> bool:
        return self.error is None and not (
            self.missing_count or self.extra_count or self.changed_count
        )

    def describe(self) -> str:
        """One line per problem: which keys differ and how."""
        if self.error:
            return f"{self.table}: {self.error}"
        if self.equal:
            return f"{self.table}: {self.source_rows:,} rows, equal"
        parts = []
        if self.missing_count:
            parts.append(
                f"{self.missing_count:,} row(s) missing from the mirror "
                f"({self._keys(self.missing, self.missing_count)})"
            )
        if self.extra_count:
            parts.append(
                f"{self.extra_count:,} row(s) in the mirror but not in the source "
                f"({self._keys(self.extra, self.extra_count)})"
            )
        if self.changed_count:
            shown = "; ".join(
                f"{self._key(key)}: {', '.join(columns)}" for key, columns in self.changed
            )
            parts.append(f"{self.changed_count:,} row(s) differ ({shown})")
        return (
            f"{self.table}: source {self.source_rows:,} rows, mirror {self.mirror_rows:,}: "
            + "; ".join(parts)
        )

    def _key(self, key: Hashable) -> str:
        values = key if isinstance(key, tuple) else (key,)
        return ", ".join(
            f"{name}={value!r}" for name, value in zip(self.key_columns, values, strict=False)
        )

    def _keys(self, keys: list[Hashable], total: int) -> str:
        more = max(0, total - len(keys))
        return "; ".join(self._key(k) for k in keys) + (f"; and {more:,} more" if more else "")


@dataclass
class VerifyReport:
    tables: list[TableComparison]

    @property
    def equal(self) -> bool:
        return bool(self.tables) and all(t.equal for t in self.tables)

    @property
    def rows(self) -> int:
        return sum(t.source_rows for t in self.tables)

    def describe(self) -> str:
        return "\n".join(t.describe() for t in self.tables) or "no captured tables to compare"


def _hashable(key: tuple[CanonicalValue, ...]) -> Hashable:
    try:
        hash(key)
    except TypeError:
        return json.dumps(key, sort_keys=True, default=str)
    return key


def _source_rows(cur: Cursor, normalizer: RowNormalizer) -> Iterator[CanonicalRow]:
    schema = normalizer.schema
    cur.execute(f"SELECT {normalizer.select_list} FROM {schema.table_id.quoted()}")
    while True:
        batch = cur.fetchmany(_FETCH_ROWS)
        if not batch:
            return
        for values in batch:
            yield normalizer.snapshot_row(values)


def compare_table(
    schema: TableSchema,
    source: Iterator[CanonicalRow],
    mirror: list[CanonicalRow],
    sample: int = SAMPLE_KEYS,
) -> TableComparison:
    """Compare canonical rows of one table, keyed by its key columns."""
    normalizer = RowNormalizer(schema)
    result = TableComparison(str(schema.table_id), tuple(schema.key_columns))
    expected: dict[Hashable, CanonicalRow] = {}
    for row in source:
        expected[_hashable(normalizer.key_of(row))] = row
    result.source_rows = len(expected)
    result.mirror_rows = len(mirror)
    for row in mirror:
        key = _hashable(normalizer.key_of(row))
        want = expected.pop(key, None)
        if want is None:
            result.extra_count += 1
            if len(result.extra) < sample:
                result.extra.append(key)
        elif want != row:
            result.changed_count += 1
            if len(result.changed) < sample:
                columns = [c for c in normalizer.column_names if want.get(c) != row.get(c)]
                result.changed.append((key, columns))
    result.missing_count = len(expected)
    result.missing = sorted(expected, key=repr)[:sample]
    return result


def read_mirror(config: PipelineConfig, schema: TableSchema) -> list[CanonicalRow]:
    """The mirror of ``schema``'s table as canonical rows (raises if the mirror does not exist)."""
    path = mirror_path(config.sink.path, schema.table_id, config.sink.mirrors)
    # [lake] datetime = "timestamp" stores DATETIME as UTC: back to the pipeline's types first
    data = from_lake(read_delta(DeltaTable(str(path))), arrow_schema(schema))
    return table_to_rows(schema, data)


def verify_mirrors(
    config: PipelineConfig, store: StateStore, sample: int = SAMPLE_KEYS
) -> VerifyReport:
    """Compare the Delta mirror of every captured (not REMOVED) table with its source.

    Call it once the job has caught up and writers have stopped; otherwise differences are
    expected. The source password comes from the config's ``password_env`` as for the job.
    """
    if config.sink.kind != SinkKind.DELTA:
        raise ValueError(f"only Delta mirrors can be verified, not sink.kind='{config.sink.kind}'")
    schemas = store.schemas()
    captured = [t.table_id for t in store.tables() if t.state != Lifecycle.REMOVED]
    results: list[TableComparison] = []
    conn = connect(config.source, unbuffered=True)
    try:
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        for table_id in captured:
            schema = schemas.get(table_id)
            if schema is None:
                results.append(
                    TableComparison(str(table_id), (), error="no schema recorded by the job yet")
                )
                continue
            try:
                mirror = read_mirror(config, schema)
            except Exception as exc:
                results.append(
                    TableComparison(
                        str(table_id),
                        tuple(schema.key_columns),
                        error=f"cannot read the mirror: {str(exc).splitlines()[0]}",
                    )
                )
                continue
            with conn.cursor() as cur:
                results.append(
                    compare_table(schema, _source_rows(cur, RowNormalizer(schema)), mirror, sample)
                )
        with conn.cursor() as cur:
            cur.execute("COMMIT")
    finally:
        conn.close()
    return VerifyReport(results)
