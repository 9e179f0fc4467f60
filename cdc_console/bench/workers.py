"""The reference contenders, each run as its own process: ``python -m cdc_console.bench.workers``.

    python -m cdc_console.bench.workers pymysql-scan  '{"host": …, "port": …, …}'
    python -m cdc_console.bench.workers spark-jdbc    '{…, "jar": "/usr/share/java/…"}'
    python -m cdc_console.bench.workers binlog-decode '{…, "start": {…}, "end": {…}}'

Each prints one ``BENCH-RESULT {json}`` line with ``rows`` and ``seconds`` (the timed part only:
no interpreter, JVM or Spark start-up) and, where it has one, ``startup`` seconds. They are the
simplest code a competent user would write for the job, deliberately not tuned beyond that:
the point is to know what our pipeline costs relative to doing the obvious thing.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import TypedDict

from cdc_console.bench.processes import RESULT_PREFIX, WorkerResult
from cdc_console.config import SnapshotConfig


class _Position(TypedDict):
    """A binlog position as ``BinlogOffset.to_dict`` writes it (the keys read here)."""

    file: str
    pos: int


class WorkerParams(TypedDict, total=False):
    """The JSON a worker is started with: ``BenchEnv.source_params`` and the worker's own keys."""

    host: str
    port: int
    user: str
    password_env: str
    database: str
    table: str
    chunk_size: int
    jar: str
    master: str
    min_id: int
    max_id: int
    out_dir: str
    server_id: int
    start: _Position
    end: _Position


def _password(params: WorkerParams) -> str:
    return os.environ[params["password_env"]]


def pymysql_scan(params: WorkerParams) -> WorkerResult:
    """Primary-key range chunks of ``chunk_size`` over the whole table, default converters.

    Default converters (Decimal, datetime objects) because that is what our snapshot reader
    gets too; ``SELECT *`` over the same half-open ranges our splitter makes for an integer key.
    """
    import pymysql

    conn = pymysql.connect(
        host=params["host"],
        port=params["port"],
        user=params["user"],
        password=_password(params),
        database=params["database"],
        charset="utf8mb4",
        autocommit=True,
    )
    table = params["table"]
    chunk = int(params.get("chunk_size", SnapshotConfig.chunk_size))
    rows = 0
    with conn.cursor() as cur:
        cur.execute(f"SELECT MIN(id), MAX(id) FROM {table}")
        low, high = cur.fetchone()
        clock = time.monotonic()
        for start in range(int(low), int(high) + 1, chunk):
            cur.execute(f"SELECT * FROM {table} WHERE id >= %s AND id < %s", (start, start + chunk))
            rows += len(cur.fetchall())
        seconds = time.monotonic() - clock
    conn.close()
    return {"rows": rows, "seconds": seconds}


def spark_jdbc(params: WorkerParams) -> WorkerResult:
    """Spark's built-in JDBC reader, 2 partitions on ``id``, written to Parquet in a temp dir.

    Written, not counted: ``count()`` lets Spark prune every column and measures almost nothing
    of the decode work, while our pipeline writes typed rows to Delta; Parquet is the closest
    one-copy equivalent a Spark user would produce.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    clock = time.monotonic()
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(params.get("master", "local[2]"))
        .appName("cdc-console bench: spark jdbc")
        .config("spark.jars", params["jar"])
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    startup = time.monotonic() - clock
    url = f"jdbc:mysql://{params['host']}:{params['port']}/{params['database']}?permitMysqlScheme"
    out = tempfile.mkdtemp(prefix="jdbc-parquet-", dir=params.get("out_dir"))
    clock = time.monotonic()
    frame = (
        spark.read.format("jdbc")
        .option("url", url)
        .option("driver", "org.mariadb.jdbc.Driver")
        .option("dbtable", params["table"])
        .option("user", params["user"])
        .option("password", _password(params))
        .option("partitionColumn", "id")
        .option("lowerBound", str(params["min_id"]))
        .option("upperBound", str(int(params["max_id"]) + 1))
        .option("numPartitions", "2")
        .load()
    )
    frame.write.mode("overwrite").parquet(out)
    seconds = time.monotonic() - clock
    rows = spark.read.parquet(out).count()
    spark.stop()
    return {"rows": rows, "seconds": seconds, "startup": startup, "output": out}


def binlog_decode(params: WorkerParams) -> WorkerResult:
    """Raw ``BinLogStreamReader`` over ``[start, end)``: every row event's rows decoded, counted.

    The same settings our reader uses (``is_mariadb=False`` so ``log_file``/``log_pos`` are
    honoured on MariaDB, ``blocking=False``, our own ``(file, pos)`` end bound because the
    library's ``end_log_pos`` ignores the file), but nothing after decoding: no normalisation,
    no filter, no records. Accessing ``event.rows`` is what makes the library decode the values.
    """
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import RotateEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    from cdc_console.core.offset import binlog_file_index

    start, end = params["start"], params["end"]
    end_key = (binlog_file_index(end["file"]), int(end["pos"]))
    clock = time.monotonic()
    stream = BinLogStreamReader(
        connection_settings={
            "host": params["host"],
            "port": params["port"],
            "user": params["user"],
            "password": _password(params),
            "charset": "utf8mb4",
        },
        server_id=int(params["server_id"]),
        log_file=start["file"],
        log_pos=int(start["pos"]),
        resume_stream=True,
        blocking=False,
        is_mariadb=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, RotateEvent],
        only_schemas=[params["database"]],
        enable_logging=False,
    )
    current = start["file"]
    rows = events = 0
    try:
        for event in stream:
            if isinstance(event, RotateEvent):
                current = event.next_binlog
                if (binlog_file_index(current), event.position) >= end_key:
                    break
                continue
            event_start = event.packet.log_pos - event.packet.event_size
            if (binlog_file_index(current), event_start) >= end_key:
                break
            rows += len(event.rows)
            events += 1
    finally:
        stream.close()
    seconds = time.monotonic() - clock
    return {"rows": rows, "seconds": seconds, "events": events}


WORKERS = {
    "pymysql-scan": pymysql_scan,
    "spark-jdbc": spark_jdbc,
    "binlog-decode": binlog_decode,
}


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in WORKERS:
        print(f"usage: python -m cdc_console.bench.workers {{{'|'.join(WORKERS)}}} JSON")
        return 2
    result = WORKERS[argv[0]](json.loads(argv[1]))
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
