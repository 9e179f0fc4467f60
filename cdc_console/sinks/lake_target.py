"""Where a snapshot reader writes its chunks' Delta data files.

A module of its own, apart from ``delta_files`` (which writes them), because the planner puts a
``LakeTarget`` into every snapshot task it plans, and the planner runs inside Spark's streaming
runner: importing the writer there would load pyarrow's compute and Parquet modules for nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cdc_console.config import LakeConfig
from cdc_console.core.schema import TableId


@dataclass(frozen=True)
class LakeTarget:
    """Where and how a reader writes its chunks' files: the sink's root and settings."""

    root: Path
    changelog: bool
    lake: LakeConfig
    #: mirrors placed by name (``[sink] mirrors``)
    names: Mapping[TableId, str] = field(default_factory=dict)
