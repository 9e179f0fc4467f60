"""The on-call thresholds, said once.

The console colours a figure yellow above ``warn`` and red above ``alert`` (below, for a
headroom); the Prometheus rules in ``jobs/monitoring/alerts.yaml`` fire at ``alert``; the
dashboard paints both. Each is stated here, ``[console]``'s defaults are taken from here, and a
test reads the rules and the dashboard back against this table, so the three cannot drift apart
again (they had: a stall was red in the console after 60 s and paged after 300 s).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Threshold:
    #: what is judged, in the unit of ``metric``
    figure: str
    #: the exported series the alert rule and the dashboard compare
    metric: str
    warn: float
    alert: float
    #: the alert rule that fires at ``alert``
    rule: str
    #: lower is worse (a headroom), where higher is worse for the others
    falling: bool = False


LAG = Threshold(
    "a table's event-time lag, seconds", "cdc_table_lag_seconds", 10.0, 60.0, "CdcLagHigh"
)
#: no commit while the binlog holds changes for us: a stalled job
STALE = Threshold(
    "seconds since the last commit while changes wait",
    "cdc_last_commit_timestamp_seconds",
    15.0,
    60.0,
    "CdcStalled",
)
PURGE = Threshold(
    "seconds before the server may purge a binlog the pipeline needs",
    "cdc_binlog_purge_headroom_seconds",
    24 * 3600.0,
    2 * 3600.0,
    "CdcPurgeHeadroomLow",
    falling=True,
)

THRESHOLDS: tuple[Threshold, ...] = (LAG, STALE, PURGE)
