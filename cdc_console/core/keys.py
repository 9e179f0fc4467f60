"""Ordering chunk-key values the way the server orders them.

Chunk boundaries always come from the server (``ORDER BY`` / ``MAX``), so they follow its
collation. But the backfill and ``should_emit`` must place a key decoded from the binlog into a
chunk in Python, and Python's ``str`` ordering is not ``utf8mb4_general_ci``'s: 'a' < 'B' there,
'B' < 'a' here. ``KeyOrder`` gives each chunk-key column a sort-key function that emulates the
column's collation for the families that matter (binary, ``*_bin``, case- and accent-insensitive
``*_ci``/``*_ai_ci``), with trailing-space padding where the collation pads.
"""

from __future__ import annotations

import ipaddress
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeAlias, cast

from cdc_console.core.mysqltypes import TEXT_COLLATED, TypeFamily
from cdc_console.core.schema import ColumnInfo
from cdc_console.core.values import RawKey


class SortKey(Protocol):
    """What a sort-key function returns: the key value itself, or a tuple of collation weights.
    Keys of one column are all of one type, so any two of them compare."""

    def __lt__(self, other: SortKey, /) -> bool: ...
    def __gt__(self, other: SortKey, /) -> bool: ...


#: A chunk-key value -> its sort key. The collated-text variants are given ``str`` keys only
#: (``for_column`` picks them for text columns).
SortKeyFn: TypeAlias = Callable[[RawKey], SortKey]


def _strip_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def general_ci_key(text: str) -> tuple[int, ...]:
    """``*_general_ci``: one weight per character, upper-cased and accent-folded, PAD SPACE.

    Characters outside the BMP all share the weight U+FFFD in ``utf8mb4_general_ci``.
    """
    weights = []
    for ch in text.rstrip(" "):
        if ord(ch) > 0xFFFF:
            weights.append(0xFFFD)
            continue
        folded = _strip_accents(ch).upper() or ch
        weights.append(ord(folded[0]))
    return tuple(weights)


def unicode_ci_key(text: str) -> tuple[int, ...]:
    """``*_unicode_ci`` / ``*_0900_ai_ci`` / ``*_uca1400_ai_ci``: case- and accent-insensitive.

    An approximation of UCA primary weights good enough for the letters and digits keys are made
    of; NO PAD for the 0900/1400 families is handled by the caller.
    """
    return tuple(ord(ch) for ch in _strip_accents(text).casefold())


#: character sets whose ``*_bin`` order is the order of Unicode code points (UTF-8's byte
#: order is; MySQL's ``latin1`` is cp1252, whose 0x80-0x9f hold code points far above 0xff)
CODE_POINT_ORDERED_CHARSETS = frozenset({"utf8mb4", "utf8mb3", "utf8", "ascii"})


def uuid_sort_key(text: str) -> bytes:
    """A UUID's place in MariaDB's order: its bytes as the table stores them, where a version
    1 to 5 UUID of the RFC variant (byte 6 in 0x01..0x5f, byte 8 >= 0x80) is stored with its
    groups reversed (node, clock sequence, time high, time mid, time low) so that time-based
    UUIDs sort by time, and any other UUID as written."""
    data = bytes.fromhex(text.replace("-", ""))
    if 0 < data[6] < 0x60 and data[8] & 0x80:
        return data[10:16] + data[8:10] + data[6:8] + data[4:6] + data[0:4]
    return data


def inet_sort_key(text: str) -> bytes:
    """An INET4 or INET6 value's place in the server's order: its address bytes."""
    return ipaddress.ip_address(text).packed


@dataclass(frozen=True)
class KeyOrder:
    """Sort keys for one chunk-key column, consistent with the server's ``ORDER BY``."""

    sort_key: SortKeyFn
    description: str
    #: False where the Python sort key only approximates the server's collation (UCA, the
    #: 8-bit national collations, ``*_ci`` variants): ``mysql.key_weights`` then asks the
    #: server for the collation's weights instead
    exact: bool = True
    #: fetches the sort keys of many values at once, where each costs a server round trip
    prefetch: Callable[[Iterable[RawKey]], None] | None = None

    def warm(self, values: Iterable[RawKey]) -> None:
        """Have the sort keys of ``values`` at hand (one round trip, not one per value)."""
        if self.prefetch is not None:
            self.prefetch([v for v in values if v is not None])

    @classmethod
    def for_column(cls, column: ColumnInfo) -> KeyOrder:
        if column.family is TypeFamily.UUID:
            return cls(cast(SortKeyFn, uuid_sort_key), "uuid (as the server stores it)")
        if column.family in (TypeFamily.INET4, TypeFamily.INET6):
            return cls(cast(SortKeyFn, inet_sort_key), "address bytes")
        if column.family not in TEXT_COLLATED:
            return cls(_natural, "natural")
        collation = (column.collation or "").lower()
        pad = not ("0900" in collation or "uca1400" in collation or collation.endswith("nopad_bin"))
        charset = (column.character_set or "").lower()
        if collation == "binary" or (
            collation.endswith("_bin") and charset in CODE_POINT_ORDERED_CHARSETS
        ):
            return cls(_padded(_codepoints, pad), f"{collation} (code points)")
        if collation.endswith("_bin") or collation.endswith("_cs"):
            return cls(_padded(_codepoints, pad), f"{collation} (code points)", exact=False)
        if "general" in collation:
            return cls(cast(SortKeyFn, general_ci_key), f"{collation} (general)", exact=False)
        return cls(
            _padded(cast(SortKeyFn, unicode_ci_key), pad), f"{collation} (unicode)", exact=False
        )

    def compare(self, left: RawKey, right: RawKey) -> int:
        a, b = self.sort_key(left), self.sort_key(right)
        return int(a > b) - int(a < b)


def _natural(value: RawKey) -> SortKey:
    return cast(SortKey, value)


def _codepoints(text: RawKey) -> SortKey:
    return cast(SortKey, text)


def _padded(inner: SortKeyFn, pad: bool) -> SortKeyFn:
    if not pad:
        return inner

    def key(text: RawKey) -> SortKey:
        return inner(text.rstrip(" ") if isinstance(text, str) else text)

    return key


NATURAL_ORDER = KeyOrder(_natural, "natural")
