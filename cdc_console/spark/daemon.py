"""Spark's Python worker daemon, with the pipeline's task modules imported before it forks.

Spark forks every Python worker from one daemon process (``pyspark.daemon``). Each forked
worker then imports what its task needs; for a chunk reader that is pyarrow, pymysql,
pymysqlreplication and our readers, about a second of CPU per worker, paid again by every new
worker of every batch. Importing them once here, before the fork, lets every worker inherit
them. Set as ``spark.python.daemon.module`` by ``spark.session``.

It also leaves SIGTERM to the driver (``spark.signals``): a stop signalled to every process of
the job must not kill a worker mid-task.
"""

from __future__ import annotations

from pyspark import daemon

import cdc_console.spark.tasks  # noqa: F401  (the imports are the point)
from cdc_console.spark.signals import daemon_ignores_sigterm

if __name__ == "__main__":
    daemon_ignores_sigterm(daemon)
    daemon.manager()
