"""Delta deletion vectors, written from the protocol (``PROTOCOL.md``, "Deletion Vectors" and the
appendix "Deletion Vector Format"): no Python library writes them.

A deletion vector (DV) marks rows of one data file as deleted by their position in the file, so
a change rewrites nothing: the old versions of changed rows are marked, the new versions are
appended. Pieces, each as the protocol defines it:

- **the bitmap**: a set of 64-bit row positions as a ``RoaringBitmapArray`` in the *portable*
  format (magic number 1681511377, little endian), i.e. the 64-bit extension of the Roaring
  format spec: ``numBuckets`` (u64), then per bucket in ascending key order its key (the high
  32 bits, u32; its top bit must be 0) and a 32-bit Roaring bitmap of the low 32 bits. The
  32-bit bitmaps are written with the cookie without run containers (12346), a descriptive
  header (key, cardinality - 1) per 16-bit container, the offset header, then each container:
  a sorted array of u16 up to 4,096 values, a 8 KiB bitset above. Reading also takes run
  containers (cookie 12347), and the older *native* layout (magic 1681511376, big-endian
  header, one 32-bit bitmap per bucket in order) that the protocol's own inline example uses;
- **Z85** (the ZeroMQ base-85), in which inline DVs and the UUIDs of DV files are written;
- **the DV file** (``deletion_vector_<uuid>.bin`` beside the data, ``storageType = 'u'``): a
  version byte ``1``, then per DV its size (u32, big endian), the bitmap, and the CRC-32 of the
  bitmap (u32, big endian); a descriptor's ``offset`` is where its size field starts;
- **the descriptor** (``DeletionVector``): ``storageType``, ``pathOrInlineDv``, ``offset``,
  ``sizeInBytes``, ``cardinality``; ``uniqueId`` tells two DVs of one file apart.
"""

from __future__ import annotations

import os
import struct
import uuid
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cdc_console.core.values import JSONObject

PORTABLE_MAGIC = 1681511377
NATIVE_MAGIC = 1681511376
_COOKIE_NO_RUNS = 12346
_COOKIE_RUNS = 12347
_NO_OFFSET_THRESHOLD = 4
_ARRAY_LIMIT = 4096
_FILE_VERSION = 1

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}


class DeletionVectorError(ValueError):
    """A deletion vector that does not decode, or whose file does not match its descriptor."""


# --- Z85 -------------------------------------------------------------------------------------


def z85_encode(data: bytes) -> str:
    """Z85 of ``data``, zero-padded to a multiple of 4 bytes (the reader trims by size)."""
    padded = data + bytes(-len(data) % 4)
    out = []
    for (word,) in struct.iter_unpack(">I", padded):
        chars = []
        for _ in range(5):
            word, digit = divmod(word, 85)
            chars.append(_Z85[digit])
        out.append("".join(reversed(chars)))
    return "".join(out)


def z85_decode(text: str, size: int | None = None) -> bytes:
    """The bytes of Z85 ``text``, the first ``size`` of them when given."""
    if len(text) % 5:
        raise DeletionVectorError(f"Z85 text of {len(text)} characters is not a multiple of 5")
    out = bytearray()
    for start in range(0, len(text), 5):
        word = 0
        for char in text[start : start + 5]:
            try:
                word = word * 85 + _Z85_VALUE[char]
            except KeyError:
                raise DeletionVectorError(f"{char!r} is not a Z85 character") from None
        if word > 0xFFFFFFFF:
            raise DeletionVectorError(f"Z85 group {text[start : start + 5]!r} overflows 32 bits")
        out += word.to_bytes(4, "big")
    return bytes(out if size is None else out[:size])


# --- the bitmap ------------------------------------------------------------------------------


def _roaring32(values: Sequence[int]) -> bytes:
    """A 32-bit Roaring bitmap of sorted distinct ``values`` (portable format, no runs)."""
    containers: list[tuple[int, list[int]]] = []
    for value in values:
        high, low = value >> 16, value & 0xFFFF
        if not containers or containers[-1][0] != high:
            containers.append((high, []))
        containers[-1][1].append(low)
    header = struct.pack("<II", _COOKIE_NO_RUNS, len(containers))
    descriptive = b"".join(struct.pack("<HH", key, len(lows) - 1) for key, lows in containers)
    bodies = []
    for _, lows in containers:
        if len(lows) <= _ARRAY_LIMIT:
            bodies.append(struct.pack(f"<{len(lows)}H", *lows))
        else:
            bits = bytearray(8192)
            for low in lows:
                bits[low >> 3] |= 1 << (low & 7)
            bodies.append(bytes(bits))
    offset = len(header) + len(descriptive) + 4 * len(containers)
    offsets = []
    for body in bodies:
        offsets.append(offset)
        offset += len(body)
    return header + descriptive + struct.pack(f"<{len(offsets)}I", *offsets) + b"".join(bodies)


