"""The operations console: a Textual app over one or more pipelines' state databases.

It never talks to a job directly. It reads SQLite, queues commands in the same queue as the CLI,
watches the job's process tree and probes the MySQL server itself, all from worker threads, so the
screen stays live when the job, the server or the disk is slow. ``data`` holds everything that
runs in those threads and knows nothing of Textual; ``screens`` and ``widgets`` only display.
"""
