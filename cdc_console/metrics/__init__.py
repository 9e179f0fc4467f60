"""The job's Prometheus endpoint: metrics, ``/healthz`` and ``/readyz`` on ``[metrics] listen``.

People on call are paged by alerts, not by a terminal they happen to have open. The figures come
from the state database through the same definitions ``status`` and the console use
(``cdc_console.status`` / ``cdc_console.figures``), read at scrape time, so the three never
disagree; what only the running job sees (each batch's duration and size, the mirror rows it
inserted, updated and deleted) is counted in process. Series are bounded by the number of
tables: labels are ``pipeline``, ``table``, ``op``, ``state`` and ``verdict`` only.
"""
