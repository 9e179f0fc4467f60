"""How far a committed binlog position is behind the server's head, in bytes and files."""

from __future__ import annotations

from collections.abc import Sequence

from cdc_console.core.offset import BinlogOffset, binlog_file_index


def binlog_distance(
    committed: BinlogOffset, head: BinlogOffset, logs: Sequence[tuple[str, int]]
) -> tuple[int, int]:
    """``(bytes, files)`` between two positions, given ``SHOW BINARY LOGS`` (name, size) rows."""
    if committed >= head:
        return 0, 0
    start_index, head_index = binlog_file_index(committed.file), binlog_file_index(head.file)
    if start_index == head_index:
        return head.pos - committed.pos, 0
    sizes = {binlog_file_index(name): size for name, size in logs}
    total = max(sizes.get(start_index, committed.pos) - committed.pos, 0)
    for index in range(start_index + 1, head_index):
        total += sizes.get(index, 0)
    return total + head.pos, head_index - start_index
