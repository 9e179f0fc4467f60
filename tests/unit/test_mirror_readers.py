"""The three-reader check the integration tests read their mirrors through must be able to fail:
a row lost, doubled or changed by one reader is reported with that reader's name."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.mirror_readers import (
    assert_same_rows,
    check_lake,
    mirrors_under,
    read_mirror,
    same_when_sorted,
)

ROWS = pa.table(
    {
        "id": pa.array([1, 2, 3], pa.int64()),
        "name": pa.array(["a", "b", None], pa.string()),
        "amount": pa.array([Decimal("1.50"), None, Decimal("-0.01")], pa.decimal128(10, 2)),
    }
)


def test_the_same_rows_in_another_order_and_spelling_agree() -> None:
    theirs = ROWS.take([2, 0, 1]).cast(
        pa.schema(
            [("id", pa.int64()), ("name", pa.large_string()), ("amount", pa.decimal128(10, 2))]
        )
    )
    assert_same_rows(ROWS, theirs.select(["amount", "id", "name"]), "reader")


@pytest.mark.parametrize(
    "theirs",
    [
        pytest.param(ROWS.slice(0, 2), id="a row lost"),
        pytest.param(pa.concat_tables([ROWS, ROWS.slice(0, 1)]), id="a row doubled"),
        pytest.param(
            ROWS.set_column(1, "name", pa.array(["a", "B", None], pa.string())),
            id="a value changed",
        ),
        pytest.param(
            pa.concat_tables([ROWS.slice(0, 2), ROWS.slice(0, 1)]), id="same count, one swapped"
        ),
        pytest.param(ROWS.drop_columns(["amount"]), id="a column lost"),
    ],
)
def test_a_reader_that_reads_otherwise_is_named(theirs: pa.Table) -> None:
    with pytest.raises(AssertionError, match="other reader"):
        assert_same_rows(ROWS, theirs, "other reader")


FLOATS = pa.table({"x": pa.array([1.5, float("nan"), -0.0, None]), "tag": ["a", "b", "c", "d"]})


def test_floats_agree_bit_for_bit_nan_included() -> None:
    assert same_when_sorted(FLOATS, FLOATS.take([3, 1, 0, 2]))
    assert_same_rows(FLOATS, FLOATS.take([2, 3, 1, 0]), "reader")


def test_the_sign_of_a_zero_is_a_difference() -> None:
    theirs = FLOATS.set_column(0, "x", pa.array([1.5, float("nan"), 0.0, None]))
    assert not same_when_sorted(FLOATS, theirs)
    with pytest.raises(AssertionError, match="other reader"):
        assert_same_rows(FLOATS, theirs, "other reader")


def test_rows_that_tie_on_every_sortable_column_fall_back_to_the_row_by_row_count() -> None:
    """Two rows alike but for a list column may sort either way: the fast comparison proves
    nothing then, and the exact one decides."""
    rows = pa.table({"k": [1, 1], "items": pa.array([[1], [2]], pa.list_(pa.int64()))})
    assert_same_rows(rows, rows.take([1, 0]), "reader")
    with pytest.raises(AssertionError, match="other reader"):
        assert_same_rows(rows, rows.take([0, 0]), "other reader")


def test_a_plain_delta_table_reads_the_same_three_ways(tmp_path: Path) -> None:
    write_deltalake(str(tmp_path / "t"), ROWS)
    assert read_mirror(tmp_path / "t").sort_by("id").equals(ROWS)


def test_a_table_at_a_path_polars_cannot_open_is_read_from_a_plain_copy(tmp_path: Path) -> None:
    """Polars 2.1 looks for ``t%20x`` when the table is at ``t x`` (docs/lake.md says so)."""
    path = tmp_path / "shop é" / 'odd "name" `x`'
    write_deltalake(str(path), ROWS)
    with pytest.raises(FileNotFoundError):
        pl.read_delta(str(path))
    assert read_mirror(path).sort_by("id").equals(ROWS)


def test_every_reader_reads_the_version_ours_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit between our read and theirs (the job writes while a test polls) is no
    disagreement: the independent readers are pinned to the version ours read."""
    import tests.mirror_readers as readers

    path = tmp_path / "t"
    write_deltalake(str(path), ROWS)
    ours = readers.read_delta

    def then_a_commit(table: DeltaTable) -> pa.Table:
        rows = ours(table)
        write_deltalake(str(path), ROWS.slice(0, 1), mode="append")
        return rows

    monkeypatch.setattr(readers, "read_delta", then_a_commit)
    assert read_mirror(path).num_rows == 3
    assert DeltaTable(str(path)).version() == 1


def test_the_lake_check_finds_every_mirror_and_not_the_change_feeds(tmp_path: Path) -> None:
    for place in ("shop/orders", "shop/odd name", "_changelog/shop/orders"):
        write_deltalake(str(tmp_path / "lake" / place), ROWS)
    assert [p.relative_to(tmp_path) for p in mirrors_under(tmp_path)] == [
        Path("lake/shop/odd name"),
        Path("lake/shop/orders"),
    ]
    assert check_lake(tmp_path) == 2
