"""The package's layout, read from its import graph: no cycles, layers import downward, adapters import no world.

The graph is built with :mod:`ast` from the source of ``src/mirrorworld``: an
edge ``a -> b`` for every ``import``/``from ... import`` in module ``a`` that
names module ``b``, at module level or inside a function (a function-local
import runs too, only later), except under ``if TYPE_CHECKING:``, which never
runs. ``from pkg import name`` is an edge to ``pkg.name`` when that is a
module, else to ``pkg``; importing ``a.b.c`` also runs ``a/__init__`` and
``a/b/__init__``, but that is the packages' own business and no edge.

* **No cycle**: no strongly connected component of more than one module. A
  package's ``__init__`` importing its own submodules (to re-export them) is
  not an edge here: a submodule that imports its package's name is the
  ordinary way of using a package.
* **Layers**: ``core`` and ``errors`` import only ``core`` and ``errors``;
  ``verify`` only those and itself; ``episodes`` only those, ``verify`` and
  itself.
* **Adapters import no world**: outside ``worlds``, ``twin`` and
  ``fidelity`` (the sales world's real-ERP twin and its harness, which know
  that world by design) nothing imports ``mirrorworld.worlds``; commands find
  worlds through a ``Registry`` and ask them through their hooks.

The checkers are small functions over a graph, and the last tests feed them
synthetic graphs and sources with one defect each, so a checker that stopped
seeing cycles or upward imports would fail here too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import mirrorworld

SRC = Path(mirrorworld.__file__).resolve().parent
ROOT = "mirrorworld"

Graph = Mapping[str, Mapping[str, int]]
"""``{module: {imported module: first line}}``."""

LAYERS: dict[str, frozenset[str]] = {
    "mirrorworld.errors": frozenset({"mirrorworld.core", "mirrorworld.errors"}),
    "mirrorworld.core": frozenset({"mirrorworld.core", "mirrorworld.errors"}),
    "mirrorworld.verify": frozenset({"mirrorworld.core", "mirrorworld.errors", "mirrorworld.verify"}),
    "mirrorworld.episodes": frozenset(
        {"mirrorworld.core", "mirrorworld.errors", "mirrorworld.verify", "mirrorworld.episodes"}
    ),
}
"""A layer's modules (the key and everything under it) may import only the modules under these names."""

WORLDS = "mirrorworld.worlds"
KNOW_WORLDS = ("mirrorworld.worlds", "mirrorworld.twin", "mirrorworld.fidelity")
"""The packages that may import a world: the worlds, and the sales world's real-ERP twin and its harness."""

WORLD_IMPORTS_ALLOWED: dict[str, str] = {}
"""Other modules allowed to import a world, each with its reason (none)."""


# -- the graph ---------------------------------------------------------------------------


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def discover(src: Path = SRC, root: str = ROOT) -> dict[str, tuple[str, bool]]:
    """``{module name: (source, is a package)}`` for every ``.py`` file under ``src``."""
    out: dict[str, tuple[str, bool]] = {}
    for path in sorted(src.rglob("*.py")):
        parts = [root, *path.relative_to(src).with_suffix("").parts]
        package = parts[-1] == "__init__"
        if package:
            parts.pop()
        out[".".join(parts)] = (path.read_text(encoding="utf-8"), package)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: anywhere, except in the body of ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def imports_of(name: str, source: str, package: bool, known: Iterable[str], root: str = ROOT) -> dict[str, int]:
    """The modules of ``known`` that module ``name`` imports, each with the first line that does."""
    known = set(known)

    def resolve(dotted: str) -> str | None:
        parts = dotted.split(".")
        while parts and ".".join(parts) not in known:
            parts.pop()
        return ".".join(parts) if parts else None

    here = name if package else name.rpartition(".")[0]
    out: dict[str, int] = {}
    for node in _import_nodes(ast.parse(source)):
        targets: list[str | None] = []
        if isinstance(node, ast.Import):
            targets = [resolve(a.name) for a in node.names]
        else:
            if node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            for alias in node.names:
                full = f"{module}.{alias.name}"
                targets.append(full if full in known else resolve(module))
        for target in targets:
            if target is not None and target != name and _under(target, root):
                out.setdefault(target, node.lineno)
    return out


