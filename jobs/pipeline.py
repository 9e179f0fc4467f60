"""spark-submit entry point: ``spark-submit jobs/pipeline.py --config pipeline.toml``.

The same as ``cdc-console run``; exists so a cluster deployment can hand Spark a script. The
``cdc_console`` package must be installed where the executors run (workers import the data source).
"""

from __future__ import annotations

import sys

from cdc_console.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
