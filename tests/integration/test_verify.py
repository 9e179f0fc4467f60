"""``cdc-console verify`` against real MariaDB and a running Spark job.

A mirror damaged behind the pipeline's back (a lost row, a stray row, one changed value of each
type family) is named exactly, chunk by chunk and key by key; ``--repair`` re-dumps just those
chunks through the running job; a verification after it is clean. Under writers on every table,
verifications in a row report no difference that is not there.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle, SplitStatus, Verdict
from cdc_console.core.schema import TableId
from cdc_console.sinks.mirror_read import read_delta
from cdc_console.state.store import StateStore, VerifyProgress
from cdc_console.verify.verifier import Verifier
from tests.conftest import SourceDb
from tests.integration.harness import (
    JobProcess,
    Writer,
    caught_up,
    create_orders,
    load,
    run_cli,
    running,
    wait_for,
    write_config,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

KINDS_DDL = (
    "CREATE TABLE kinds (id INT PRIMARY KEY, amount DECIMAL(12,4) NOT NULL, "
    "happened DATETIME(6), stamped TIMESTAMP(6) NULL DEFAULT NULL, doc JSON, data BLOB, "
    "label VARCHAR(100) CHARACTER SET utf8mb4, api_token VARCHAR(20))"
)
KINDS_ROWS = (
    "INSERT INTO kinds SELECT seq, seq + 0.1234, "
    "TIMESTAMP('2024-01-01 00:00:00') + INTERVAL seq SECOND + INTERVAL seq MICROSECOND, "
    "FROM_UNIXTIME(1700000000 + seq) + INTERVAL 250000 MICROSECOND, JSON_OBJECT('a', seq), "
    "UNHEX(LPAD(HEX(seq), 8, '0')), CONCAT('naïve 🎉 ', seq), CONCAT('tok', seq) "
    "FROM seq_1_to_300"
)


def streaming(config: PipelineConfig, tables: int) -> bool:
    if not config.state_path.exists():
        return False
    store = StateStore(config.state_path)
    try:
        found = store.tables()
        return len(found) == tables and all(t.state == Lifecycle.STREAMING for t in found)
    finally:
        store.close()


def chunk_of(config: PipelineConfig, table: TableId, key: int) -> int:
    store = StateStore(config.state_path)
    try:
        for state in store.splits(table):
            split = state.split
            if split.range.contains(key):
                return split.split_no
    finally:
        store.close()
    raise AssertionError(f"no chunk holds {key}")


def damage(config: PipelineConfig, database: str) -> None:
    """Change the mirror of ``kinds`` the way no change of the source did."""
    path = str(config.sink.path / database / "kinds")
    rows: list[dict[str, Any]] = read_delta(DeltaTable(path)).to_pylist()
    schema = read_delta(DeltaTable(path)).schema
    by_id = {r["id"]: r for r in rows}
    del by_id[5]  # lost
    by_id[100_000] = {**by_id[6], "id": 100_000}  # stray
    by_id[50]["amount"] += Decimal("0.0001")
    by_id[120]["happened"] += dt.timedelta(microseconds=1)
    by_id[130]["stamped"] += dt.timedelta(seconds=1)
    by_id[210]["doc"] = by_id[210]["doc"].replace("210", "211")
    data = bytearray(by_id[220]["data"])
    data[-1] ^= 0x01
    by_id[220]["data"] = bytes(data)
    by_id[250]["label"] = by_id[250]["label"].replace("🎉", "🎊")
    by_id[260]["api_token"] = "stolen"
    table = pa.Table.from_pylist(list(by_id.values()), schema=schema)
    write_deltalake(path, table, mode="overwrite")


def verify(config_path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = run_cli("verify", "--config", str(config_path), "--json", *extra, timeout=300)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.returncode, json.loads(done.stdout)


def found(document: dict[str, Any]) -> set[tuple[str, int, str, int]]:
    """(table, chunk, kind, key) of every difference a report names."""
    out = set()
    for table in document["tables"]:
        for chunk in table["chunks"]:
            detail = chunk["detail"]
            for key in detail.get("missing", []):
                out.add((table["table"], chunk["chunk"], "missing", key[0]))
            for key in detail.get("extra", []):
                out.add((table["table"], chunk["chunk"], "extra", key[0]))
            for row in detail.get("differs", []):
                out.add((table["table"], chunk["chunk"], "differs", row["key"][0]))
    return out


def test_verify_names_damage_exactly_and_repair_fixes_it(
    source_db: SourceDb, tmp_path: Path
) -> None:
    source_db.execute(KINDS_DDL, KINDS_ROWS)
    create_orders(source_db, 500)
    config_path = write_config(source_db, tmp_path, chunk_size=100)
    config = load(config_path)
    kinds = TableId(source_db.name, "kinds")
    with running(JobProcess(config_path)) as job:
        wait_for(lambda: caught_up(source_db, config), 240, "the snapshot to catch up", job)
        code, clean = verify(config_path)
        assert code == 0, clean
        assert {t["verdict"] for t in clean["tables"]} == {"equal"}
        assert sum(t["rows"] for t in clean["tables"]) == 800

        damage(config, source_db.name)
        code, before = verify(config_path)
        assert code == 1
        name = str(kinds)
        expected = {
            (name, chunk_of(config, kinds, 5), "missing", 5),
            (name, chunk_of(config, kinds, 100_000), "extra", 100_000),
            *((name, chunk_of(config, kinds, k), "differs", k) for k in (50, 120, 130, 210)),
            *((name, chunk_of(config, kinds, k), "differs", k) for k in (220, 250, 260)),
        }
        assert found(before) == expected
        columns = {
            row["key"][0]: row["columns"]
            for table in before["tables"]
            for chunk in table["chunks"]
            for row in chunk["detail"].get("differs", [])
        }
        assert {k: sorted(c) for k, c in columns.items()} == {
            50: ["amount"],
            120: ["happened"],
            130: ["stamped"],
            210: ["doc"],
            220: ["data"],
            250: ["label"],
            260: ["api_token"],
        }
        assert columns[50]["amount"] == ['"50.1234"', '"50.1235"']
        assert columns[260]["api_token"] == "(hidden)"
        orders = next(t for t in before["tables"] if t["table"].endswith(".orders"))
        assert orders["verdict"] == "equal"

        text = run_cli("verify", "--config", str(config_path), "--table", name, timeout=300)
        assert text.returncode == 1
        assert "1 row(s) missing from the mirror (id=5)" in text.stdout
        assert 'amount "50.1234" != "50.1235"' in text.stdout
        assert "stolen" not in text.stdout

        repaired = run_cli(
            "verify", "--config", str(config_path), "--repair", "--json", timeout=600
        )
        assert repaired.returncode == 0, repaired.stdout + repaired.stderr + job.output()
        outcome = json.loads(repaired.stdout)
        chunks = sorted({chunk for _, chunk, _, _ in expected})
        assert outcome["repaired"] == [f"{name} chunk {c}" for c in chunks]
        assert outcome["after"]["verdict"] == "equal"

        code, after = verify(config_path)
        assert code == 0, after

    store = StateStore(config.state_path)
    try:
        verdicts = {(str(v.table_id), v.split_no): v.verdict for v in store.verifications()}
        assert set(verdicts.values()) == {Verdict.EQUAL}
        assert {t for t, _ in verdicts} == {name, f"{source_db.name}.orders"}
        messages = [e.message for e in store.events(200) if e.kind == "verify"]
        assert any(m.startswith(f"verify {name}: chunk ") for m in messages)
    finally:
        store.close()


def test_verifications_under_writers_report_no_false_difference(
    source_db: SourceDb, tmp_path: Path
) -> None:
    create_orders(source_db, 8_000)
    source_db.execute(
        "CREATE TABLE orders_b LIKE orders", "INSERT INTO orders_b SELECT * FROM orders"
    )
    config_path = write_config(source_db, tmp_path, chunk_size=2_000)
    config = load(config_path)
    targets = list(range(1, 8_000, 397))
    writers = [
        Writer(source_db, "orders", targets, seed=1, rate=500),
        Writer(source_db, "orders_b", targets, seed=2, rate=500),
    ]
    with running(JobProcess(config_path)) as job:
        wait_for(lambda: streaming(config, 2), 240, "both tables to stream", job)
        for writer in writers:
            writer.start()
        store = StateStore(config.state_path)
        seen: list[VerifyProgress] = []
        noted = store.note_verified

        def note(progress: VerifyProgress, chunks: int, started_at: float) -> VerifyProgress:
            found = noted(progress, chunks, started_at)
            # others (status, the console, the metrics) see the verification under way
            assert store.verify_progress() == found
            seen.append(found)
            return found

        try:
            chunks = sum(
                s.status == SplitStatus.FINISHED
                for t in store.tables()
                for s in store.splits(t.table_id)
            )
            verifier = Verifier(config, store)
            setattr(store, "note_verified", note)  # noqa: B010
            before = [writer.ops for writer in writers]
            reports = [verifier.run() for _ in range(10)]
            during = [writer.ops - ops for writer, ops in zip(writers, before, strict=True)]
            assert store.verify_progress() is None  # each run ends its progress
        finally:
            store.close()
        # each run counts up to every finished chunk of the two tables, which it compares
        finals = [p for p in seen if p.chunks_done == p.chunks_total]
        assert len(finals) == 10 and all(p.chunks_total == chunks >= 8 for p in seen)
        for writer, statements in zip(writers, during, strict=True):
            writer.stop()
            assert not writer.errors, writer.errors
            print(f"{writer.table}: {statements} statements during the verifications")
            # a count, not a rate: on a loaded box the writers run slower, the verifications too
            assert statements >= 1_000, "the verifications ran under a steady write load"
    # exact at the first comparison: the re-check, a safety net, was never needed
    assert verifier.rechecked == 0
    for report in reports:
        assert report.exit_code == 0, report.describe()
        assert len(report.tables) == 2 and report.rows > 12_000


def test_a_snapshot_only_mirror_is_verified_chunk_by_chunk_at_its_watermarks(
    source_db: SourceDb, tmp_path: Path
) -> None:
    """Nothing writes a snapshot-only mirror after its snapshot: each chunk stands at its own
    high watermark, and the changes since are folded onto it, so later writes are no difference
    and a damaged row still is."""
    create_orders(source_db, 2_000)
    config_path = write_config(
        source_db, tmp_path, chunk_size=500, snapshot='startup_mode = "snapshot-only"'
    )
    config = load(config_path)
    job = JobProcess(config_path).start()
    assert job.wait(240) == 0, job.output()
    source_db.execute(
        "UPDATE orders SET note = 'later' WHERE id % 7 = 0",
        "DELETE FROM orders WHERE id BETWEEN 600 AND 620",
        "INSERT INTO orders SELECT seq, 'new', 1.00, NULL, NOW(6) FROM seq_5000_to_5050",
        "UPDATE orders SET id = id + 10000 WHERE id BETWEEN 1200 AND 1210",
    )
    code, document = verify(config_path)
    assert code == 0, document
    assert document["tables"][0]["rows"] == 2_000 - 21 + 51

    path = str(config.sink.path / source_db.name / "orders")
    DeltaTable(path).delete("id = 1500")
    code, document = verify(config_path)
    assert code == 1
    assert found(document) == {
        (
            f"{source_db.name}.orders",
            chunk_of(config, TableId(source_db.name, "orders"), 1500),
            "missing",
            1500,
        )
    }


def test_a_table_without_a_primary_key_is_verified_and_repaired_on_its_chunk_key(
    source_db: SourceDb, tmp_path: Path
) -> None:
    """No primary key, chunked on a configured unique column: verify names the row by that
    column, ``--chunk`` verifies that chunk alone, and the repair re-dumps it. Beside it, a
    BIGINT UNSIGNED key up to 2**64 - 1 (a decimal(20,0) mirror column) is verified a chunk at
    a time and repaired the same way."""
    top = 2**64 - 1
    source_db.execute(
        "CREATE TABLE events (code VARCHAR(20) NOT NULL, note VARCHAR(40), UNIQUE KEY (code))",
        "INSERT INTO events SELECT CONCAT('ev-', LPAD(seq, 5, '0')), CONCAT('n', seq) "
        "FROM seq_1_to_600",
        "CREATE TABLE big (id BIGINT UNSIGNED PRIMARY KEY, note VARCHAR(40))",
        f"INSERT INTO big SELECT {top} - seq * 1000000000000000, CONCAT('b', seq) "
        "FROM seq_0_to_299",
        "INSERT INTO big VALUES (0, 'zero'), (1, 'one')",
    )
    db = source_db.name
    config_path = write_config(
        source_db, tmp_path, chunk_size=100, snapshot=f'chunk_key = {{ "{db}.events" = "code" }}'
    )
    config = load(config_path)
    events, big = TableId(db, "events"), TableId(db, "big")
    with running(JobProcess(config_path)) as job:
        wait_for(lambda: streaming(config, 2), 240, "both tables to stream", job)
        path = str(config.sink.path / db / "events")
        mirror = read_delta(DeltaTable(path))
        kept = mirror.filter(pa.compute.not_equal(mirror["code"], "ev-00321"))
        write_deltalake(path, kept, mode="overwrite")
        big_path = str(config.sink.path / db / "big")
        rows = read_delta(DeltaTable(big_path))
        damaged = [
            {**r, "note": "stolen"} if r["id"] == Decimal(top) else r for r in rows.to_pylist()
        ]
        write_deltalake(big_path, pa.Table.from_pylist(damaged, rows.schema), mode="overwrite")

        code, before = verify(config_path)
        assert code == 1
        store = StateStore(config.state_path)
        try:
            chunk = next(
                s.split.split_no for s in store.splits(events) if s.split.range.contains("ev-00321")
            )
            big_chunks = [s.split for s in store.splits(big)]
        finally:
            store.close()
        top_chunk = next(s.split_no for s in big_chunks if s.range.contains(top))
        assert len(big_chunks) > 2 and top_chunk not in (big_chunks[0].split_no,)
        assert found(before) == {
            (str(events), chunk, "missing", "ev-00321"),
            (str(big), top_chunk, "differs", top),
        }

        code, alone = verify(config_path, "--table", str(events), "--chunk", str(chunk))
        assert code == 1 and [c["chunk"] for c in alone["tables"][0]["chunks"]] == [chunk]
        for split in big_chunks:
            code, one = verify(config_path, "--table", str(big), "--chunk", str(split.split_no))
            assert code == (1 if split.split_no == top_chunk else 0), one

        repaired = run_cli(
            "verify", "--config", str(config_path), "--repair", "--json", timeout=600
        )
        assert repaired.returncode == 0, repaired.stdout + repaired.stderr + job.output()
        assert sorted(json.loads(repaired.stdout)["repaired"]) == sorted(
            [f"{events} chunk {chunk}", f"{big} chunk {top_chunk}"]
        )
        code, after = verify(config_path)
        assert code == 0, after
