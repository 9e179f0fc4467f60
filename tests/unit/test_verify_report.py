"""What verify reports and records, and when it verifies at all: pure logic, no server."""

from __future__ import annotations

import pytest

from cdc_console.config import VerifyConfig, config_from_dict
from cdc_console.core.lifecycle import Lifecycle, Verdict
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.core.schema_change import SchemaChange
from cdc_console.errors import ConfigError
from cdc_console.state.store import StateStore, TableState
from cdc_console.status import skip_reason
from cdc_console.verify.compare import Difference, DifferenceKind
from cdc_console.verify.report import (
    EXIT_DIFFERS,
    EXIT_EQUAL,
    EXIT_ERROR,
    ChunkResult,
    TableResult,
    VerifyReport,
    hidden_columns,
)
from cdc_console.verify.verifier import _confirmed, verify_server_id

ORDERS = TableId("shop", "orders")


def base_config(**verify: object) -> dict[str, object]:
    return {
        "source": {"user": "cdc", "password_env": "X", "tables": ["shop.*"]},
        "verify": verify,
    }


def differing_chunk() -> ChunkResult:
    return ChunkResult(
        ORDERS,
        3,
        "[300, 400)",
        Verdict.DIFFERS,
        rows=100,
        differences=[
            Difference(DifferenceKind.MISSING, (305,), {}, 305),
            Difference(DifferenceKind.EXTRA, (399,), {}, 399),
            Difference(
                DifferenceKind.DIFFERS,
                (310,),
                {"amount": ("1.10", "1.11"), "card_number": ("4111", "4112")},
                310,
            ),
        ],
        position=BinlogOffset("mysql-bin.000002", 4711),
        seconds=0.5,
        verified_at=1_700_000_000.0,
    )


def test_a_report_names_keys_columns_and_values_but_never_hidden_values() -> None:
    hide = hidden_columns(ORDERS, ["id", "amount", "card_number"], VerifyConfig().hide_values)
    assert hide == {"card_number"}
    table = TableResult(ORDERS, ("id",), [differing_chunk()], hide=hide)
    report = VerifyReport([table], 0.5)
    text = report.describe()
    assert "chunk 3 [300, 400): 1 row(s) missing from the mirror (id=305)" in text
    assert "1 row(s) in the mirror only (id=399)" in text
    assert 'id=310: amount "1.10" != "1.11", card_number (hidden)' in text
    assert "4111" not in text
    document = report.to_dict()
    assert document["verdict"] == "differs"
    chunk = document["tables"][0]["chunks"][0]
    assert chunk["missing"] == 1 and chunk["extra"] == 1 and chunk["differing"] == 1
    assert chunk["detail"]["differs"] == [
        {"key": [310], "columns": {"amount": ['"1.10"', '"1.11"'], "card_number": "(hidden)"}}
    ]
    assert "4111" not in str(document)
    assert report.exit_code == EXIT_DIFFERS


def test_exit_codes_put_an_error_above_a_difference_above_equal() -> None:
    equal = TableResult(ORDERS, ("id",), [ChunkResult(ORDERS, 0, "[*, *)", Verdict.EQUAL)])
    skipped = TableResult(TableId("shop", "new"), skipped="still snapshotting")
    differs = TableResult(ORDERS, ("id",), [differing_chunk()])
    failed = TableResult(ORDERS, error="OperationalError: gone")
    assert VerifyReport([equal, skipped]).exit_code == EXIT_EQUAL
    assert VerifyReport([equal, differs]).exit_code == EXIT_DIFFERS
    assert VerifyReport([differs, failed]).exit_code == EXIT_ERROR
    assert "shop.new: skipped: still snapshotting" in VerifyReport([skipped]).describe()


