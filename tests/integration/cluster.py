"""A real Spark standalone cluster on loopback for the tests: a master and one-core workers
started with the launcher that ships in the pyspark package (``bin/spark-class``)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark

from cdc_console.mysql.sandbox import free_port


def master_state(ui_port: int) -> dict[str, object]:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as answer:
        state: dict[str, object] = json.loads(answer.read())
    return state


@contextmanager
def standalone_cluster(folder: Path, workers: int = 2) -> Iterator[tuple[str, int]]:
    """A master and ``workers`` one-core workers; yields the master URL and its UI port."""
    home = Path(pyspark.__file__).parent
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOG_DIR": str(folder / "logs"),
        "SPARK_NO_DAEMONIZE": "1",
    }
    port, ui_port = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    launched: list[subprocess.Popen[bytes]] = []
    folder.mkdir(parents=True, exist_ok=True)

    def launch(name: str, *args: str) -> None:
        log = (folder / f"{name}.log").open("wb")
        launched.append(
            subprocess.Popen(
                [str(home / "bin" / "spark-class"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        )

    try:
        launch(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)),
        )
        for n in range(workers):
            work = folder / f"worker-{n}"
            work.mkdir(parents=True)
            launch(
                f"worker-{n}",
                "org.apache.spark.deploy.worker.Worker",
                *("--host", "127.0.0.1", "--cores", "1", "--memory", "1g"),
                *("--webui-port", str(free_port()), "--work-dir", str(work), url),
            )

        def workers_alive() -> bool:
            try:
                found = master_state(ui_port).get("workers", [])
            except OSError:
                return False
            alive = [w for w in found if isinstance(w, dict) and w.get("state") == "ALIVE"]
            return len(alive) == workers

        deadline = time.monotonic() + 120
        while not workers_alive():
            if time.monotonic() > deadline or any(p.poll() is not None for p in launched):
                logs = "\n".join(p.read_text()[-2000:] for p in folder.glob("*.log"))
                raise AssertionError(f"the standalone cluster did not come up:\n{logs}")
            time.sleep(0.5)
        yield url, ui_port
    finally:
        for proc in reversed(launched):
            proc.terminate()
        for proc in launched:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
