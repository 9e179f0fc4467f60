"""The one config writer: what it writes, ``load_config`` reads back as the same pipeline."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from cdc_console.config import config_from_dict, load_config
from cdc_console.config_writer import config_text, write_config

DOC = {
    "name": "demo",
    "source": {
        "host": "127.0.0.1",
        "port": 3307,
        "user": "cdc",
        "password_env": "CDC_DEMO_PASSWORD",
        "tables": ["shop.*", 'odd "quoted".t'],
        "server_id": "5400-5410",
    },
    "snapshot": {"chunk_size": 8096, "parallelism": 2, "startup_mode": None},
    "sink": {"kind": "delta", "path": "lake", "changelog": True},
    "lake": {"vacuum_retention_hours": 0.5, "target_file_size": "256KiB"},
    "spark": {
        "master": "local[2]",
        "trigger_seconds": 1.0,
        "conf": {"spark.sql.shuffle.partitions": "4"},
    },
}


def test_a_written_config_loads_as_the_same_pipeline(tmp_path: Path) -> None:
    path = write_config(tmp_path / "pipeline.toml", DOC, header="Written by a test.\nLine two.")
    text = path.read_text()
    assert text.startswith('# Written by a test.\n# Line two.\nname = "demo"\n\n[source]\n')
    assert "startup_mode" not in text  # None is left out: the default applies
    assert '[spark.conf]\n"spark.sql.shuffle.partitions" = "4"\n' in text
    written = load_config(path)
    expected = config_from_dict(
        {**DOC, "snapshot": {"chunk_size": 8096, "parallelism": 2}}, base=tmp_path, path=path
    )
    assert written == expected
    assert written.source.tables == expected.source.tables
    assert tomllib.loads(text)["source"]["tables"][1] == 'odd "quoted".t'


def test_values_a_config_cannot_hold_are_refused() -> None:
    with pytest.raises(TypeError, match=r"source.port: cannot write object"):
        config_text({"source": {"port": object()}})
    with pytest.raises(ValueError, match="has no TOML form"):
        config_text({"lake": {"vacuum_retention_hours": float("inf")}})