def _read_roaring32(data: bytes, pos: int) -> tuple[list[int], int]:
    """The values of the 32-bit Roaring bitmap at ``data[pos:]``, and where it ends."""
    start = pos
    (cookie,) = struct.unpack_from("<I", data, pos)
    runs: bytes = b""
    if cookie & 0xFFFF == _COOKIE_RUNS:
        count = (cookie >> 16) + 1
        pos += 4
        runs = data[pos : pos + (count + 7) // 8]
        pos += len(runs)
    elif cookie == _COOKIE_NO_RUNS:
        (count,) = struct.unpack_from("<I", data, pos + 4)
        pos += 8
    else:
        raise DeletionVectorError(f"not a Roaring bitmap (cookie {cookie})")
    described = [struct.unpack_from("<HH", data, pos + 4 * i) for i in range(count)]
    pos += 4 * count
    if not runs or count >= _NO_OFFSET_THRESHOLD:
        pos += 4 * count  # the offset header: the containers follow in order anyway
    values: list[int] = []
    for index, (key, cardinality_less_one) in enumerate(described):
        cardinality = cardinality_less_one + 1
        base = key << 16
        if runs and runs[index // 8] >> (index % 8) & 1:
            (pairs,) = struct.unpack_from("<H", data, pos)
            pos += 2
            for run in range(pairs):
                first, length = struct.unpack_from("<HH", data, pos + 4 * run)
                values.extend(range(base + first, base + first + length + 1))
            pos += 4 * pairs
        elif cardinality <= _ARRAY_LIMIT:
            values.extend(base + low for low in struct.unpack_from(f"<{cardinality}H", data, pos))
            pos += 2 * cardinality
        else:
            bits = int.from_bytes(data[pos : pos + 8192], "little")
            values.extend(base + bit for bit in range(65536) if bits >> bit & 1)
            pos += 8192
    if pos > len(data):
        raise DeletionVectorError(f"Roaring bitmap at byte {start} runs past its data")
    return values, pos


def encode_bitmap(positions: Iterable[int]) -> bytes:
    """Row positions as a ``RoaringBitmapArray`` (portable format, with its magic number)."""
    ordered = sorted(set(positions))
    if ordered and (ordered[0] < 0 or ordered[-1] >= 1 << 63):
        raise DeletionVectorError("row positions must be in 0 .. 2**63 - 1")
    buckets: list[tuple[int, list[int]]] = []
    for position in ordered:
        key = position >> 32
        if not buckets or buckets[-1][0] != key:
            buckets.append((key, []))
        buckets[-1][1].append(position & 0xFFFFFFFF)
    parts = [struct.pack("<IQ", PORTABLE_MAGIC, len(buckets))]
    for key, lows in buckets:
        parts.append(struct.pack("<I", key))
        parts.append(_roaring32(lows))
    return b"".join(parts)


def decode_bitmap(data: bytes) -> list[int]:
    """The sorted row positions of a ``RoaringBitmapArray``, portable or native."""
    if len(data) < 4:
        raise DeletionVectorError("a deletion vector of fewer than 4 bytes")
    values: list[int] = []
    try:
        if struct.unpack_from("<I", data)[0] == PORTABLE_MAGIC:
            (count,) = struct.unpack_from("<Q", data, 4)
            pos = 12
            for _ in range(count):
                (key,) = struct.unpack_from("<I", data, pos)
                lows, pos = _read_roaring32(data, pos + 4)
                values.extend((key << 32) | low for low in lows)
            return values
        if struct.unpack_from(">I", data)[0] == NATIVE_MAGIC:
            (count,) = struct.unpack_from(">I", data, 4)
            pos = 8
            for key in range(count):
                (size,) = struct.unpack_from(">I", data, pos)
                lows, _ = _read_roaring32(data, pos + 4)
                values.extend((key << 32) | low for low in lows)
                pos += 4 + size
            return values
    except struct.error as exc:
        raise DeletionVectorError(f"a deletion vector cut short: {exc}") from exc
    raise DeletionVectorError(f"unknown deletion vector magic number {data[:4].hex()}")


# --- descriptors and files -------------------------------------------------------------------


@dataclass(frozen=True)
class DeletionVector:
    """The protocol's ``DeletionVectorDescriptor`` of one data file's deleted rows."""

    storage_type: str  # 'u' (file by UUID, relative to the table), 'i' (inline), 'p' (path)
    path_or_inline: str
    size_in_bytes: int
    cardinality: int
    offset: int | None = None

    @property
    def unique_id(self) -> str:
        """Tells two DVs of one data file apart (the protocol's derived ``uniqueId``)."""
        base = f"{self.storage_type}{self.path_or_inline}"
        return base if self.offset is None else f"{base}@{self.offset}"

    def to_json(self) -> JSONObject:
        data: JSONObject = {
            "storageType": self.storage_type,
            "pathOrInlineDv": self.path_or_inline,
            "sizeInBytes": self.size_in_bytes,
            "cardinality": self.cardinality,
        }
        if self.offset is not None:
            data["offset"] = self.offset
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> DeletionVector:
        offset = data.get("offset")
        return cls(
            str(data["storageType"]),
            str(data["pathOrInlineDv"]),
            int(str(data["sizeInBytes"])),
            int(str(data["cardinality"])),
            None if offset is None else int(str(offset)),
        )

    def file_path(self, table: Path) -> Path:
        """Where the bitmap of an on-disk DV is (``storageType`` 'u' or 'p')."""
        if self.storage_type == "p":
            return Path(self.path_or_inline.removeprefix("file://"))
        if self.storage_type != "u":
            raise DeletionVectorError("an inline deletion vector has no file")
        prefix, encoded = self.path_or_inline[:-20], self.path_or_inline[-20:]
        name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
        return table / prefix / name if prefix else table / name

    def read(self, table: Path) -> list[int]:
        """The sorted row positions this DV deletes."""
        if self.storage_type == "i":
            positions = decode_bitmap(z85_decode(self.path_or_inline, self.size_in_bytes))
        else:
            with self.file_path(table).open("rb") as handle:
                handle.seek(self.offset or 0)
                head = handle.read(4)
                if len(head) < 4:
                    raise DeletionVectorError(f"{self.file_path(table)} ends before its DV")
                (size,) = struct.unpack(">I", head)
                if size != self.size_in_bytes:
                    raise DeletionVectorError(
                        f"{self.file_path(table)}: a DV of {size} bytes where the log says "
                        f"{self.size_in_bytes}"
                    )
                data = handle.read(size)
                (checksum,) = struct.unpack(">I", handle.read(4))
            if zlib.crc32(data) != checksum:
                raise DeletionVectorError(f"{self.file_path(table)}: checksum mismatch")
            positions = decode_bitmap(data)
        if len(positions) != self.cardinality:
            raise DeletionVectorError(
                f"a DV of {len(positions)} rows where the log says {self.cardinality}"
            )
        return positions


def inline_vector(positions: Sequence[int]) -> DeletionVector:
    """A deletion vector written in the log itself (``storageType`` 'i'): for a few rows, a
    file of its own would cost more than the Z85 text."""
    bitmap = encode_bitmap(positions)
    return DeletionVector("i", z85_encode(bitmap), len(bitmap), len(set(positions)))


def write_dv_file(table: Path, deletions: Sequence[Sequence[int]]) -> list[DeletionVector]:
    """One DV file beside the table's data holding a DV per entry of ``deletions`` (the row
    positions of one data file each); returns their descriptors, in order."""
    ident = uuid.uuid4()
    path = table / f"deletion_vector_{ident}.bin"
    encoded = z85_encode(ident.bytes)
    found: list[DeletionVector] = []
    with path.open("xb") as handle:
        handle.write(bytes([_FILE_VERSION]))
        for positions in deletions:
            bitmap = encode_bitmap(positions)
            offset = handle.tell()
            handle.write(struct.pack(">I", len(bitmap)))
            handle.write(bitmap)
            handle.write(struct.pack(">I", zlib.crc32(bitmap)))
            found.append(DeletionVector("u", encoded, len(bitmap), len(set(positions)), offset))
        handle.flush()
        os.fsync(handle.fileno())
    return found
