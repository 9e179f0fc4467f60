"""``cdc-console bench``: our pipeline measured against the tools a user would compare it with.

Each benchmark starts its own private server (``MySQLSandbox``), seeds it, and runs every
contender as a *separate child process* — raw pymysql, Spark's built-in JDBC reader, raw
``BinLogStreamReader`` and the pipeline itself (``python -m cdc_console run``) — so that each one's
peak memory is the peak RSS of its own process tree (the pipeline's tree includes the JVM and the
Python workers), and no contender benefits from another's warm interpreter or JVM.

Benchmarks print figures; they never assert on them. The smoke test only checks that they run.
"""
