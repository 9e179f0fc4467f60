"""The JSON text form of canonical rows and keys carried in change records.

Canonical values are JSON-native (int, float, str, None), so one compact, deterministic encoding
serves keys (compared as text by the sinks) and row images.
"""

from __future__ import annotations

import json


def dump_json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
