"""The compiled row decoders under AddressSanitizer: no read or write outside their buffers.

The first version of ``_textrows.c`` copied past the end of its NULL bitmap; the values tests
caught it only by chance (what lay past the end). Here both C files are built again with
``-fsanitize=address`` and the tests that exercise them (``test_textrows``,
``test_binlog_decode``) run in a child interpreter that loads those builds, with Python's own
allocator off (``PYTHONMALLOC=malloc``) so that every buffer is one the sanitizer watches. Any
out-of-bounds access aborts the child with the sanitizer's report.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = ("_textrows", "_rowimages")

LOADER = """
import importlib.util, sys
for name, path in {paths!r}.items():
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
import cdc_console.mysql.rawrows as rawrows, cdc_console.mysql.row_images as row_images
assert rawrows._textrows.__file__ == {paths!r}["cdc_console.mysql._textrows"]
assert row_images._rowimages.__file__ == {paths!r}["cdc_console.mysql._rowimages"]
import pytest
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-n", "0",
                      "tests/unit/test_textrows.py", "tests/unit/test_binlog_decode.py"]))
"""


def _libasan(compiler: str) -> Path:
    found = subprocess.run(
        [compiler, "-print-file-name=libasan.so"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return Path(found)


def test_the_decoders_touch_only_their_own_memory(tmp_path: Path) -> None:
    compiler = shutil.which("gcc")
    assert compiler, "gcc is needed to build the row decoders (.ci/setup installs it)"
    libasan = _libasan(compiler)
    if not libasan.is_absolute() or not libasan.exists():
        pytest.fail(f"gcc has no AddressSanitizer runtime ({libasan}): install libasan")
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    paths = {}
    for module in MODULES:
        built = tmp_path / f"{module}{suffix}"
        subprocess.run(
            [
                compiler,
                "-shared",
                "-fPIC",
                "-O1",
                "-g",
                "-fno-omit-frame-pointer",
                "-fsanitize=address",
                f"-I{include}",
                str(ROOT / "cdc_console" / "mysql" / f"{module}.c"),
                "-o",
                str(built),
            ],
            check=True,
        )
        paths[f"cdc_console.mysql.{module}"] = str(built)
    env = {
        **os.environ,
        "LD_PRELOAD": str(libasan),
        "PYTHONMALLOC": "malloc",
        # the child's pytest captures fd 2, so the report goes to a file of its own
        "ASAN_OPTIONS": f"detect_leaks=0:log_path={tmp_path / 'asan'}",
    }
    env.pop("CDC_CONSOLE_PURE_PYTHON_ROWS", None)
    child = subprocess.run(
        [sys.executable, "-c", LOADER.format(paths=paths)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    sanitizer = "".join(p.read_text() for p in tmp_path.glob("asan.*"))
    assert not sanitizer, sanitizer[:4000]
    report = child.stdout[-3000:] + child.stderr[-3000:]
    assert child.returncode == 0, report
    assert " passed" in child.stdout, report
