"""A column left out of the mirror (``[pipeline] exclude_columns``), against a real MariaDB and
real Spark: the mirror equals its source without it, under writes that change only it, write
it with partial row images, insert and delete; ``verify`` is clean; and its values appear in
no byte the pipeline wrote: the lake's files (decompressed), the change feed, the state
database, the Spark checkpoints and the job's log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cdc_console.core.lifecycle import Lifecycle
from tests.conftest import SourceDb
from tests.integration.harness import (
    JobProcess,
    load,
    mirror_rows,
    running,
    wait_for,
    write_config,
)
from tests.integration.test_table_control import all_in, caught_up_now, cli

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

#: every value of the left-out column holds it, and nothing else the test writes does
SECRET = "SSNSECRET"


def source_without(db: SourceDb, table: str, column: str) -> list[dict[str, Any]]:
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{table}` ORDER BY id")
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        conn.close()
    assert rows and all(SECRET in str(r[column]) for r in rows)
    return [{k: v for k, v in r.items() if k != column} for r in rows]


def written_with_secret(folder: Path) -> list[str]:
    """The files under ``folder`` whose bytes hold ``SECRET``; a Parquet file's values are
    read decompressed."""
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if SECRET.encode() in path.read_bytes():
            found.append(str(path))
        elif path.suffix == ".parquet" and SECRET in str(pq.read_table(path).to_pylist()):
            found.append(f"{path} (decompressed)")
    return found


def test_a_left_out_column_is_never_read_mirrored_or_written(
    source_db: SourceDb, tmp_path: Path
) -> None:
    db = source_db
    db.execute(
        "CREATE TABLE customers (id BIGINT PRIMARY KEY, email VARCHAR(80) NOT NULL, "
        "ssn VARCHAR(40) NOT NULL, note TEXT)",
        "INSERT INTO customers SELECT seq, CONCAT('c', seq, '@example.com'), "
        f"CONCAT('{SECRET}-', seq), CONCAT('note ', seq) FROM seq_1_to_3000",
    )
    config_path = write_config(
        db,
        tmp_path,
        chunk_size=500,
        extra=f'[pipeline]\nexclude_columns = {{ "{db.name}.cust*" = ["SSN"] }}\n',
    )
    config = load(config_path)
    job = JobProcess(config_path)
    with running(job):
        wait_for(lambda: all_in(config, Lifecycle.STREAMING, ["customers"]), 180, "streams", job)
        db.execute(
            # changes only the left-out column: a row event the mirror has nothing to take from
            f"UPDATE customers SET ssn = CONCAT('{SECRET}-u-', id) WHERE id <= 50",
            "UPDATE customers SET email = CONCAT('new', id, '@example.com') "
            "WHERE id BETWEEN 51 AND 100",
            f"INSERT INTO customers SELECT 5000 + seq, 'n@example.com', "
            f"CONCAT('{SECRET}-i-', seq), NULL FROM seq_1_to_200",
            "DELETE FROM customers WHERE id BETWEEN 101 AND 150",
        )
        conn = db.connect()
        try:
            with conn.cursor() as cur:
                # a writer's own partial images: the before image names the row by its key,
                # the after image holds what the statement set, the left-out column included
                cur.execute("SET SESSION binlog_row_image = 'MINIMAL'")
                cur.execute(
                    f"UPDATE customers SET ssn = CONCAT('{SECRET}-m-', id), note = 'minimal' "
                    "WHERE id BETWEEN 151 AND 170"
                )
                cur.execute(f"UPDATE customers SET ssn = '{SECRET}-only' WHERE id = 171")
        finally:
            conn.close()
        wait_for(lambda: caught_up_now(db, config, ["customers"]), 120, "caught up", job)
        mirror = mirror_rows(config, db.name, "customers", "id")
        assert mirror == source_without(db, "customers", "ssn")
        assert all(set(r) == {"id", "email", "note"} for r in mirror)
        cli(config_path, "verify", "--table", f"{db.name}.customers")  # exit 0: clean
    assert written_with_secret(tmp_path) == []
