"""The figures on-call engineers are paged on, defined once.

``status``, ``status --json``, the job's Prometheus metrics and the console all show lag; if each
computed it its own way, the three would disagree at 3 a.m. Each figure is defined here, over
what the state database holds (the job's lag samples: the committed position and the server's
head, once a heartbeat) and what a probe of the server returns:

- a position's **lag**: how long ago the server wrote it, i.e. how long ago the head passed it
  (zero at the head; "at least" when it predates every observation);
- a table's lag: the lag of the position it has applied up to (its stream position, or its pause
  position while paused); a table still reading its chunks has none yet;
- the pipeline's **event-time lag**: the latest sample's (zero when caught up);
- the **purge headroom**: how long before the server may expire the oldest binlog file the
  pipeline still needs (``purge_headroom``);
- the **finish time** of the chunk reads under way (``read_estimates``): per table and in total,
  with its range (``core.estimate``), to set against the purge headroom;
- **where the lag is** (``lag_stages``): how the last minute was spent, stage by stage.
"""

from __future__ import annotations

from cdc_console.figures.finish import (
    PACED_BATCHES,
    READING,
    ReadEstimates,
    ReadPacing,
    ReadVerdict,
    VerifyEstimate,
    added_table_forecast,
    chunk_timings,
    read_estimates,
    redump_forecast,
    verify_estimate,
)
from cdc_console.figures.positions import (
    PositionLag,
    PurgeHeadroom,
    PurgeState,
    binlog_needs,
    event_lag,
    head_history,
    last_event_ms,
    pipeline_needs,
    position_lag,
    purge_headroom,
    table_position,
)
from cdc_console.figures.stages import (
    STAGES_WINDOW_SECONDS,
    LagStage,
    LagStages,
    change_stages,
    lag_stages,
)

__all__ = [
    "PACED_BATCHES",
    "READING",
    "STAGES_WINDOW_SECONDS",
    "LagStage",
    "LagStages",
    "PositionLag",
    "PurgeHeadroom",
    "PurgeState",
    "ReadEstimates",
    "ReadPacing",
    "ReadVerdict",
    "VerifyEstimate",
    "added_table_forecast",
    "binlog_needs",
    "change_stages",
    "chunk_timings",
    "event_lag",
    "head_history",
    "lag_stages",
    "last_event_ms",
    "pipeline_needs",
    "position_lag",
    "purge_headroom",
    "read_estimates",
    "redump_forecast",
    "table_position",
    "verify_estimate",
]
