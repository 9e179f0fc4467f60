"""Quickstart without a screen: ``cdc-console demo --headless`` in the repository's ``.demo/``.

    bash .ci/setup && .venv/bin/cdc-console demo           # the main command, with the console
    .venv/bin/python jobs/quickstart.py [demo options]     # the same, headless, then a verdict

It starts a private MariaDB/MySQL sandbox, seeds ``shop``, runs a workload for a minute while the
pipeline snapshots and streams it into ``.demo/lake``, waits until it has caught up and exits 0
only if every mirror equals its source. Extra arguments go to ``cdc-console demo`` (``--keep``,
``--rows N``, ``--duration S``, ...); see the README's "The demo".
"""

from __future__ import annotations

import sys
from pathlib import Path

from cdc_console.cli import main

ROOT = Path(__file__).resolve().parent.parent / ".demo"

if __name__ == "__main__":
    sys.exit(main(["demo", "--headless", "--dir", str(ROOT), *sys.argv[1:]]))
