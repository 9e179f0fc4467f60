"""The splitter's arithmetic, without a server: factor, step, even boundaries, ranges."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest

from cdc_console.core.chunk import ChunkRange
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.errors import ConfigError
from cdc_console.source import splitter as splitter_module
from cdc_console.source.splitter import (
    ChunkSplitter,
    distribution_factor,
    even_boundaries,
    even_step,
    factor_within,
    is_integer_key,
    ranges_from_boundaries,
)

U64_MAX = 2**64 - 1
I32_MAX = 2**31 - 1


def test_factor_is_one_for_dense_keys() -> None:
    assert distribution_factor(1, 10_000, 10_000) == 1


def test_factor_rounds_up_to_four_decimals() -> None:
    assert distribution_factor(0, 9, 3) == Fraction(33334, 10_000)
    assert distribution_factor(0, 0, 3) == Fraction(3334, 10_000)
    assert distribution_factor(1, 2999, 1000) == Fraction(2999, 1000)


def test_factor_is_exact_near_two_to_the_64() -> None:
    # as floats, 2**64 - 1 and 2**64 - 2 are the same number, and the span would come out 0
    assert distribution_factor(U64_MAX - 1, U64_MAX, 2) == 1
    assert distribution_factor(0, U64_MAX, 1) == 2**64


def test_factor_needs_rows() -> None:
    with pytest.raises(ValueError):
        distribution_factor(1, 2, 0)


def test_factor_bounds_are_inclusive() -> None:
    assert factor_within(Fraction(1000), 0.05, 1000.0)
    assert factor_within(Fraction(5, 100), 0.05, 1000.0)
    assert not factor_within(Fraction(10_000_001, 10_000), 0.05, 1000.0)
    assert not factor_within(Fraction(499, 10_000), 0.05, 1000.0)
    assert factor_within(Fraction(10**30), 0.05, math.inf)


def test_step_is_factor_times_chunk_size_truncated_and_at_least_one() -> None:
    assert even_step(Fraction(1), 8096) == 8096
    assert even_step(Fraction(29_980, 10_000), 100) == 299
    assert even_step(Fraction(15_001, 10_000), 3) == 4
    assert even_step(Fraction(5, 100), 10) == 1
    assert even_step(Fraction(1, 10_000), 1) == 1


def test_even_boundaries_dense() -> None:
    assert even_boundaries(0, 999, 100) == [100, 200, 300, 400, 500, 600, 700, 800, 900]


def test_even_boundaries_negative_keys() -> None:
    assert even_boundaries(-500, 499, 250) == [-250, 0, 250]


def test_even_boundaries_keep_a_boundary_equal_to_max() -> None:
    # Flink CDC's testSplitEvenlySizedChunksNormal: [max - 20, max], step 10
    assert even_boundaries(I32_MAX - 20, I32_MAX, 10) == [I32_MAX - 10, I32_MAX]


def test_even_boundaries_never_pass_max() -> None:
    # Flink CDC's testSplitEvenlySizedChunksOverflow, where Java stops on overflow
    assert even_boundaries(I32_MAX - 19, I32_MAX, 10) == [I32_MAX - 9]
    bounds = even_boundaries(U64_MAX - 999, U64_MAX, 100)
    assert bounds[0] == U64_MAX - 899
    assert bounds[-1] == U64_MAX - 99
    assert len(bounds) == 9
    assert all(b <= U64_MAX for b in bounds)


def test_even_boundaries_none_when_one_step_covers_everything() -> None:
    assert even_boundaries(1, 100, 100) == []
    assert even_boundaries(1, 101, 100) == [101]


def test_even_boundaries_reject_a_zero_step() -> None:
    with pytest.raises(ValueError):
        even_boundaries(1, 10, 0)


def test_ranges_are_contiguous_and_unbounded_at_both_ends() -> None:
    assert ranges_from_boundaries([]) == [ChunkRange(None, None)]
    assert ranges_from_boundaries([10, 20]) == [
        ChunkRange(None, 10),
        ChunkRange(10, 20),
        ChunkRange(20, None),
    ]
    assert [str(r) for r in ranges_from_boundaries(["B", "c"])] == [
        "(-inf, B)",
        "[B, c)",
        "[c, +inf)",
    ]


@pytest.mark.parametrize(
    ("data_type", "expected"),
    [
        ("tinyint", True),
        ("smallint", True),
        ("mediumint", True),
        ("int", True),
        ("bigint", True),
        ("decimal", False),
        ("varchar", False),
        ("datetime", False),
        ("varbinary", False),
        ("double", False),
    ],
)
def test_only_integer_types_split_by_arithmetic(data_type: str, expected: bool) -> None:
    assert is_integer_key(ColumnInfo("k", data_type, data_type)) is expected


def test_constructor_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        ChunkSplitter(None, 0)
    with pytest.raises(ValueError):
        ChunkSplitter(None, 10, distribution_factor_upper=0.01, distribution_factor_lower=0.05)
    with pytest.raises(ValueError):
        ChunkSplitter(None, 10, distribution_factor_lower=math.nan)


def test_table_without_key_is_a_config_error_before_any_query() -> None:
    class NoConnection:
        def cursor(self) -> Any:
            raise AssertionError("no query expected")

    schema = TableSchema(TableId("db", "t"), (ColumnInfo("v", "int", "int"),), (), "")
    with pytest.raises(ConfigError) as info:
        ChunkSplitter(NoConnection(), 10).split(schema)
    assert "chunk_key" in info.value.hint


class CaseInsensitiveServer:
    """A stand-in for a server under a ``*_ci`` collation that, like any server may, answers
    ``MAX`` with one case variant of a value and ``MIN`` with another.

    It answers only the splitter's own queries (recognised by shape) and counts them, so a walk
    that trusted Python's ``==`` would produce boundaries the server sees as empty chunks.
    """

    def __init__(self, keys: list[str]) -> None:
        self.keys = sorted(keys, key=str.lower)
        self.queries = 0

    def cursor(self) -> Any:
        return self

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str, args: Any = None) -> None:
        self.queries += 1
        assert self.queries < 1000, "the walk does not terminate"
        fold = str.lower
        if sql.startswith("SELECT MIN(`k`), MAX(`k`)"):
            lo, hi = self.keys[0], self.keys[-1]
            self.result: tuple[Any, ...] = (lo.lower(), hi.upper(), fold(lo) == fold(hi))
        elif sql.startswith("SELECT e, e > %s, e >= %s FROM (SELECT MAX"):
            start, top, _ = args
            limit = int(sql.rsplit("LIMIT ", 1)[1].split(")")[0])
            window = [k for k in self.keys if fold(k) >= fold(start)][:limit]
            e = window[-1].upper() if window else None
            self.result = (e, fold(e) > fold(start), fold(e) >= fold(top)) if e else (None,) * 3
        elif sql.startswith("SELECT e, e > %s FROM (SELECT MIN"):
            top, start = args
            after = [k for k in self.keys if fold(k) > fold(start)]
            e = after[0].lower() if after else None
            self.result = (e, fold(e) > fold(top)) if e else (None, None)
        else:
            raise AssertionError(f"unexpected query {sql}")

    def fetchone(self) -> tuple[Any, ...]:
        return self.result


def test_uneven_walk_trusts_the_servers_equality_not_pythons(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Six first-column values of 100 rows each, half 'x' and half 'X', chunks of 30."""
    keys = [letter if n % 2 else letter.upper() for letter in "abcdef" for n in range(100)]
    server = CaseInsensitiveServer(keys)
    # the collation's weights agree with its comparisons (probed against a real server in
    # tests/integration/test_key_orders.py); this fake server answers only the walk's queries
    monkeypatch.setattr(splitter_module, "orderable", lambda conn, column: True)
    columns = (
        ColumnInfo(
            "k",
            "varchar",
            "varchar(4)",
            character_set="utf8mb4",
            collation="utf8mb4_general_ci",
        ),
        ColumnInfo("n", "int", "int"),
    )
    schema = TableSchema(TableId("db", "t"), columns, ("k", "n"), "k")
    splits = ChunkSplitter(server, 30).split(schema)
    assert [str(s) for s in splits] == [
        "db.t (-inf, b)",
        "db.t [b, c)",
        "db.t [c, d)",
        "db.t [d, e)",
        "db.t [e, f)",
        "db.t [f, +inf)",
    ]
