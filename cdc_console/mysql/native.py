"""The switch between the compiled row decoders and their pure-Python twins.

Two hot loops are compiled at install when a C compiler is there: the snapshot readers' walk
over a result set's row packets (``_textrows.c``, see ``rawrows``) and the binlog readers' row
images (``_rowimages.c``, see ``row_images``). Each has a Python twin that decodes the same
values, used where nothing was compiled; ``CDC_CONSOLE_PURE_PYTHON_ROWS=1`` chooses the twins on
purpose, to compare the two or to rule the compiled code out.
"""

from __future__ import annotations

import os

PURE_PYTHON_ENV = "CDC_CONSOLE_PURE_PYTHON_ROWS"


def compiled_rows_wanted() -> bool:
    """False when the environment asks for the pure-Python decoders."""
    return os.environ.get(PURE_PYTHON_ENV, "") != "1"


def compiled_rows_built() -> bool:
    """Whether both compiled decoders were built at install."""
    try:
        from cdc_console.mysql import _rowimages, _textrows  # noqa: F401
    except ImportError:
        return False
    return True


def decoders_in_use() -> str:
    """ "compiled", or why the pure-Python twins decode: "not built" or "switched off" (the
    job's log line and the benches' first line both say it, each in its own words)."""
    if not compiled_rows_built():
        return "not built"
    if not compiled_rows_wanted():
        return "switched off"
    return "compiled"
