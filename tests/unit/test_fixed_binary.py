"""MariaDB's UUID/INET text from binlog bytes, against an independent reading (RFC 5952 through
Python's ipaddress) where the two agree, and the server's own rules where they differ."""

from __future__ import annotations

import ipaddress
import random

import pytest

from cdc_console.core.keys import inet_sort_key, uuid_sort_key
from cdc_console.core.mysqltypes import TypeFamily
from cdc_console.values.fixed_binary import binlog_converter, inet4_text, inet6_text, uuid_text


def _has_single_zero_gap_only(words: list[int]) -> bool:
    longest, run = 0, 0
    for word in words:
        run = run + 1 if word == 0 else 0
        longest = max(longest, run)
    return longest == 1


def test_inet6_agrees_with_rfc_5952_wherever_the_server_does() -> None:
    rng = random.Random(5)
    checked = 0
    for _ in range(3000):
        words = [rng.choice([0, 0, 1, 0xFFFF, rng.randrange(65536)]) for _ in range(8)]
        data = b"".join(w.to_bytes(2, "big") for w in words)
        embedded = words[:5] == [0] * 5 and words[5] in (0, 0xFFFF)
        if embedded or _has_single_zero_gap_only(words):
            continue  # where the server's rules and RFC 5952 part (below)
        assert inet6_text(data) == str(ipaddress.IPv6Address(data)), words
        checked += 1
    assert checked > 1000


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("1:2:3:4:5:6:7:0", "1:2:3:4:5:6:7::"),  # a single zero word is shortened too
        ("1:0:2:3:4:5:6:7", "1::2:3:4:5:6:7"),
        ("::ffff:c0a8:1", "::ffff:192.168.0.1"),
        ("::102:304", "::1.2.3.4"),
        ("::fffe:c0a8:1", "::fffe:c0a8:1"),
        ("::", "::"),
        ("::1", "::1"),
        ("1:0:2:0:0:3:0:0", "1:0:2::3:0:0"),
    ],
)
def test_inet6_follows_the_server_where_rfc_5952_does_not(text: str, shown: str) -> None:
    assert inet6_text(ipaddress.IPv6Address(text).packed) == shown
    assert ipaddress.ip_address(shown).packed == ipaddress.IPv6Address(text).packed


def test_binlog_values_get_their_stripped_zeros_back() -> None:
    inet4 = binlog_converter(TypeFamily.INET4)
    assert inet4(b"\xc0\xa8") == "192.168.0.0" and inet4("") == "0.0.0.0"
    uuid = binlog_converter(TypeFamily.UUID)
    assert uuid(bytes.fromhex("123e4567e89b12d3a45642661417")) == (
        "123e4567-e89b-12d3-a456-426614170000"
    )
    with pytest.raises(ValueError, match="17 bytes"):
        uuid(bytes(17))
    assert inet4_text(bytes([10, 0, 0, 1])) == "10.0.0.1"
    assert uuid_text(bytes(16)) == "00000000-0000-0000-0000-000000000000"


def test_uuid_keys_sort_as_the_server_stores_them() -> None:
    v1_early = "ffffffff-0001-11ee-8000-0242ac120002"
    v1_late = "00000000-0002-11ee-8000-0242ac120002"
    v7 = "01890000-0000-7000-8000-000000000000"
    # a time-based UUID is stored node first: the later tick sorts later whatever its low bits
    assert uuid_sort_key(v1_early) < uuid_sort_key(v1_late)
    # a version 7 one is stored as written
    assert uuid_sort_key(v7) == bytes.fromhex(v7.replace("-", ""))
    assert inet_sort_key("9.0.0.1") < inet_sort_key("10.0.0.2")
