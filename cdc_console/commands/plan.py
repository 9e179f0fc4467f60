"""``cdc-console plan --config F``: each table's chunk plan before a snapshot or a re-dump.

The same ``ChunkSplitter`` the job runs, against the source as it is now: how many chunks, how
they were chosen (evenly by an integer key, unevenly in the server's order, one chunk and why),
their key ranges and, with ``--count``, how many rows each holds now. Read-only: nothing is
written, not even the state; the job splits again when it starts (the table may have grown).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from cdc_console.commands import TABLE_HELP, Subparsers, table_name
from cdc_console.config import PipelineConfig, load_config
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.splits import SnapshotSplit
from cdc_console.core.untyped import Connection
from cdc_console.core.values import JSONObject, JSONValue
from cdc_console.errors import UsageError, redact
from cdc_console.mysql.checks import check_table
from cdc_console.mysql.connection import close_quietly, connect
from cdc_console.mysql.probe import expand_pattern
from cdc_console.source.snapshot_reader import chunk_query
from cdc_console.source.splitter import ChunkSplitter

#: ranges printed from each end of a long plan
SHOWN = 3


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="show each table's chunk plan before a snapshot or re-dump (read-only)",
        description="Split each configured table into chunks as the job would now, and show "
        "the plan: the number of chunks, how they were chosen and their key ranges.",
    )
    parser.add_argument("--config", required=True, type=Path, help="pipeline TOML file")
    parser.add_argument("--table", type=table_name, help=f"{TABLE_HELP}; only this table")
    parser.add_argument(
        "--count",
        action="store_true",
        help="count each chunk's rows (reads every chunk's keys: slow on big tables)",
    )
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.set_defaults(handler=handle)


def table_ids(conn: Connection, config: PipelineConfig, only: str | None) -> list[TableId]:
    found: list[TableId] = []
    for pattern in config.source.tables:
        found += [t for t in expand_pattern(conn, pattern) if t not in found]
    if only is None:
        return found
    wanted = [t for t in found if str(t) == only]
    if not wanted:
        raise UsageError(
            f"{only} is not among the configured tables",
            "name one of: " + ", ".join(str(t) for t in found[:10]),
        )
    return wanted


def table_plan(
    conn: Connection, config: PipelineConfig, table_id: TableId, count: bool
) -> JSONObject:
    schema = check_table(conn, config, table_id)
    snap = config.snapshot
    splitter = ChunkSplitter(
        conn, snap.chunk_size, snap.distribution_factor_upper, snap.distribution_factor_lower
    )
    splits = splitter.split(schema)
    plan: JSONObject = {
        "table": str(table_id),
        "rows_told_apart_by": identity(schema),
        "chunk_key": schema.chunk_key,
        "chunks": len(splits),
        "chunk_size": snap.chunk_size,
        "how": splitter.method,
        "ranges": [str(s.range) for s in splits],
    }
    if count:
        rows = [_rows_in(conn, schema, s) for s in splits]
        plan["rows"] = list[JSONValue](rows)
        plan["rows_spread"] = {
            "min": min(rows),
            "median": int(statistics.median(rows)),
            "max": max(rows),
        }
    return plan


def identity(schema: TableSchema) -> str:
    """What tells the table's rows apart in its mirror, in words."""
    if schema.primary_key:
        return f"primary key ({', '.join(schema.primary_key)})"
    if schema.counted:
        return "their whole content, duplicates counted (no unique key)"
    return f"unique column {schema.chunk_key}"


def _rows_in(conn: Connection, schema: TableSchema, split: SnapshotSplit) -> int:
    sql, args = chunk_query(schema, split, "COUNT(*)")
    with conn.cursor() as cur:
        cur.execute(sql, args)
        (found,) = cur.fetchone()
    return int(found)


def format_text(plans: list[JSONObject]) -> str:
    lines = []
    for plan in plans:
        lines.append(
            f"{plan['table']}: {plan['chunks']} chunk(s) on {plan['chunk_key']} "
            f"(chunk_size {plan['chunk_size']}): {plan['how']}; rows told apart by "
            f"{plan['rows_told_apart_by']}"
        )
        spread = plan.get("rows_spread")
        if isinstance(spread, dict):
            lines.append(
                f"  rows per chunk: min {spread['min']}, median {spread['median']}, "
                f"max {spread['max']}"
            )
        ranges = plan["ranges"]
        assert isinstance(ranges, list)
        rows = plan.get("rows")
        numbered = list(enumerate(ranges))
        if len(numbered) > 2 * SHOWN:
            numbered = [*numbered[:SHOWN], (-1, "..."), *numbered[-SHOWN:]]
        for number, text in numbered:
            if number < 0:
                lines.append("  ...")
                continue
            held = f"  {rows[number]} rows" if isinstance(rows, list) else ""
            lines.append(f"  {number:>5} {text}{held}")
    return "\n".join(lines)


def handle(args: argparse.Namespace) -> int:
    config = load_config(Path(args.config))
    conn = connect(config.source)
    try:
        plans = [
            table_plan(conn, config, table_id, args.count)
            for table_id in table_ids(conn, config, args.table)
        ]
    finally:
        close_quietly(conn)
    print(redact(json.dumps(plans, indent=2) if args.json else format_text(plans)))
    return 0
