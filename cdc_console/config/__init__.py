"""The pipeline's TOML config: the user-facing contract.

Relative paths resolve against the config file's folder so a config works from any working
directory. Every error names the offending key and the fix. The source password is never part of
the config: ``password_env`` names the environment variable that holds it, and the value is read
only when a connection is opened.

Its parts: ``model`` (the dataclasses), ``reading`` (values read as ``core.options`` declares
them, every problem noted), ``rules`` (values of a shape of their own) and ``document`` (a whole
file read into a ``PipelineConfig``).
"""

from cdc_console.config.document import config_from_dict, load_config
from cdc_console.config.model import (
    BATCH_TARGET_ROWS,
    CHANGELOG_DIR,
    MAX_AUTO_CHUNKS_PER_BATCH,
    ConsoleConfig,
    LakeConfig,
    MetricsConfig,
    MirrorPlaces,
    PipelineConfig,
    SinkConfig,
    SnapshotConfig,
    SourceConfig,
    SparkConfig,
    TablePattern,
    VerifyConfig,
)
from cdc_console.config.reading import parse_duration, parse_size
from cdc_console.config.rules import parse_table_pattern

__all__ = [
    "BATCH_TARGET_ROWS",
    "CHANGELOG_DIR",
    "MAX_AUTO_CHUNKS_PER_BATCH",
    "ConsoleConfig",
    "LakeConfig",
    "MetricsConfig",
    "MirrorPlaces",
    "PipelineConfig",
    "SinkConfig",
    "SnapshotConfig",
    "SourceConfig",
    "SparkConfig",
    "TablePattern",
    "VerifyConfig",
    "config_from_dict",
    "load_config",
    "parse_duration",
    "parse_size",
    "parse_table_pattern",
]
