"""The pipeline's status as one structure, for ``cdc-console status`` and the console.

It reads the state database and probes the server's head itself, so the numbers are right even
when the job is stuck or dead: lag is measured against the server, not reported by the job.
``collect`` builds the structure, ``notes`` says each part of it in one line, ``text`` lays it
out for a terminal.
"""

from __future__ import annotations

from cdc_console.status.collect import (
    HeadProbe,
    PipelineStatus,
    TableStatus,
    collect_status,
    held_changes_by_table,
    iso_time,
    iso_times,
    probe_head,
)
from cdc_console.status.notes import (
    finish_note,
    held_note,
    mirror_shape,
    outage_note,
    outlasts,
    purge_note,
    purge_report,
    shape_note,
    skip_reason,
    split_verification,
    table_note,
    verification_note,
)
from cdc_console.status.text import (
    format_status,
)

__all__ = [
    "HeadProbe",
    "PipelineStatus",
    "TableStatus",
    "collect_status",
    "finish_note",
    "format_status",
    "held_changes_by_table",
    "held_note",
    "iso_time",
    "iso_times",
    "mirror_shape",
    "outage_note",
    "outlasts",
    "probe_head",
    "purge_note",
    "purge_report",
    "shape_note",
    "skip_reason",
    "split_verification",
    "table_note",
    "verification_note",
]
