"""MariaDB's fixed-binary types (UUID, INET4, INET6) as the text the server prints.

The snapshot reads the server's text. The binlog carries the value's bytes in the type's
in-memory order (for UUID, the order of its text, whatever order the table stores it in), with
trailing zero bytes stripped as for any BINARY(n). Each is formatted here the way the server's
``to_string`` does, so both paths give one canonical text:

* UUID: 32 lower-case hex digits as 8-4-4-4-12.
* INET4: four decimal octets.
* INET6: lower-case hex words without leading zeros; the longest run of zero words (the first
  of equal runs, a single word included) written ``::``; an IPv4-compatible (``::a.b.c.d``) or
  IPv4-mapped (``::ffff:a.b.c.d``) address with its last four bytes as an INET4. This differs
  from RFC 5952 (Python's ``ipaddress``), which never shortens a single zero word.
"""

from __future__ import annotations

from collections.abc import Callable

from cdc_console.core.mysqltypes import FIXED_BINARY, TypeFamily
from cdc_console.core.untyped import DriverValue
from cdc_console.core.values import CanonicalValue


def _raw(value: DriverValue, length: int) -> bytes:
    """A binlog value's bytes, the stripped trailing zeros put back."""
    if isinstance(value, str):
        data = value.encode("ascii")  # mysql-replication hands an all-zero value back as ''
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        raise TypeError(f"a {type(value).__name__} where the binlog holds bytes")
    if len(data) > length:
        raise ValueError(f"{len(data)} bytes for a {length}-byte value")
    return data + bytes(length - len(data))


def uuid_text(data: bytes) -> str:
    text = data.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def inet4_text(data: bytes) -> str:
    return ".".join(str(octet) for octet in data)


def inet6_text(data: bytes) -> str:
    words = [int.from_bytes(data[i : i + 2], "big") for i in range(0, 16, 2)]
    gap_at, gap_len = -1, 0
    run_at, run_len = -1, 0
    for index, word in enumerate(words):
        if word == 0:
            run_at, run_len = (run_at, run_len + 1) if run_len else (index, 1)
            if run_len > gap_len:
                gap_at, gap_len = run_at, run_len
        else:
            run_at, run_len = -1, 0
    embedded_v4 = gap_at == 0 and (gap_len == 6 or (gap_len == 5 and words[5] == 0xFFFF))
    parts: list[str] = []
    index = 0
    while index < 8:
        if index == gap_at:
            parts.append("::" if index == 0 else ":")
            index += gap_len
            continue
        if index == 6 and embedded_v4:
            parts.append(inet4_text(data[12:]))
            break
        parts.append(f"{words[index]:x}" + (":" if index < 7 else ""))
        index += 1
    return "".join(parts)


_FORMATS: dict[TypeFamily, Callable[[bytes], str]] = {
    TypeFamily.UUID: uuid_text,
    TypeFamily.INET4: inet4_text,
    TypeFamily.INET6: inet6_text,
}


def binlog_converter(family: TypeFamily) -> Callable[[DriverValue], CanonicalValue]:
    """A binlog value of ``family`` -> the server's text for it."""
    length, text = FIXED_BINARY[family], _FORMATS[family]

    def conv(value: DriverValue) -> CanonicalValue:
        return text(_raw(value, length))

    return conv


def snapshot_text(value: DriverValue) -> CanonicalValue:
    """The server's text as the snapshot reads it (a driver may hand it over as bytes)."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("ascii")
    return value if isinstance(value, str) else str(value)
