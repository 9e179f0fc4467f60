"""SVG snapshots of every screen over canned state (times, pids and paths frozen).

Update after a deliberate change with ``pytest tests/tui/test_snapshots.py --snapshot-update``
and look at the diff; ``python -m tests.tui.screenshots`` refreshes ``screenshots/``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.tui.scenarios import SCENARIOS, SNAPSHOT_SIZE, Scenario


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_screen(scenario: Scenario, workdir: Path, snap_compare: Callable[..., Any]) -> None:
    assert snap_compare(
        scenario.app(workdir), terminal_size=SNAPSHOT_SIZE, run_before=scenario.prepare
    )
