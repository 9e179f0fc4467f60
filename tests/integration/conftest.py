"""Every mirror an integration test leaves behind reads the same through delta-rs'
``QueryBuilder`` and Polars as through our own reader (``tests.mirror_readers``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mirror_readers import check_lake


@pytest.fixture(autouse=True)
def _mirrors_read_alike(tmp_path: Path) -> Iterator[None]:
    yield
    check_lake(tmp_path)
