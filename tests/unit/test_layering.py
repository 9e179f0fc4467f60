"""Imports point down, and nothing imports in a circle.

Every module of ``cdc_console`` belongs to a layer (its top-level package or module); a module may
import its own layer's package and anything in a lower rank, never a higher rank nor another
package of its own rank. The ranks are the architecture's layering, bottom first:

0. ``core`` (value types), ``errors``, ``units``: the leaves; ``core`` imports only the stdlib;
1. ``config``, ``config_writer``, ``logs``;
2. ``values``: a MySQL value's canonical form and Arrow/Delta type, for readers and sinks alike;
3. ``mysql`` (the server) and ``state`` (SQLite): I/O, neither needing the other;
4. ``source``: the algorithm; ``figures``: lag and the like, defined once over the state;
5. ``sinks``, ``retention``, ``launcher``, ``status``: services over the algorithm and state;
6. ``verify``: source against mirror, over the algorithm's reader and the sink's tables;
   ``metrics``: the job's Prometheus endpoint over ``status``'s figures;
7. ``spark`` (the job) and ``tui`` (the console), which never import each other;
8. ``bench``, ``demo``; 9. ``commands``; 10. ``cli``; 11. ``__main__``.

The graph is read from the source with ``ast`` and includes imports inside functions: a lazy
import is still a dependency. The test names each offending import by file and line.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "cdc_console"

RANKS: dict[str, int] = {
    "core": 0,
    "errors": 0,
    "units": 0,
    "config": 1,
    "config_writer": 1,
    "logs": 1,
    "values": 2,
    "mysql": 3,
    "state": 3,
    "source": 4,
    "sinks": 5,
    "retention": 5,
    "launcher": 5,
    "status": 5,
    "figures": 4,
    "verify": 6,
    "metrics": 6,
    "spark": 7,
    "tui": 7,
    "bench": 8,
    "demo": 8,
    "commands": 9,
    "cli": 10,
    "__main__": 11,
}
CORE_MAY_IMPORT = frozenset(sys.stdlib_module_names) | {"cdc_console"}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["cdc_console", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str:
    """The module an imported name lives in (``cdc_console.core.offset.BinlogOffset`` -> its
    module); the package ``cdc_console`` itself for an unknown name."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """``(imported name, line)`` for every import in the file, top-level names resolved."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target, node.lineno
            for alias in node.names:  # from cdc_console import launcher: a module, not a name
                if f"{target}.{alias.name}" in MODULES:
                    yield f"{target}.{alias.name}", node.lineno


def _layer(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def _graph() -> dict[str, dict[str, int]]:
    graph: dict[str, dict[str, int]] = {}
    for module, path in MODULES.items():
        edges: dict[str, int] = {}
        for name, line in _imports(module, path):
            if name.startswith("cdc_console"):
                target = _resolve(name)
                if target not in (module, "cdc_console"):
                    edges.setdefault(target, line)
        graph[module] = edges
    return graph


def test_every_module_has_a_layer() -> None:
    unranked = sorted({_layer(m) for m in MODULES if m != "cdc_console"} - set(RANKS))
    assert not unranked, f"give these a rank in RANKS (and in the docstring): {unranked}"


def test_imports_point_down() -> None:
    wrong: list[str] = []
    for module, edges in _graph().items():
        if module == "cdc_console":
            continue
        mine = _layer(module)
        for target, line in edges.items():
            theirs = _layer(target)
            if theirs != mine and RANKS[theirs] >= RANKS[mine]:
                wrong.append(
                    f"{MODULES[module].relative_to(PACKAGE.parent)}:{line} imports {target} "
                    f"({theirs}, rank {RANKS[theirs]} >= {mine}, rank {RANKS[mine]})"
                )
    assert not wrong, "imports against the layering:\n" + "\n".join(sorted(wrong))


def test_core_imports_only_the_standard_library_and_itself() -> None:
    wrong: list[str] = []
    for module, path in MODULES.items():
        if _layer(module) != "core":
            continue
        for name, line in _imports(module, path):
            top = name.split(".")[0]
            if top not in CORE_MAY_IMPORT or (
                top == "cdc_console" and _layer(_resolve(name)) != "core"
            ):
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}")
    assert not wrong, "core is the leaf of the graph:\n" + "\n".join(wrong)


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_in_a_circle() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_the_architecture_page_lists_the_layers_in_this_order() -> None:
    """docs/architecture.md's "Layers." paragraph names every ranked package once, level by
    level (``→`` between levels), in the ranks above: a newcomer reads the same order."""
    import re

    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    paragraph = page[page.index("**Layers.**") :].split("\n\n", 1)[0]
    order = paragraph[paragraph.index("(bottom first):") : paragraph.index("`cli`.") + 5]
    levels = [re.findall(r"`([a-z_]+)`", level) for level in order.split("→")]
    named = [name for level in levels for name in level]
    assert sorted(named) == sorted(set(RANKS) - {"__main__"}), named
    ranks = [{RANKS[name] for name in level} for level in levels]
    assert all(len(r) == 1 for r in ranks), levels
    flat = [r.pop() for r in ranks]
    assert flat == sorted(flat) and len(set(flat)) == len(flat), levels
