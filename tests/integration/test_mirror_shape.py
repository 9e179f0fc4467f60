"""Shaping the mirror, against a real MariaDB and real Spark: columns left out or masked
(``[pipeline] exclude_columns``, ``mask_columns``) and a mirror placed by name (``[sink]
mirrors``). The mirrors equal their sources without the left-out column and with the masked
ones masked, under writes that change only them, write them with partial row images, insert
and delete; ``verify`` is clean; a masked column joins across two tables; and neither the
original values nor the mask's key appear in any byte the pipeline wrote: the lake's files
(decompressed), the change feed, the state database, the Spark checkpoints and the job's log.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.masks import REDACTED
from tests.conftest import SourceDb
from tests.integration.harness import (
    JobProcess,
    load,
    mirror_rows,
    running,
    source_rows,
    wait_for,
    write_config,
)
from tests.integration.test_table_control import all_in, caught_up_now, cli, tables_state

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

#: every value of the left-out and of the masked columns holds one, and nothing else does
SECRETS = ("SSNSECRET", "MAILSECRET")
KEY_ENV = "CDC_MASK_KEY"
#: the masks' key: it must appear nowhere either
KEY = "KEYSECRET-0a7f3c"


#: the key after it is rotated
ROTATED = f"{KEY}-rotated"


def masked(text: str, key: str = KEY) -> str:
    return hmac.new(key.encode(), text.encode(), hashlib.sha256).hexdigest()


def source_as_mirrored(
    db: SourceDb,
    table: str,
    left_out: tuple[str, ...] = (),
    hashed: str = "",
    redacted: str = "",
    key: str = KEY,
) -> list[dict[str, Any]]:
    """The source's rows as the mirror should hold them."""
    rows = source_rows(db, table, "id")
    assert rows
    for row in rows:
        for column in left_out:
            row.pop(column)
        if hashed and row[hashed] is not None:
            row[hashed] = masked(row[hashed], key)
        if redacted and row[redacted] is not None:
            row[redacted] = REDACTED
    return rows


def written_with_secret(folder: Path) -> list[str]:
    """The files under ``folder`` whose bytes hold a secret or the key; a Parquet file's
    values are read decompressed."""
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        text = str(pq.read_table(path).to_pylist()) if path.suffix == ".parquet" else ""
        for secret in (*SECRETS, KEY, ROTATED):
            if secret.encode() in data or secret in text:
                found.append(f"{path}: {secret}")
    return found