def import_graph(modules: Mapping[str, tuple[str, bool]], root: str = ROOT) -> dict[str, dict[str, int]]:
    """The import graph of ``modules`` (see the module docstring)."""
    return {name: imports_of(name, source, package, modules, root) for name, (source, package) in modules.items()}


# -- the checkers ------------------------------------------------------------------------


def cycles(graph: Graph, packages: Iterable[str] = ()) -> list[list[str]]:
    """Strongly connected components of more than one module, each sorted (Tarjan's algorithm).

    Edges from a package in ``packages`` to its own submodules are left out:
    an ``__init__`` that re-exports its submodules is not a cycle.
    """
    own = set(packages)
    edges = {
        a: [b for b in sorted(bs) if b in graph and not (a in own and b.startswith(a + "."))] for a, bs in graph.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def upward(graph: Graph, layers: Mapping[str, frozenset[str]] = LAYERS) -> list[str]:
    """``"a -> b (line n)"`` for each import of a layered module outside what its layer may import."""
    out = []
    for a, targets in sorted(graph.items()):
        allowed = next((ok for layer, ok in layers.items() if _under(a, layer)), None)
        if allowed is None:
            continue
        for b, line in sorted(targets.items()):
            if not any(_under(b, ok) for ok in allowed):
                out.append(f"{a} -> {b} (line {line})")
    return out


def world_imports(
    graph: Graph, worlds: str = WORLDS, know: Iterable[str] = KNOW_WORLDS, allowed: Iterable[str] = ()
) -> list[str]:
    """``"a -> b (line n)"`` for each import of a world by a module that has no business knowing one."""
    know, allowed = tuple(know), set(allowed)
    return [
        f"{a} -> {b} (line {line})"
        for a, targets in sorted(graph.items())
        if a not in allowed and not any(_under(a, k) for k in know)
        for b, line in sorted(targets.items())
        if _under(b, worlds)
    ]


def _explain(graph: Graph, component: list[str]) -> str:
    members = set(component)
    edges = [f"  {a} -> {b} (line {n})" for a in component for b, n in sorted(graph[a].items()) if b in members]
    return "cycle among " + ", ".join(component) + ":\n" + "\n".join(edges)


# -- the package -------------------------------------------------------------------------

MODULES = discover()
GRAPH = import_graph(MODULES)
PACKAGES = [name for name, (_, package) in MODULES.items() if package]


def test_the_graph_sees_the_package() -> None:
    assert {"mirrorworld", "mirrorworld.core.session", "mirrorworld.core.world", "mirrorworld.server.app"} <= set(GRAPH)
    assert "mirrorworld.core.store" in GRAPH["mirrorworld.core.session"]
    assert "mirrorworld.core.session" in GRAPH["mirrorworld.episodes.episode"]


def test_no_import_cycle() -> None:
    found = cycles(GRAPH, PACKAGES)
    assert not found, "\n".join(_explain(GRAPH, c) for c in found)


def test_layers_import_only_downward() -> None:
    assert upward(GRAPH) == []


def test_only_worlds_and_their_twins_import_a_world() -> None:
    assert world_imports(GRAPH, allowed=WORLD_IMPORTS_ALLOWED) == []


def test_every_allowed_world_import_is_still_needed() -> None:
    needed = {a for a, targets in GRAPH.items() if any(_under(b, WORLDS) for b in targets)}
    assert set(WORLD_IMPORTS_ALLOWED) <= needed


# -- the checkers catch what they look for --------------------------------------------------


def test_a_cycle_is_found_and_a_package_reexport_is_not() -> None:
    graph = {
        "p": {"p.a": 1},  # the package re-exports its submodule
        "p.a": {"p": 3, "p.b": 4},
        "p.b": {"p.c": 5},
        "p.c": {"p.a": 6},  # closes p.a -> p.b -> p.c -> p.a
        "p.d": {"p.a": 7},
    }
    assert cycles(graph, packages=["p"]) == [["p.a", "p.b", "p.c"]]
    assert cycles(graph) == [["p", "p.a", "p.b", "p.c"]]
    del graph["p.c"]["p.a"]
    assert cycles(graph, packages=["p"]) == []


def test_an_upward_import_is_found() -> None:
    graph = {
        "mirrorworld.core.session": {"mirrorworld.core.store": 1, "mirrorworld.errors": 2},
        "mirrorworld.core.world": {"mirrorworld.episodes.episode": 9},
        "mirrorworld.verify.verifier": {"mirrorworld.core.session": 1},
        "mirrorworld.episodes.episode": {"mirrorworld.verify.verifier": 1, "mirrorworld.server.app": 4},
        "mirrorworld.errors": {"mirrorworld": 3},
        "mirrorworld.server.app": {"mirrorworld.episodes.episode": 1},
    }
    assert upward(graph) == [
        "mirrorworld.core.world -> mirrorworld.episodes.episode (line 9)",
        "mirrorworld.episodes.episode -> mirrorworld.server.app (line 4)",
        "mirrorworld.errors -> mirrorworld (line 3)",
    ]


def test_a_world_import_outside_the_worlds_is_found() -> None:
    graph = {
        "mirrorworld.cli": {"mirrorworld.worlds.helpdesk": 12},
        "mirrorworld.worlds.helpdesk.world": {"mirrorworld.worlds.helpdesk.tools": 1},
        "mirrorworld.twin.sales": {"mirrorworld.worlds.sales.tools": 2},
        "mirrorworld.bench.bench": {"mirrorworld.core.registry": 3},
    }
    assert world_imports(graph) == ["mirrorworld.cli -> mirrorworld.worlds.helpdesk (line 12)"]
    assert world_imports(graph, allowed=["mirrorworld.cli"]) == []


def test_one_upward_edge_in_the_real_graph_is_caught_twice() -> None:
    graph = {a: dict(targets) for a, targets in GRAPH.items()}
    graph["mirrorworld.core.store"]["mirrorworld.episodes.episode"] = 1  # the episode needs the store: a loop
    assert "mirrorworld.core.store -> mirrorworld.episodes.episode (line 1)" in upward(graph)
    assert any({"mirrorworld.core.store", "mirrorworld.episodes.episode"} <= set(c) for c in cycles(graph, PACKAGES))


def test_the_parser_reads_every_import_that_can_run() -> None:
    known = {"m", "m.pkg", "m.pkg.a", "m.pkg.b", "m.pkg.c", "m.low", "m.typed", "m.late", "m.other"}
    source = "\n".join(
        [
            "from __future__ import annotations",
            "import typing",
            "from typing import TYPE_CHECKING",
            "from . import b",  # a submodule, relative
            "from .c import thing",  # a name of a submodule
            "from m.low import helper",
            "if TYPE_CHECKING:",
            "    from m.typed import Type",
            "else:",
            "    import m.other",
            "if typing.TYPE_CHECKING:",
            "    import m.typed",
            "def f():",
            "    from m.late import x",  # runs when f is called: an edge all the same
            "import os",
        ]
    )
    found = imports_of("m.pkg.a", source, False, known, root="m")
    assert found == {"m.pkg.b": 4, "m.pkg.c": 5, "m.low": 6, "m.other": 10, "m.late": 14}
    package = imports_of("m.pkg", "from . import a\nfrom .. import low\nfrom m import pkg", True, known, root="m")
    assert package == {"m.pkg.a": 1, "m.low": 2}
