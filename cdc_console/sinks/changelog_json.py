"""Flink's ``changelog-json`` format, one file per table per batch: for debugging and parity.

Each line is ``{"data":{...},"op":"+I"}`` exactly as Flink CDC's changelog-json format writes it
(seed document 001): compact JSON, ``data`` first, the row's columns in table order with their
canonical values (DECIMAL as exact strings, DATETIME as ``YYYY-MM-DD HH:MM:SS[.f]``, ...), ``op``
one of ``+I``, ``-U``, ``+U``, ``-D``. ``-U``/``-D`` carry the before image, ``+I``/``+U`` the after
image, so a consumer can fold the lines into the table's state (``replay_changelog``).

Layout: ``<root>/<db>/<table>/batch-<batch id, 12 digits>.jsonl``. A batch's file is written to
a temporary file and renamed into place, so a retried batch replaces its earlier attempt whole:
never duplicated, never half-written (*Exactly once*, *Crash-safe resume*). Lines are in apply order (``sort_key``).

Range replaces (REDUMP) need the sink's current keys to know which to delete; this sink
recovers them by replaying the table's earlier batch files (with their counts, for a table
without a unique key: ``replay_counts``). That is O(history) per batch with
range replaces, acceptable for a debugging sink.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from cdc_console.core.records import OPS, UPSERT_OPS, ChangeRecord
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.values import CanonicalRow, CanonicalValue
from cdc_console.sinks.base import Key, ReplaceRange, SinkStats, TableBatchSink
from cdc_console.sinks.counted import CountedPlan, MirrorCounts, plan_counted_batch
from cdc_console.sinks.lake_layout import MirrorNames, mirror_path
from cdc_console.sinks.netting import TableBatchPlan, plan_table_batch, split_keys

_BATCH_FILE = re.compile(r"^batch-(\d+)\.jsonl$")


class ReplayError(ValueError):
    """A changelog does not fold cleanly: a change applied twice or out of order (strict mode)."""


def changelog_line(op: str, row: Mapping[str, CanonicalValue]) -> str:
    """One changelog-json line (no newline): ``{"data":{...},"op":"+I"}``."""
    if op not in OPS:
        raise ValueError(f"changelog op must be one of {sorted(OPS)}, not {op!r}")
    return json.dumps({"data": row, "op": op}, ensure_ascii=False, separators=(",", ":"))


def replay_changelog(
    lines: Iterable[str], key_columns: Sequence[str], strict: bool = False
) -> dict[Key, CanonicalRow]:
    """Fold changelog-json lines into the final table state: key tuple -> row.

    ``+I``/``+U`` set the key's row, ``-U``/``-D`` remove it. The key tuple holds the canonical
    values of ``key_columns``. With ``strict``, a change that could only come from applying
    something twice or out of order raises ``ReplayError``: an insert (``+I``/``+U``) of a key
    already present, or a removal (``-U``/``-D``) of a key that is absent or whose before image
    differs from the current row. Blank lines are ignored.
    """
    state: dict[Key, CanonicalRow] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            message = json.loads(line)
            op = message["op"]
            data = message["data"]
            key = tuple(data[c] for c in key_columns)
        except (ValueError, KeyError, TypeError) as exc:
            raise ReplayError(f"line {number}: not a changelog-json change: {line!r}") from exc
        if op in UPSERT_OPS:
            if strict and key in state:
                raise ReplayError(f"line {number}: {op} of key {list(key)} that is present")
            state[key] = data
        elif op in OPS:
            current = state.pop(key, None)
            if strict and current is None:
                raise ReplayError(f"line {number}: {op} of key {list(key)} that is absent")
            if strict and current != data:
                raise ReplayError(
                    f"line {number}: {op} before image {data} differs from the row {current}"
                )
        else:
            raise ReplayError(f"line {number}: unknown op {op!r}")
    return state


def replay_counts(lines: Iterable[str], key_columns: Sequence[str]) -> MirrorCounts:
    """Fold a counted table's changelog-json lines into its distinct rows with their counts
    (``sinks.counted``): ``+I``/``+U`` add a copy, ``-U``/``-D`` take one away."""
    state: MirrorCounts = {}
    for line in lines:
        if not line.strip():
            continue
        message = json.loads(line)
        data = message["data"]
        key = tuple(data[c] for c in key_columns)
        _, count = state.get(key, (data, 0))
        count += 1 if message["op"] in UPSERT_OPS else -1
        if count:
            state[key] = (data, count)
        else:
            state.pop(key, None)
    return state


class ChangelogJsonSink(TableBatchSink):
    """Writes each batch's changes as changelog-json files under ``root`` (module docstring)."""

    def __init__(self, root: Path, names: MirrorNames | None = None) -> None:
        self.root = Path(root)
        #: tables placed by name (``[sink] mirrors``)
        self.names = dict(names or {})

    def table_dir(self, table_id: TableId) -> Path:
        return mirror_path(self.root, table_id, self.names)

    def batch_path(self, table_id: TableId, batch_id: int) -> Path:
        return self.table_dir(table_id) / f"batch-{batch_id:012d}.jsonl"

    def batch_files(self, table_id: TableId, before: int | None = None) -> list[tuple[int, Path]]:
        """The table's batch files as (batch id, path), in batch order; ``before`` excludes ids
        at or above it."""
        directory = self.table_dir(table_id)
        if not directory.is_dir():
            return []
        files = []
        for path in directory.iterdir():
            match = _BATCH_FILE.match(path.name)
            if match and (before is None or int(match.group(1)) < before):
                files.append((int(match.group(1)), path))
        return sorted(files)

    def read_lines(self, table_id: TableId, before: int | None = None) -> Iterator[str]:
        """Every line the table's batch files hold, in batch then apply order."""
        for _, path in self.batch_files(table_id, before):
            with path.open(encoding="utf-8") as handle:
                for line in handle:
                    yield line.rstrip("\n")

    def replay(
        self, table_id: TableId, key_columns: Sequence[str], strict: bool = False
    ) -> dict[Key, CanonicalRow]:
        """The table state the files describe (``replay_changelog`` over all batches)."""
        return replay_changelog(self.read_lines(table_id), key_columns, strict)

    def _apply_table(
        self,
        batch_id: int,
        schema: TableSchema,
        records: Sequence[ChangeRecord],
        replaces: list[ReplaceRange],
    ) -> SinkStats:
        plan: TableBatchPlan | CountedPlan
        if schema.counted:
            held: list[MirrorCounts] = []
            if replaces:
                state = replay_counts(
                    self.read_lines(schema.table_id, before=batch_id), schema.key_columns
                )
                held = [
                    {key: counted for key, counted in state.items() if replace.in_range(counted[0])}
                    for replace in replaces
                ]
            plan = plan_counted_batch(schema, records, replaces, held, want_changes=True)
        else:
            absent: list[dict[Key, CanonicalRow | None]] = []
            if replaces:
                absent = self._state_absent(batch_id, schema, records, replaces)
            plan = plan_table_batch(schema, records, replaces, absent, want_changes=True)
        if not plan.changes:
            return {"lines": 0, "range_deleted": 0, "path": None}
        path = self.batch_path(schema.table_id, batch_id)
        text = "".join(changelog_line(c.op, c.row) + "\n" for c in plan.changes)
        _write_atomically(path, text)
        return {"lines": len(plan.changes), "range_deleted": plan.range_deleted, "path": str(path)}

    def _state_absent(
        self,
        batch_id: int,
        schema: TableSchema,
        records: Sequence[ChangeRecord],
        replaces: Sequence[ReplaceRange],
    ) -> list[dict[Key, CanonicalRow | None]]:
        """Per replace: keys the earlier batches leave present, in its range, not in its split."""
        key_columns = list(schema.key_columns)
        state = replay_changelog(self.read_lines(schema.table_id, before=batch_id), key_columns)
        present = split_keys(records, replaces)
        result: list[dict[Key, CanonicalRow | None]] = []
        for replace in replaces:
            keys = present[replace.split_id]
            result.append(
                {
                    key: row
                    for key, row in state.items()
                    if key not in keys
                    and replace.in_range(dict(zip(key_columns, key, strict=True)))
                }
            )
        return result


def _write_atomically(path: Path, text: str) -> None:
    """Temp file in the same directory, fsync, rename over ``path``, fsync the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with temp.open("w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
