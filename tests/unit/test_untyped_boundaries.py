"""``Any`` is spelled in one module only: ``core/untyped.py``, which names each untyped
third-party boundary (pymysql, mysql-replication, tomllib, json, sqlite3).

Everywhere else a value has a real type, or the boundary alias says which library left it
untyped. The test names each offending use by file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "cdc_console"
BOUNDARY = PACKAGE / "core" / "untyped.py"


def uses_of_any(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "typing":
            if any(alias.name == "Any" for alias in node.names):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} imports Any")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "Any"
            and isinstance(node.value, ast.Name)
            and node.value.id in ("typing", "t")
        ):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} typing.Any")
    return found


def test_any_is_spelled_only_at_the_named_boundaries() -> None:
    offending = [
        use
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != BOUNDARY
        for use in uses_of_any(path)
    ]
    assert not offending, "\n".join(offending)


def test_the_boundary_module_itself_is_found() -> None:
    assert uses_of_any(BOUNDARY), "the scan would miss an import of Any"
