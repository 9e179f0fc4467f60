"""Deletion vectors against the Delta protocol's own examples (``PROTOCOL.md``, "Deletion Vector
Descriptor Schema", JSON examples 1 and 3) and the Z85 spec's (ZeroMQ RFC 32), then round trips
of bitmaps of every container kind."""

from __future__ import annotations

import random
import struct
import uuid
from pathlib import Path

import pytest

from cdc_console.sinks.deletion_vectors import (
    DeletionVector,
    DeletionVectorError,
    _roaring32,
    decode_bitmap,
    encode_bitmap,
    write_dv_file,
    z85_decode,
    z85_encode,
)

#: PROTOCOL.md, JSON Example 3 (inline): "The row indexes encoded in this DV are: 3, 4, 7, 11,
#: 18, 29."
INLINE = DeletionVector("i", "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", 40, 6)


def test_z85_matches_the_zeromq_spec_example() -> None:
    data = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85_encode(data) == "HelloWorld"
    assert z85_decode("HelloWorld") == data


def test_a_dv_file_path_is_derived_as_the_protocol_example_says() -> None:
    """JSON Example 1: prefix "ab" and the Z85 of the UUID d2c639aa-8816-431a-aaf6-d3fe2512ff61."""
    dv = DeletionVector("u", "ab^-aqEH.-t@S}K{vb[*k^", 40, 6, offset=4)
    table = Path("/mytable")
    assert dv.file_path(table) == Path(
        "/mytable/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    )
    assert z85_encode(uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61").bytes) == (
        "^-aqEH.-t@S}K{vb[*k^"
    )
    assert dv.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"
    assert INLINE.unique_id == "i" + INLINE.path_or_inline


def test_the_protocols_inline_example_decodes_to_its_rows() -> None:
    assert INLINE.read(Path("/unused")) == [3, 4, 7, 11, 18, 29]


def test_our_32_bit_bitmap_is_the_bytes_of_the_protocols_example() -> None:
    """The example's bucket (after its 12-byte header) is the portable 32-bit Roaring bitmap of
    the same rows, byte for byte what the encoder writes."""
    example = z85_decode(INLINE.path_or_inline, 40)
    assert _roaring32([3, 4, 7, 11, 18, 29]) == example[12:]
    ours = encode_bitmap([29, 3, 4, 7, 11, 18, 3])
    assert struct.unpack_from("<IQI", ours) == (1681511377, 1, 0)
    assert ours[16:] == example[12:]


@pytest.mark.parametrize(
    "positions",
    [
        [],
        [0],
        list(range(0, 200_000, 3)),  # bitset containers (> 4,096 values in a 64K block)
        [5, 65535, 65536, 4096 * 16 + 1],
        [1, 2**32 - 1, 2**32, 2**32 + 7, 2**40 + 3],  # several 32-bit buckets
    ],
    ids=["empty", "one", "bitsets", "block-edges", "buckets"],
)
def test_bitmaps_round_trip(positions: list[int]) -> None:
    assert decode_bitmap(encode_bitmap(positions)) == sorted(set(positions))


def test_random_bitmaps_round_trip() -> None:
    rng = random.Random(31)
    for _ in range(20):
        positions = rng.sample(range(300_000), rng.randint(1, 9_000))
        assert decode_bitmap(encode_bitmap(positions)) == sorted(positions)


def test_a_dv_file_holds_each_dv_with_its_size_and_checksum(tmp_path: Path) -> None:
    first, second = write_dv_file(tmp_path, [[3, 4, 7], list(range(0, 10_000, 2))])
    assert first.offset == 1 and second.offset == 1 + 4 + first.size_in_bytes + 4
    assert (first.cardinality, second.cardinality) == (3, 5_000)
    assert first.read(tmp_path) == [3, 4, 7]
    assert second.read(tmp_path) == list(range(0, 10_000, 2))
    data = bytearray(first.file_path(tmp_path).read_bytes())
    assert data[0] == 1
    data[10] ^= 0xFF
    first.file_path(tmp_path).write_bytes(bytes(data))
    with pytest.raises(DeletionVectorError, match="checksum mismatch"):
        first.read(tmp_path)


def test_a_descriptor_round_trips_through_its_json() -> None:
    dv = DeletionVector("u", "ab^-aqEH.-t@S}K{vb[*k^", 40, 6, offset=4)
    assert dv.to_json() == {
        "storageType": "u",
        "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
        "sizeInBytes": 40,
        "cardinality": 6,
        "offset": 4,
    }
    assert DeletionVector.from_json(dv.to_json()) == dv
    assert "offset" not in INLINE.to_json()


def _spec_positions(data: bytes) -> list[int]:
    """An independent reading of the protocol's portable RoaringBitmapArray, written here from
    PROTOCOL.md and the Roaring format spec (not the codec under test): magic, bucket count,
    then per bucket its key and a 32-bit bitmap (cookie 12346: sizes, offsets, containers)."""
    assert int.from_bytes(data[0:4], "little") == 1681511377
    buckets = int.from_bytes(data[4:12], "little")
    at, found = 12, []
    for _ in range(buckets):
        high = int.from_bytes(data[at : at + 4], "little")
        start = at + 4
        assert int.from_bytes(data[start : start + 4], "little") == 12346
        containers = int.from_bytes(data[start + 4 : start + 8], "little")
        header = data[start + 8 : start + 8 + 4 * containers]
        offsets = data[start + 8 + 4 * containers : start + 8 + 8 * containers]
        end = start
        for i in range(containers):
            key = int.from_bytes(header[4 * i : 4 * i + 2], "little")
            count = int.from_bytes(header[4 * i + 2 : 4 * i + 4], "little") + 1
            body = start + int.from_bytes(offsets[4 * i : 4 * i + 4], "little")
            if count > 4096:
                bits = data[body : body + 8192]
                lows = [b * 8 + j for b in range(8192) for j in range(8) if bits[b] >> j & 1]
                end = body + 8192
            else:
                lows = [
                    int.from_bytes(data[body + 2 * j : body + 2 * j + 2], "little")
                    for j in range(count)
                ]
                end = body + 2 * count
            found += [(high << 32) | (key << 16) | low for low in lows]
        at = end
    return found


def test_the_sinks_vector_files_read_the_same_through_an_independent_decoder(
    tmp_path: Path,
) -> None:
    """Every on-disk vector of a merge-on-read mirror, read by the reading above: its size
    field, CRC-32 and positions as its descriptor says."""
    import zlib

    from cdc_console.config import LakeConfig
    from cdc_console.sinks.delta import DeltaSink
    from cdc_console.sinks.delta_log import active_files
    from tests.unit.test_delta_sink import ORDERS, SCHEMAS, Feed, order

    sink = DeltaSink(tmp_path, lake=LakeConfig())
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k)) for k in range(70_000)])
    sink.apply_batch(1, SCHEMAS, [feed.rec("-D", order(k)) for k in range(0, 70_000, 7)])
    root = sink.mirror_path(ORDERS)
    checked = 0
    for file in active_files(root).values():
        dv = file.deletion_vector
        if dv is None or dv.storage_type != "u":
            continue
        raw = dv.file_path(root).read_bytes()
        assert raw[0] == 1  # the file format's version
        assert dv.offset is not None
        size = int.from_bytes(raw[dv.offset : dv.offset + 4], "big")
        bitmap = raw[dv.offset + 4 : dv.offset + 4 + size]
        crc = int.from_bytes(raw[dv.offset + 4 + size : dv.offset + 8 + size], "big")
        assert size == dv.size_in_bytes and crc == zlib.crc32(bitmap)
        positions = _spec_positions(bitmap)
        assert len(positions) == dv.cardinality and positions == dv.read(root)
        checked += 1
    assert checked >= 1
