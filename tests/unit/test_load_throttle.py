"""Chunk reads yield to a busy source (``[source] max_load``), and the binlog stream never does."""

from __future__ import annotations

import textwrap
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from cdc_console.config import PipelineConfig, config_from_dict
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.errors import ConfigError, SourceError
from cdc_console.source.assigner import HybridSplitAssigner
from cdc_console.source.throttle import LoadThrottle, over_limits
from cdc_console.state.store import StateStore
from tests.unit.test_assigner import ORDERS, USERS, Head, fake_split, finish, schema


class Load:
    """The server's figures as a test sets them, and the names each probe asked for."""

    def __init__(self, **values: float) -> None:
        self.values = dict(values)
        self.asked: list[list[str]] = []
        self.fail: Exception | None = None

    def __call__(self, names: Sequence[str]) -> Mapping[str, float]:
        self.asked.append(list(names))
        if self.fail is not None:
            raise self.fail
        return {n: self.values[n] for n in names if n in self.values}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def parse_config(source_extra: str) -> PipelineConfig:
    text = textwrap.dedent(
        f"""
        [source]
        tables = ["shop.orders"]
        {source_extra}
        """
    )
    return config_from_dict(tomllib.loads(text))


def test_max_load_is_read_with_the_names_as_the_server_spells_them() -> None:
    config = parse_config("max_load = { Threads_running = 50, replica_lag = 30.5 }")
    assert config.source.max_load == (("Threads_running", 50.0), ("replica_lag", 30.5))
    assert parse_config("").source.max_load == ()


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ('max_load = { "Threads running" = 5 }', "is not a status variable's name"),
        ('max_load = { Threads_running = "many" }', "must be a number"),
        ("max_load = { Threads_running = 0 }", "must be above 0"),
        ("max_load = { Threads_running = true }", "must be a number"),
        ("max_load = 50", "source.max_load must be"),
    ],
)
def test_a_max_load_that_cannot_work_is_refused_with_its_fix(entry: str, said: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(entry)
    assert said in str(raised.value)


def test_the_reason_names_every_figure_above_its_limit_and_only_those() -> None:
    limits = {"Threads_running": 50.0, "replica_lag": 30.0, "Threads_connected": 500.0}
    assert over_limits(limits, {"Threads_running": 61, "replica_lag": 30}) == (
        "Threads_running 61 > 50"
    )
    assert over_limits(limits, {"Threads_running": 61, "replica_lag": 45.5}) == (
        "Threads_running 61 > 50, replica_lag 45.5 > 30"
    )
    assert over_limits(limits, {"Threads_running": 50}) is None  # at the limit is within it
    assert over_limits(limits, {}) is None  # a figure the server did not report


def test_a_spell_of_yielding_is_kept_in_the_state_and_journaled_once(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    load = Load(Threads_running=61)
    clock = Clock()
    throttle = LoadThrottle({"Threads_running": 50}, load, store, clock=clock)
    assert throttle.reason() == "Threads_running 61 > 50"
    first = store.throttled()
    assert first is not None and first.reason == "Threads_running 61 > 50"
    assert throttle.reason() == "Threads_running 61 > 50"
    assert len(load.asked) == 1  # within a second: the last probe answers
    clock.now += 2
    load.values["Threads_running"] = 70
    assert throttle.reason() == "Threads_running 70 > 50"
    again = store.throttled()
    assert again is not None and again.reason == "Threads_running 70 > 50"
    assert again.since == first.since  # the same spell: since when it began
    clock.now += 2
    load.values["Threads_running"] = 3
    assert throttle.reason() is None
    assert store.throttled() is None
    said = [(e.level, e.message) for e in store.events() if e.kind == "throttle"]
    assert said == [
        (
            "warning",
            "chunk reads yield to a busy source: Threads_running 61 > 50 ([source] max_load); "
            "the binlog stream goes on, and so do the reads once the load is back under its "
            "limit",
        ),
        ("info", "chunk reads go on: the source's load is back under [source] max_load"),
    ]


def test_a_failed_load_probe_never_holds_the_reads(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    load = Load()
    load.fail = ConnectionError("gone")
    throttle = LoadThrottle({"Threads_running": 50}, load, store)
    assert throttle.reason() is None
    assert store.throttled() is None


def test_without_limits_the_server_is_never_asked(tmp_path: Path) -> None:
    load = Load(Threads_running=1000)
    throttle = LoadThrottle({}, load, StateStore(tmp_path / "state.sqlite"))
    assert throttle.reason() is None
    assert load.asked == []


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    """orders has chunks to read; users streams from binlog.000001:100."""
    store = StateStore(tmp_path / "state.sqlite")
    store.ensure_table(ORDERS, "id", Lifecycle.SNAPSHOTTING)
    store.ensure_table(USERS, "id", Lifecycle.STREAMING, Head()())
    for table_id in (ORDERS, USERS):
        store.set_schema(table_id, schema(table_id))
    return store


def test_a_busy_source_holds_the_chunks_and_never_the_binlog_window(store: StateStore) -> None:
    head = Head()
    load = Load(Threads_running=61)
    clock = Clock()
    throttle = LoadThrottle({"Threads_running": 50}, load, store, clock=clock)
    assigner = HybridSplitAssigner(store, fake_split, head, range(5400, 5403), 2, throttle=throttle)
    head.pos = 300
    plan = assigner.next_plan()
    assert plan is not None
    assert plan.snapshot == ()
    assert str(plan.binlog) == "binlog [binlog.000001:100, binlog.000001:300) shop.users"
    assert store.splits(ORDERS) == []  # not even split: splitting reads the table too
    finish(store, plan, {})

    clock.now += 2
    load.values["Threads_running"] = 20
    plan = assigner.next_plan()
    assert plan is not None
    assert [str(p.split) for p in plan.snapshot] == [
        "shop.orders (-inf, 1000)",
        "shop.orders [1000, 2000)",
    ]
    assert store.throttled() is None


def test_nothing_to_read_ends_a_spell_without_asking_the_server(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    store.ensure_table(USERS, "id", Lifecycle.STREAMING, Head()())
    store.set_schema(USERS, schema(USERS))
    store.record_throttled("Threads_running 61 > 50")  # the spell of a run before
    load = Load(Threads_running=61)
    throttle = LoadThrottle({"Threads_running": 50}, load, store)
    assigner = HybridSplitAssigner(
        store, fake_split, Head(), range(5400, 5403), 2, throttle=throttle
    )
    assigner.next_plan()
    assert store.throttled() is None
    assert load.asked == []


def test_a_source_that_moved_is_the_plans_to_raise_not_the_probes(tmp_path: Path) -> None:
    """The planner's connection raises SourceError when the source failed over, so the plan
    is made again from the re-mapped state; the load probe must not swallow it."""
    load = Load()
    load.fail = SourceError("the source moved to another server", transient=True)
    throttle = LoadThrottle({"Threads_running": 50}, load, StateStore(tmp_path / "s.sqlite"))
    with pytest.raises(SourceError):
        throttle.reason()
