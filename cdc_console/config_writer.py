"""Writing a pipeline config: the one TOML writer that the demo, the benchmarks and the tests use.

Configs are built as the same nested dict that ``config.config_from_dict`` reads, then written
here, so a config the product writes is always one ``load_config`` accepts (the unit tests read
every written config back). Only the value shapes a pipeline config has are supported: strings,
booleans, numbers, lists of those, and ``[section]`` tables (with sub-tables such as
``[spark.conf]``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path


def _value(value: object, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: {value} has no TOML form")
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v, where) for v in value) + "]"
    raise TypeError(f"{where}: cannot write {type(value).__name__} to a pipeline config")


def config_text(doc: Mapping[str, object], header: str = "") -> str:
    """``doc`` as TOML: top-level keys first, then one ``[section]`` per nested mapping."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    sections = {k: v for k, v in doc.items() if isinstance(v, Mapping)}
    for key, value in doc.items():
        if key not in sections and value is not None:
            lines.append(f"{key} = {_value(value, key)}")
    for name, section in sections.items():
        lines.extend(_table(name, section, bool(lines)))
    return "\n".join(lines) + "\n"


def _table(name: str, table: Mapping[str, object], gap: bool) -> list[str]:
    """``[name]`` with its keys, then its sub-tables (``[spark.conf]``) as ``[name.key]``."""
    lines = ["", f"[{name}]"] if gap else [f"[{name}]"]
    subtables = {k: v for k, v in table.items() if isinstance(v, Mapping)}
    for key, value in table.items():
        if key not in subtables and value is not None:
            lines.append(f"{_key(key)} = {_value(value, f'{name}.{key}')}")
    for key, value in subtables.items():
        lines.extend(_table(f"{name}.{_key(key)}", value, True))
    return lines


def _key(key: str) -> str:
    """A bare key when TOML allows one, else quoted (``"spark.sql.shuffle.partitions"``)."""
    bare = key.replace("_", "").replace("-", "").isalnum() and key.isascii()
    return key if bare else json.dumps(key)


def write_config(path: Path, doc: Mapping[str, object], header: str = "") -> Path:
    """Write ``doc`` to ``path`` (see ``config_text``); ``None`` values are left out."""
    path.write_text(config_text(doc, header))
    return path
