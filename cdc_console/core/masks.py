"""Column masks (``[pipeline] mask_columns``): what a masked column's values become in the
mirror, the change feed and ``verify``.

- ``sha256``: HMAC-SHA256 of the value's UTF-8 text under a key the operator keeps in an
  environment variable, as 64 hex digits. Equal values hash alike wherever the key is the same,
  so masked columns still join (across tables, and with other systems that share the key); the
  key never reaches the state, the logs or the lake. A plain, unkeyed hash would let anyone
  hash a list of likely values (every e-mail address of a leaked list) and match them.
- ``redact``: the same fixed text for every value, which only says that there was one.

NULL stays NULL: a mask hides what a value is, not whether there is one. Only character
columns are masked: their canonical value is their text on every path, so the snapshot and the
binlog mask the same text the same way.

The mask a column was mirrored with is part of its schema (``ColumnInfo.mask``), with a short
check of the key (``key_check``: a keyed hash of a fixed text, which tells keys apart and
reveals nothing of them), so a changed key or mask is seen as a changed rule and the table is
read again.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from cdc_console.core.untyped import Loaded
from cdc_console.core.values import JSONObject

#: what a redacted value becomes
REDACTED = "********"
_KEY_CHECK_TEXT = b"cdc-console mask key check"


class MaskKind(StrEnum):
    SHA256 = "sha256"
    REDACT = "redact"


class MaskKeyMissing(LookupError):
    """The environment variable that holds a ``sha256`` mask's key is unset or empty."""


class MaskKeyMismatch(ValueError):
    """The key here is not the one the column was masked with (another machine's, say)."""


@dataclass(frozen=True)
class ColumnMask:
    kind: MaskKind
    #: the environment variable holding the key (``sha256`` only)
    key_env: str = ""
    #: a keyed hash of a fixed text: which key the column was masked with (``sha256`` only)
    key_check: str = ""

    def describe(self) -> str:
        return f"{self.kind} (key ${self.key_env})" if self.kind is MaskKind.SHA256 else "redact"

    def to_dict(self) -> JSONObject:
        if self.kind is MaskKind.REDACT:
            return {"kind": str(self.kind)}
        return {"kind": str(self.kind), "key_env": self.key_env, "key_check": self.key_check}

    @classmethod
    def from_dict(cls, data: Mapping[str, Loaded]) -> ColumnMask:
        return cls(
            MaskKind(str(data["kind"])),
            str(data.get("key_env", "")),
            str(data.get("key_check", "")),
        )


def mask_key(key_env: str) -> bytes:
    """The key in ``key_env``; ``MaskKeyMissing`` when it is unset or empty."""
    key = os.environ.get(key_env, "")
    if not key:
        raise MaskKeyMissing(key_env)
    return key.encode()


def column_mask(kind: MaskKind, key_env: str) -> ColumnMask:
    """The mask of a column as configured now (reads the key to check it)."""
    if kind is MaskKind.REDACT:
        return ColumnMask(kind)
    return ColumnMask(kind, key_env, _key_check(mask_key(key_env)))


def _key_check(key: bytes) -> str:
    return hmac.new(key, _KEY_CHECK_TEXT, hashlib.sha256).hexdigest()[:16]


def masker(mask: ColumnMask) -> Callable[[object], str]:
    """The function that masks one non-NULL canonical value of a column."""
    if mask.kind is MaskKind.REDACT:
        return lambda _value: REDACTED
    key = mask_key(mask.key_env)
    if mask.key_check and _key_check(key) != mask.key_check:
        raise MaskKeyMismatch(
            f"${mask.key_env} here is not the key the column was masked with: set the same key "
            "wherever the pipeline runs (on a cluster, spark.executorEnv too)"
        )

    def hashed(value: object) -> str:
        text = value if isinstance(value, str) else str(value)
        return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()

    return hashed
