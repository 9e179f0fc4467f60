"""Types of the compiled binlog row-image decoder (``_rowimages.c``)."""

from collections.abc import Callable

class ImageDecoder:
    def __init__(
        self,
        columns: list[tuple[str, str | None, int, int, int, object, str]],
        decimal: Callable[[str], object],
        from_timestamp: Callable[[int], object],
        null_source: str,
        cols_bitmap_source: str,
    ) -> None: ...
    def image(
        self,
        data: bytes,
        pos: int,
        present: tuple[bool, ...],
        null_bytes: int,
        full: bool,
        sources: dict[str | None, str],
        /,
    ) -> tuple[dict[str, object], dict[str, str], int]: ...
