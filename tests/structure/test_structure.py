"""The packages' imports, read from the source: floors run one way, and no module imports itself round.

Every import counts wherever it is written: at module level, inside a function, or under
``TYPE_CHECKING``. A late or type-only import still ties two modules together; it only hides the
tie from the interpreter. The floors are those of docs/architecture.md ("Floors").
"""
from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

from testkit.bot_harness import REPO
# Which of our packages each may import, beside itself (docs/architecture.md, "Floors").
FLOORS = {
    "storage": set(),
    "weights": {"storage"},
    "inference": {"storage", "weights"},
    "bot": {"storage", "weights", "inference"},
}


def _modules() -> dict[str, Path]:
    """Every module of our packages by dotted name (a package by its own name, for its ``__init__``)."""
    found = {}
    for package in FLOORS:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The modules of ours that ``name`` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package ``level - 1`` steps above this module's own
                above = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(above + ([node.module] if node.module else []))
            # ``from a import b`` imports the module a.b where there is one, else a name from a
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # a.b.X, a name from the module a.b
                target = target.rpartition(".")[0]
            if target:
                yield target


@functools.cache
def _graph() -> dict[str, frozenset[str]]:
    """Each module of ours, and the modules of ours it imports."""
    modules = _modules()
    return {name: frozenset(_imported(name, path, modules)) - {name} for name, path in modules.items()}


def _with_packages(graph: dict[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    """The graph with the packages each import runs first: importing ``a.b.c`` runs ``a`` and ``a.b``."""
    def above(target: str) -> set[str]:
        parts = target.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return {name: frozenset(set().union(*map(above, targets)) - {name}) for name, targets in graph.items()}


def _cycles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """One shortest cycle through each group of modules that import one another round (Tarjan's
    strongly connected components, then a breadth-first walk back to where it started)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while not group or v not in group:
                group.add(stack.pop())
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for group in groups:
        start = min(group)
        paths = {start: [start]}
        frontier = [start]
        while not (closing := [v for v in frontier if start in graph[v]]):
            step = []
            for v in frontier:
                for w in sorted(graph[v] & group):
                    if w not in paths:
                        paths[w] = paths[v] + [w]
                        step.append(w)
            frontier = step
        cycles.append(paths[closing[0]] + [start])
    return cycles


def test_floors_run_one_way() -> None:
    graph = _graph()
    assert len(graph) > 100, "the packages' modules were not found"
    climbs = [f"{name} imports {target}" for name, targets in sorted(graph.items()) for target in sorted(targets)
              if (target.split(".")[0] != name.split(".")[0]
                  and target.split(".")[0] not in FLOORS[name.split(".")[0]])]
    assert not climbs, "imports that climb a floor (docs/architecture.md, 'Floors'):\n" + "\n".join(climbs)


def test_no_module_imports_itself_round() -> None:
    cycles = _cycles(_with_packages(_graph()))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def _rooms() -> dict[str, frozenset[str]]:
    """bot/'s rooms (its packages, and its top-level modules), each with the rooms it imports."""
    edges: dict[str, set[str]] = {}
    for name, targets in _graph().items():
        if name.startswith("bot."):
            room = name.split(".")[1]
            edges.setdefault(room, set()).update(t.split(".")[1] for t in targets if t.startswith("bot."))
    return {room: frozenset(targets - {room}) for room, targets in edges.items()}


def test_bots_rooms_import_one_way() -> None:
    """service/ is the leaf every room reports to (settings, logs, metrics) and root/ the top that wires
    them: no room is both, so no two rooms import each other, however far round (docs/architecture.md)."""
    rooms = _rooms()
    assert {"chat", "flow", "drawing", "updates", "webapp", "service", "root"} <= rooms.keys()
    assert rooms["service"] == set(), "the leaf imports a room"
    assert {room for room, targets in rooms.items() if "root" in targets} == {"cli"}, "only the command line starts it"
    assert "root" not in rooms["chat"], "the chat reaches the root's bundle (BotState), not its own groups"
    cycles = _cycles(rooms)
    assert not cycles, "rooms that import each other:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_flow_knows_no_way_of_answering() -> None:
    """bot/flow/ defines the seams (bot/flow/answering.py); the chat and the Mini App implement them, so a
    new way of answering or a change to one never reaches into the flow (docs/architecture.md, "The seams")."""
    graph = _graph()
    reaches = [f"{name} imports {target}" for name, targets in sorted(graph.items()) if name.startswith("bot.flow")
               for target in sorted(targets) if target.startswith(("bot.chat", "bot.webapp"))]
    assert "bot.flow.runner" in graph, "the flow's modules were not found"
    assert not reaches, "the flow reaches into a way of answering:\n" + "\n".join(reaches)


def test_only_the_database_commits() -> None:
    """One transaction helper (storage/database.py) owns every commit, so a caller's statements land together."""
    committing = sorted(str(path.relative_to(REPO)) for package in FLOORS for path in (REPO / package).rglob("*.py")
                        if ".commit()" in path.read_text())
    assert committing == ["storage/database.py"]


def test_only_the_database_holds_the_connection() -> None:
    """aiosqlite's connection can begin, commit and roll back: storage/database.py alone imports aiosqlite, and
    every other module (the schema's upgrades too) works through its reads and its Transaction, which can't."""
    def imports_it(path: Path) -> bool:
        return any(name.split(".")[0] == "aiosqlite" for node in ast.walk(ast.parse(path.read_text(), str(path)))
                   for name in ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                                else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                                else []))
    importing = sorted(str(path.relative_to(REPO)) for package in FLOORS for path in (REPO / package).rglob("*.py")
                       if imports_it(path))
    assert importing == ["storage/database.py"]


def test_no_code_outside_the_kinds_picks_a_kind_by_its_name() -> None:
    """A kind is one module of bot/flow/kinds/; elsewhere it is named by its object (registry.STICKER), so a
    new kind, or a renamed one, touches no handler. Its name is only what a journal row carries."""
    names = {"photo", "styles", "preview", "tiles", "file", "sticker", "avatar", "cutout", "hd"}
    found = []
    for path in (REPO / "bot").rglob("*.py"):
        if "kinds" in path.parts or path.name == "requests.py":  # requests.py reads rows written before kinds
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "KINDS":
                found.append(f"{path.name}:{node.lineno} KINDS[...]")
            if isinstance(node, ast.keyword) and node.arg == "kind" and isinstance(node.value, ast.Constant) \
                    and node.value.value in names:
                found.append(f"{path.name}:{node.lineno} kind={node.value.value!r}")
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "kind" and any(
                    isinstance(c, ast.Constant) and c.value in names for c in node.comparators):
                found.append(f"{path.name}:{node.lineno} kind == ...")
    assert not found, "kinds picked by name outside bot/flow/kinds/:\n" + "\n".join(found)
