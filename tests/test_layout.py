"""The folder is the architecture: what the package root holds, how long a module may grow,
that no import circle exists (type-only imports counted), and that the architecture page
names exactly the sub-packages the tree has."""

from __future__ import annotations

import re
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "session_keeper"
MAX_LINES = 650


def test_the_package_root_holds_only_public_modules_and_sub_packages() -> None:
    """Every module at the root is public; private code lives in a sub-package."""
    private = sorted(
        p.name for p in PACKAGE.glob("*.py") if p.name.startswith("_") and p.name != "__init__.py"
    )
    assert private == []


def test_no_module_is_longer_than_the_limit() -> None:
    """A module that grows past 650 lines is split by concept before it lands."""
    long = {
        str(p.relative_to(ROOT)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle_counting_type_only_imports() -> None:
    """No two modules of the package import each other, even only for type checking."""
    graph = grimp.build_graph("session_keeper", include_external_packages=False)
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    """The check above can fail: a planted two-module circle is found."""
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.a")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    assert _cycles(graph) == [["pkg.a", "pkg.b"]]


def test_the_architecture_page_names_exactly_the_sub_packages() -> None:
    """docs/architecture.md's package table and the tree agree, both ways."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"^\| `(session_keeper\.[\w.]+)` \|", page, re.M))
    tree = {f"session_keeper.{p.parent.name}" for p in PACKAGE.glob("*/__init__.py")}
    assert named == tree
