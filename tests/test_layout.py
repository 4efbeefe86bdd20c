"""The folder is the architecture: what the package root holds,
that no import circle exists (type-only imports counted), that no module reaches into
another's private attributes, and that the architecture page names exactly the
sub-packages the tree has (the engine's rooms too)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp

import session_keeper.stores

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "session_keeper"


def test_the_package_root_holds_only_public_modules_and_sub_packages() -> None:
    """Every module at the root is public; private code lives in a sub-package."""
    private = sorted(
        p.name for p in PACKAGE.glob("*.py") if p.name.startswith("_") and p.name != "__init__.py"
    )
    assert private == []


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


def test_the_architecture_page_names_exactly_the_engines_rooms() -> None:
    """docs/architecture.md's table of the engine's rooms and _keeper's sub-packages agree."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"^\| `_keeper/(\w+)/` \|", page, re.M))
    tree = {p.parent.name for p in (PACKAGE / "_keeper").glob("*/__init__.py")}
    assert named == tree


_LOCATOR = "session_keeper/_keeper/tabs/tab_locator.py"

#: Private attributes a module may touch on an object it did not define, each with why.
FOREIGN_PRIVATE_ALLOWED: dict[tuple[str, str], str] = {
    # Playwright's public Page/BrowserContext wrap an implementation object; re-binding a
    # reconnected page keeps the wrapper every caller holds, and counts the routes kept
    # client-side (no public API for either).
    ("session_keeper/_browser/cdp_session.py", "_impl_obj"): "Playwright: repoint a page",
    ("session_keeper/_browser/cdp_session.py", "_routes"): "Playwright: routes kept",
    ("session_keeper/_browser/cdp_session.py", "_web_socket_routes"): "Playwright: routes kept",
    # Locator code in JavaScript: Python's public normalize() asks the driver only for
    # Python, so TabLocator.code("javascript") makes the same driver call itself.
    (_LOCATOR, "_impl_obj"): "Playwright: JavaScript locator code",
    (_LOCATOR, "_frame"): "Playwright: JavaScript locator code",
    (_LOCATOR, "_channel"): "Playwright: JavaScript locator code",
    (_LOCATOR, "_selector"): "Playwright: JavaScript locator code",
}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _own_private_names(tree: ast.Module) -> set[str]:
    """Private names a module defines: functions, classes, module or class names, the
    attributes it sets on ``self``/``cls``, and its ``__slots__``."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            own.add(node.attr)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
        ):
            own.update(
                c.value
                for c in ast.walk(node.value)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            )
    return own


def _foreign_private_access(path: str, source: str) -> list[str]:
    """``<expr>._name`` (and ``getattr``/``setattr`` of ``"_name"``) where ``_name`` is not
    the module's own and ``<expr>`` is not ``self``, ``cls`` or ``super()``."""
    tree = ast.parse(source)
    own = _own_private_names(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        attr: str | None = None
        if isinstance(node, ast.Attribute):
            value = node.value
            if isinstance(value, ast.Name) and value.id in ("self", "cls"):
                continue
            if (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and value.func.id == "super"
            ):
                continue
            attr = node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            attr = node.args[1].value
        if attr is None or not _is_private(attr) or attr in own:
            continue
        if (path, attr) not in FOREIGN_PRIVATE_ALLOWED:
            assert isinstance(node, (ast.Attribute, ast.Call))
            found.append((node.lineno, f"{path}:{node.lineno}: {ast.unparse(node)}"))
    return [hit for _, hit in sorted(found)]


def test_no_module_reaches_into_another_modules_private_attributes() -> None:
    """What one part needs of another is a public method, a named protocol or a function
    of the owning module; private names are used only where they are defined."""
    found = [
        hit
        for p in sorted(PACKAGE.rglob("*.py"))
        for hit in _foreign_private_access(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_private_access_scan_finds_a_planted_reach() -> None:
    """The check above can fail: a reach into another object's private state is found,
    while the module's own privates, ``self``, ``cls`` and ``super()`` are not."""
    source = (
        "class A:\n"
        "    __slots__ = ('_slot',)\n"
        "    def _own(self) -> None:\n"
        "        self._x = 1\n"
        "        super()._parent()\n"
        "def f(a: A, keeper: object) -> None:\n"
        "    a._own(); a._slot\n"
        "    keeper._live.ledger\n"
        "    getattr(keeper, '_keyring')\n"
    )
    assert _foreign_private_access("m.py", source) == [
        "m.py:8: keeper._live",
        "m.py:9: getattr(keeper, '_keyring')",
    ]


def _private_store_imports_of_public_names(path: Path) -> list[str]:
    """``from session_keeper.stores._x import Name`` outside ``stores/`` where ``Name`` is
    one of ``session_keeper.stores``'s public names (``path:line: Name``)."""
    public = set(session_keeper.stores.__all__)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}: {alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("session_keeper.stores._")
        for alias in node.names
        if alias.name in public
    ]


def test_no_module_outside_the_stores_imports_a_public_store_name_from_a_private_module() -> None:
    """A store name the package offers publicly (Store, Event, store_from_url, ...) is
    imported from session_keeper.stores everywhere outside it, as a user would."""
    stores = PACKAGE / "stores"
    found = [
        hit
        for p in sorted(PACKAGE.rglob("*.py"))
        if stores not in p.parents
        for hit in _private_store_imports_of_public_names(p)
    ]
    assert found == []
