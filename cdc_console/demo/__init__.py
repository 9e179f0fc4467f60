"""``cdc-console demo``: a seeded shop, a live workload, the pipeline and the console, in one command.

- ``shop``: the demo schema and its seeding (``orders`` shaped like Flink CDC's ``demo_orders``).
- ``workload``: the threaded insert/update/delete generator (also ``cdc-console workload``).
- ``server``: the private sandbox server, or a server the user points ``--source`` at.
- ``verify``: mirror-vs-source comparison, row for row, in canonical values.
- ``run``: the orchestration, headless or with the console.

None of it imports Spark: the job runs as its own process, started through ``cdc_console.launcher``.
"""

from pathlib import Path

# Defaults shared by the modules and the CLI, kept here so building the CLI's parser does not
# import the demo's heavier modules (Delta, SQLite, the MySQL driver).
DEFAULT_DIR = Path(".demo")
DEFAULT_DATABASE = "shop"
DEFAULT_ROWS = 300_000
DEFAULT_RATE = 50.0
DEFAULT_MIX = "60/30/10"
ADMIN_PASSWORD_ENV = "CDC_DEMO_ADMIN_PASSWORD"
