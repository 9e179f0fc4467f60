"""Export the console's screens as SVG into ``screenshots/`` (linked from the README).

    .venv/bin/python -m tests.tui.screenshots

Same canned pipeline and frozen clock as the snapshot tests, so the pictures match them.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from tests.tui.scenarios import SCENARIOS, SNAPSHOT_SIZE, Scenario

OUT = Path(__file__).resolve().parents[2] / "screenshots"


async def export(scenario: Scenario, directory: Path) -> Path:
    app = scenario.app(directory)
    async with app.run_test(size=SNAPSHOT_SIZE) as pilot:
        await scenario.prepare(pilot)
        svg = app.export_screenshot(title=f"cdc-console: {scenario.name}")
    target = OUT / f"{scenario.name}.svg"
    target.write_text(svg)
    return target


def main() -> int:
    os.environ["TZ"] = "UTC"
    time.tzset()
    OUT.mkdir(exist_ok=True)
    for scenario in SCENARIOS:
        with tempfile.TemporaryDirectory() as tmp:
            previous = Path.cwd()
            os.chdir(tmp)
            try:
                print(asyncio.run(export(scenario, Path(tmp))))
            finally:
                os.chdir(previous)
    return 0


if __name__ == "__main__":
    sys.exit(main())