def test_left_out_and_masked_columns_are_never_mirrored_or_written(
    source_db: SourceDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = source_db
    monkeypatch.setenv(KEY_ENV, KEY)  # the job's and the CLI's environment
    secret, mail = SECRETS
    db.execute(
        "CREATE TABLE customers (id BIGINT PRIMARY KEY, email VARCHAR(80) NOT NULL, "
        "ssn VARCHAR(40) NOT NULL, note TEXT)",
        f"INSERT INTO customers SELECT seq, CONCAT('{mail}', seq, '@example.com'), "
        f"CONCAT('{secret}-', seq), IF(seq % 3, CONCAT('note ', seq), NULL) "
        "FROM seq_1_to_3000",
        # its rule cannot hold (a mask on a number): parked, nothing of it read, the rest go on
        "CREATE TABLE secrets (id INT PRIMARY KEY, code INT, word VARCHAR(40))",
        f"INSERT INTO secrets SELECT seq, seq, CONCAT('{secret}-w-', seq) FROM seq_1_to_50",
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_email VARCHAR(80))",
        f"INSERT INTO orders SELECT seq, CONCAT('{mail}', seq % 700, '@example.com') "
        "FROM seq_1_to_1000",
    )
    rules = (
        f'exclude_columns = {{ "{db.name}.cust*" = ["SSN"] }}\n'
        f'mask_columns = {{ "{db.name}.customers" = {{ email = "sha256", note = "redact" }}, '
        f'"{db.name}.orders" = {{ customer_email = "sha256" }}, '
        f'"{db.name}.secrets" = {{ code = "sha256" }} }}\n'
    )
    # orders' mirror is placed by name (and so is its change feed)
    placed = f'[sink.mirrors]\n"{db.name}.orders" = "analytics/orders"\n'
    config_path = write_config(db, tmp_path, chunk_size=500, extra=f"[pipeline]\n{rules}{placed}")
    config = load(config_path)
    job = JobProcess(config_path)
    with running(job):
        both = ["customers", "orders"]
        wait_for(lambda: all_in(config, Lifecycle.STREAMING, both), 180, "streams", job)
        assert all_in(config, Lifecycle.NEEDS_REDUMP, ["secrets"])
        assert not (config.sink.path / db.name / "secrets").exists()
        db.execute(
            # changes only the left-out column: a row event the mirror has nothing to take from
            f"UPDATE customers SET ssn = CONCAT('{secret}-u-', id) WHERE id <= 50",
            f"UPDATE customers SET email = CONCAT('{mail}new', id, '@example.com') "
            "WHERE id BETWEEN 51 AND 100",
            f"INSERT INTO customers SELECT 5000 + seq, CONCAT('{mail}i', seq), "
            f"CONCAT('{secret}-i-', seq), 'x' FROM seq_1_to_200",
            "DELETE FROM customers WHERE id BETWEEN 101 AND 150",
            f"INSERT INTO orders VALUES (5001, '{mail}i1'), (5002, NULL)",
        )
        conn = db.connect()
        try:
            with conn.cursor() as cur:
                # a writer's own partial images: the before image names the row by its key,
                # the after image holds what the statement set, the left-out column included
                cur.execute("SET SESSION binlog_row_image = 'MINIMAL'")
                cur.execute(
                    f"UPDATE customers SET ssn = CONCAT('{secret}-m-', id), note = 'minimal' "
                    "WHERE id BETWEEN 151 AND 170"
                )
                cur.execute(f"UPDATE customers SET ssn = '{secret}-only' WHERE id = 171")
                cur.execute(f"UPDATE orders SET customer_email = '{mail}m' WHERE id <= 5")
        finally:
            conn.close()
        wait_for(lambda: caught_up_now(db, config, both), 120, "caught up", job)
        customers = mirror_rows(config, db.name, "customers", "id")
        orders = mirror_rows(config, "analytics", "orders", "id")
        assert not (config.sink.path / db.name / "orders").exists()
        assert (config.sink.path / "_changelog" / "analytics" / "orders" / "_delta_log").is_dir()
        assert customers == source_as_mirrored(db, "customers", ("ssn",), "email", "note")
        assert orders == source_as_mirrored(db, "orders", hashed="customer_email")
        # equal addresses hash alike: the masked columns still join
        emails = {r["email"] for r in customers}
        joined = [o for o in orders if o["customer_email"] in emails]
        ((pairs,),) = db.rows(
            "SELECT COUNT(*) FROM orders o JOIN customers c ON o.customer_email = c.email"
        )
        assert len(joined) == pairs > 100
        for table in both:  # exit 0: clean, masks compared as masked
            cli(config_path, "verify", "--table", f"{db.name}.{table}")
        status = cli(config_path, "status")
        assert f"leaves out ssn; masks email sha256 (key ${KEY_ENV}), note redact" in status
        assert "masks customer_email sha256" in status and "mirror analytics/orders" in status
    assert written_with_secret(tmp_path) == []

    # a changed rule reads the tables again: note left out too, and the key rotated
    config_path.write_text(config_path.read_text().replace('["SSN"]', '["SSN", "note"]'))
    monkeypatch.setenv(KEY_ENV, ROTATED)
    job = JobProcess(config_path)
    with running(job):

        def read_again() -> bool:
            tables = tables_state(config)
            return all(tables[t].generation == 1 for t in both) and caught_up_now(db, config, both)

        wait_for(read_again, 180, "both tables read again", job)
        customers = mirror_rows(config, db.name, "customers", "id")
        assert customers == source_as_mirrored(
            db, "customers", ("ssn", "note"), "email", key=ROTATED
        )
        orders = mirror_rows(config, "analytics", "orders", "id")
        assert orders == source_as_mirrored(db, "orders", hashed="customer_email", key=ROTATED)
    assert written_with_secret(tmp_path) == []
