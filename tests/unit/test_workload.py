"""The workload's pure logic: the mix, the pacing, key spaces, counts; no server needed."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from cdc_console.demo import shop
from cdc_console.demo.pipeline import default_chunk_size
from cdc_console.demo.workload import (
    KEY_UPDATE_SHARE,
    MAX_BACKLOG_SECONDS,
    TABLE_WEIGHTS,
    KeySpace,
    Pacer,
    Workload,
    WorkloadCounts,
    WorkloadMix,
)
from cdc_console.errors import CdcError


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_mix_parses_and_normalises() -> None:
    mix = WorkloadMix.parse("60/30/10")
    assert mix.weights == (60, 30, 10)
    assert mix.shares() == pytest.approx({"insert": 0.6, "update": 0.3, "delete": 0.1})
    assert str(mix) == "60/30/10"
    assert WorkloadMix.parse(" 1 / 1 / 0 ").shares() == {"insert": 0.5, "update": 0.5, "delete": 0}


@pytest.mark.parametrize("text", ["60/30", "a/b/c", "60/-30/10", "0/0/0", "60/30/10/5", ""])
def test_mix_rejects_nonsense_with_a_fix(text: str) -> None:
    with pytest.raises(CdcError) as error:
        WorkloadMix.parse(text)
    assert "--mix 60/30/10" in error.value.hint


def test_mix_draws_in_proportion() -> None:
    rng = random.Random(1)
    mix = WorkloadMix.parse("60/30/10")
    drawn = Counter(mix.choose(rng) for _ in range(20_000))
    assert drawn["insert"] / 20_000 == pytest.approx(0.6, abs=0.02)
    assert drawn["update"] / 20_000 == pytest.approx(0.3, abs=0.02)
    assert drawn["delete"] / 20_000 == pytest.approx(0.1, abs=0.02)
    only_inserts = WorkloadMix.parse("1/0/0")
    assert {only_inserts.choose(rng) for _ in range(100)} == {"insert"}


def test_pacer_spaces_statements_evenly() -> None:
    clock = FakeClock()
    pacer = Pacer(4.0, clock)
    assert pacer.delay() == 0.0
    assert pacer.delay() == pytest.approx(0.25)
    clock.now += 0.25
    assert pacer.delay() == pytest.approx(0.25)


def test_pacer_catches_up_after_a_slow_statement_without_bursting() -> None:
    clock = FakeClock()
    pacer = Pacer(10.0, clock)
    pacer.delay()
    clock.now += 0.35  # one statement took 3.5 intervals
    # The schedule was at +0.1: the next statements go at once until it is back on time.
    waits = [pacer.delay() for _ in range(4)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert waits[3] == pytest.approx(0.05)
    clock.now += MAX_BACKLOG_SECONDS + 5  # a long stall: start afresh, no burst of 50
    assert pacer.delay() == 0.0
    assert pacer.delay() == pytest.approx(0.1)


def test_pacer_rate_over_a_simulated_minute() -> None:
    clock = FakeClock()
    pacer = Pacer(25.0, clock)
    start = clock.now
    statements = 0
    while clock.now - start < 60.0:
        clock.now += pacer.delay() + 0.001  # each statement takes 1 ms
        statements += 1
    assert statements == pytest.approx(1500, abs=2)


def test_pacer_refuses_a_zero_rate() -> None:
    with pytest.raises(ValueError):
        Pacer(0)


def test_key_space_hands_out_new_keys_and_probes_the_used_range() -> None:
    keys = KeySpace(1000, 1999)
    assert [keys.new_key(), keys.new_key()] == [2000, 2001]
    rng = random.Random(3)
    probes = [keys.probe(rng) for _ in range(1000)]
    assert min(probes) >= 1000 and max(probes) <= 2001
    keys.skip(500)
    assert keys.new_key() == 2502
    empty = KeySpace(1, 0)
    assert empty.probe(rng) == 1


def test_counts_summary() -> None:
    counts = WorkloadCounts()
    counts.started_at, counts.stopped_at = 10.0, 20.0
    counts.ops.update(
        {"insert": 60, "update": 25, "key_update": 2, "multi_row": 3, "delete": 8, "missed": 2}
    )
    counts.tables.update({"orders": 50, "customers": 20, "products": 15, "coupons": 15})
    assert counts.total == 100
    text = counts.summary()
    assert text.startswith("100 statements in 10.0 s (10.0/s): 60 inserts, 30 updates")
    assert "2 key changes, 3 multi-row" in text and "8 deletes; 2 missed" in text


class FakeCursor:
    """Answers key probes with the probe itself and counts one affected row per statement."""

    def __init__(self, log: list[tuple[str, Any]]) -> None:
        self.log = log
        self.rowcount = 0
        self._row: Any = None

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str, args: Any = None) -> None:
        self.log.append((sql, args))
        self._row = (args[0],) if sql.startswith("SELECT") and args else None
        self.rowcount = 1

    def fetchone(self) -> Any:
        return self._row


class FakeConnection:
    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []

    def cursor(self) -> FakeCursor:
        return FakeCursor(self.log)


def _workload(mix: str) -> Workload:
    workload = Workload(lambda: None, "shop", rate=10, mix=WorkloadMix.parse(mix))
    workload.keys = {
        "orders": KeySpace(1000, 2999),
        "customers": KeySpace(1, 500),
        "products": KeySpace(500, 649),
    }
    return workload


def test_steps_touch_every_table_with_every_kind_of_change() -> None:
    workload = _workload("60/30/10")
    conn = FakeConnection()
    rng = random.Random(11)
    outcomes: Counter[tuple[str, str]] = Counter()
    for _ in range(4000):
        table = rng.choices(list(TABLE_WEIGHTS), weights=list(TABLE_WEIGHTS.values()))[0]
        outcomes[(table, workload.step(conn, rng, table))] += 1
    for table in shop.TABLE_NAMES:
        for outcome in ("insert", "update", "delete", "key_update"):
            assert outcomes[(table, outcome)] > 0, (table, outcome)
    assert outcomes[("products", "multi_row")] > 0
    updates = sum(n for (_, o), n in outcomes.items() if o in ("update", "key_update", "multi_row"))
    key_updates = sum(n for (_, o), n in outcomes.items() if o == "key_update")
    assert key_updates / updates == pytest.approx(KEY_UPDATE_SHARE, abs=0.02)
    statements = [sql for sql, _ in conn.log if not sql.startswith("SELECT")]
    assert all("`shop`." in sql for sql in statements)
    moved = [args for sql, args in conn.log if "SET order_id = %s WHERE" in sql]
    assert moved and all(new > 2999 for new, _ in moved)


def test_only_inserts_never_read_or_delete() -> None:
    workload = _workload("1/0/0")
    conn = FakeConnection()
    rng = random.Random(5)
    for table in shop.TABLE_NAMES:
        assert workload.step(conn, rng, table) == "insert"
    assert all(sql.startswith("INSERT") for sql, _ in conn.log)


def test_workload_validates_rate_and_threads() -> None:
    with pytest.raises(CdcError):
        Workload(lambda: None, rate=0)
    with pytest.raises(CdcError):
        Workload(lambda: None, threads=0)


def test_seed_sizes_and_chunk_size() -> None:
    sizes = {t.name: t.rows_for(300_000) for t in shop.TABLES}
    assert sum(sizes.values()) == 300_000
    assert sizes["orders"] > sizes["customers"] > sizes["coupons"] > sizes["products"]
    assert all(t.rows_for(10) >= 10 for t in shop.TABLES)
    assert default_chunk_size(300_000) == 7500
    assert default_chunk_size(3_000) == 256
    assert default_chunk_size(10_000_000) == 8096


def test_seed_rows_are_deterministic_and_keys_unique() -> None:
    sizes = {t.name: t.rows_for(2_000) for t in shop.TABLES}
    for spec in shop.TABLES:
        first = [spec.make_row(random.Random(7), n, sizes) for n in range(50)]
        again = [spec.make_row(random.Random(7), n, sizes) for n in range(50)]
        assert first[0] == again[0]
        assert len(first[0]) == len(spec.columns)
    orders = [shop.order_row(random.Random(n), n, sizes) for n in range(100)]
    assert [o[0] for o in orders] == list(range(shop.FIRST_ORDER_ID, shop.FIRST_ORDER_ID + 100))
    assert all(
        shop.FIRST_PRODUCT_ID <= o[4] < shop.FIRST_PRODUCT_ID + sizes["products"] for o in orders
    )
