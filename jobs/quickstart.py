"""Quickstart: a private MariaDB, a seeded ``shop`` database, the pipeline until caught up.

    bash .ci/setup && .venv/bin/python jobs/quickstart.py

Everything lives under ``.demo/`` (ignored by git); run it again to resume from the same state.
The Textual console and ``cdc-console demo`` come with issue 4; this script is the stand-in.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from cdc_console.mysql.sandbox import MySQLSandbox

ROOT = Path(__file__).resolve().parent.parent / ".demo"


def main() -> int:
    ROOT.mkdir(exist_ok=True)
    sandbox = MySQLSandbox(ROOT / "mysql").start()
    try:
        conn = sandbox.connect()
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME='shop'")
            if not cur.fetchone()[0]:
                cur.execute("CREATE DATABASE shop")
                cur.execute("USE shop")
                cur.execute(
                    "CREATE TABLE demo_orders (order_id INT PRIMARY KEY, order_date DATE, "
                    "order_time TIMESTAMP(3), quantity INT, product_id INT, purchaser VARCHAR(40))"
                )
                cur.execute(
                    "INSERT INTO demo_orders SELECT seq, '2021-09-17', NOW(3), seq % 97, "
                    "500 + seq % 4, 'flink' FROM seq_1000_to_50999"
                )
                cur.execute("CREATE TABLE customers (code VARCHAR(20) PRIMARY KEY, name TEXT)")
                cur.execute(
                    "INSERT INTO customers SELECT CONCAT(CHAR(65 + seq % 26), seq), "
                    "CONCAT('Customer ', seq) FROM seq_1_to_5000"
                )
        conn.close()
        password = secrets.token_urlsafe(12)
        sandbox.create_user(
            "cdc",
            password,
            [
                "SELECT ON *.*",
                "REPLICATION SLAVE ON *.*",
                "REPLICATION CLIENT ON *.*",
                "BINLOG MONITOR ON *.*",
            ],
        )
        config = ROOT / "pipeline.toml"
        config.write_text(
            f'[source]\nport = {sandbox.port}\nuser = "cdc"\npassword_env = "CDC_SOURCE_PASSWORD"\n'
            'tables = ["shop.*"]\n[sink]\npath = "lake"\n[state]\npath = "state/pipeline.sqlite"\n'
        )
        env = {**os.environ, "CDC_SOURCE_PASSWORD": password}
        cli = [sys.executable, "-m", "cdc_console"]
        subprocess.run([*cli, "check", "--config", str(config)], env=env, check=True)
        subprocess.run(
            [*cli, "run", "--config", str(config), "--until-caught-up"], env=env, check=True
        )
        subprocess.run([*cli, "status", "--config", str(config)], env=env, check=True)
        print(f"\nmirrors are Delta tables under {ROOT / 'lake'}")
        return 0
    finally:
        sandbox.stop()


if __name__ == "__main__":
    sys.exit(main())