def test_the_state_keeps_each_chunks_last_verdict(tmp_path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    try:
        row = differing_chunk().state_row({"card_number"})
        store.record_verification(row)
        store.record_verification(
            ChunkResult(ORDERS, 4, "[400, *)", Verdict.EQUAL).state_row(set())
        )
        kept = store.verifications(ORDERS)
        assert [(v.split_id, v.verdict, v.missing, v.extra, v.differing) for v in kept] == [
            ("shop.orders:3", Verdict.DIFFERS, 1, 1, 1),
            ("shop.orders:4", Verdict.EQUAL, 0, 0, 0),
        ]
        assert kept[0].position == BinlogOffset("mysql-bin.000002", 4711)
        assert kept[0].detail["differs"][0]["columns"]["card_number"] == "(hidden)"
        again = ChunkResult(ORDERS, 3, "[300, 400)", Verdict.EQUAL, verified_at=1_700_000_100.0)
        store.record_verification(again.state_row(set()))
        assert [v.verdict for v in store.verifications(ORDERS)] == [Verdict.EQUAL] * 2
        assert store.verified_since(ORDERS) == 0.0
    finally:
        store.close()


def test_only_keys_that_differ_twice_are_reported() -> None:
    first = differing_chunk()
    again = differing_chunk()
    again.differences = [
        *again.differences[1:],
        Difference(DifferenceKind.MISSING, (333,), {}, 333),
    ]
    confirmed = _confirmed(first, again)
    assert [(d.kind, d.key) for d in confirmed.differences] == [
        (DifferenceKind.EXTRA, (399,)),
        (DifferenceKind.DIFFERS, (310,)),
    ]
    settled = _confirmed(differing_chunk(), ChunkResult(ORDERS, 3, "[300, 400)", Verdict.EQUAL))
    assert settled.verdict == Verdict.EQUAL


@pytest.mark.parametrize(
    ("state", "resume", "pending", "reason"),
    [
        (Lifecycle.STREAMING, None, None, ""),
        (Lifecycle.PAUSED, Lifecycle.STREAMING, None, ""),
        (Lifecycle.PAUSED, Lifecycle.SNAPSHOTTING, None, "paused during its snapshot"),
        (Lifecycle.SNAPSHOTTING, None, None, "still snapshotting"),
        (Lifecycle.REDUMP, None, None, "being re-dumped"),
        (Lifecycle.NEEDS_REDUMP, None, None, "re-dump it first"),
        (Lifecycle.STREAMING, None, "ALTER TABLE", "schema change is being settled"),
    ],
)
def test_tables_not_at_a_binlog_position_are_skipped_with_the_reason(
    state: Lifecycle, resume: Lifecycle | None, pending: str | None, reason: str
) -> None:
    at = BinlogOffset("binlog.000001", 4)
    held = SchemaChange(at, at, pending) if pending is not None else None
    table = TableState(
        ORDERS,
        state,
        "id",
        0,
        4,
        4,
        400,
        0,
        None,
        None,
        None,
        0.0,
        resume_state=resume,
        schema_pending=held,
    )
    found = skip_reason(table)
    assert (reason in found) if reason else found == ""


def test_verify_config_and_its_own_server_id() -> None:
    config = config_from_dict(base_config(every="6h", rows_per_second=50_000))
    assert config.verify.every == 6 * 3600 and config.verify.rows_per_second == 50_000
    assert config_from_dict(base_config()).verify.every == 0
    assert verify_server_id(config_from_dict(base_config())) == 5404
    for bad, words in (
        ({"every": "10s"}, "shorter than a minute"),
        ({"rows_per_second": -1}, "negative"),
        ({"hide_values": [1]}, "list of strings"),
        ({"often": 1}, "often"),
    ):
        with pytest.raises(ConfigError, match=words):
            config_from_dict(base_config(**bad))
    narrow = base_config()
    narrow["source"]["server_id"] = "5400-5402"
    with pytest.raises(ConfigError, match="verify needs one more"):
        verify_server_id(config_from_dict(narrow))


def test_a_schedule_needs_a_server_id_beyond_the_jobs() -> None:
    doc = base_config(every="6h")
    doc["source"]["server_id"] = "5400-5402"
    with pytest.raises(ConfigError, match='widen it by one: server_id = "5400-5403"'):
        config_from_dict(doc)
