"""The table of event kinds is the whole truth: every kind the package writes is in it,
every kind in it is written somewhere, and each has its own one-line meaning."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

from session_keeper._model.events import EVENT_KINDS, EventKind, event_meaning

PACKAGE = Path(__file__).resolve().parents[2] / "session_keeper"
TABLE = PACKAGE / "_model" / "events.py"


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _constants(trees: list[tuple[Path, ast.Module]]) -> dict[str, set[str]]:
    """Every module-level ``NAME = "text"`` (annotated or not), by name."""
    out: dict[str, set[str]] = {}
    for _path, tree in trees:
        for node in tree.body:
            if isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(
                node.value, ast.Constant
            ):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                        out.setdefault(target.id, set()).add(node.value.value)
    return out


def _callee(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _kind_expressions(tree: ast.Module) -> Iterator[ast.expr]:
    """Where a module names the kind of an event it writes: ``Event(kind=...)``, the job
    loop's ``self.event(kind, ...)`` and ``self.move(..., kind=...)``, the store's
    ``insert_event({"kind": ...})`` and the lease steps' event dicts,
    ``job_event(base, kind, ...)``, a constant annotated ``EventKind`` and what a
    function returning ``EventKind`` returns."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = _callee(node)
            if callee in ("Event", "event", "move"):
                yield from (k.value for k in node.keywords if k.arg == "kind")
            if callee == "event" and node.args:
                yield node.args[0]
            if callee == "job_event" and len(node.args) > 1:
                yield node.args[1]
            if callee in ("insert_event", "release_lease", "take_lease"):
                # The event's fields as a dict literal: insert_event's first argument,
                # release_lease's last (its lease's rows and key come first),
                # take_lease's ``event`` keyword.
                dicts = [*node.args, *(k.value for k in node.keywords if k.arg == "event")]
                for arg in (a for a in dicts if isinstance(a, ast.Dict)):
                    for key, value in zip(arg.keys, arg.values, strict=True):
                        if isinstance(key, ast.Constant) and key.value == "kind":
                            yield value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            if isinstance(node.annotation, ast.Name) and node.annotation.id == "EventKind":
                yield node.value
        elif isinstance(node, ast.FunctionDef):
            returns = node.returns
            if isinstance(returns, ast.Name) and returns.id == "EventKind":
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Return) and inner.value is not None:
                        yield inner.value


def written_kinds() -> dict[str, list[str]]:
    """Every kind string the package writes, with where (``path:line``); a kind built at
    run time (an f-string, a concatenation) is reported under ``"<built>"``."""
    trees = list(_modules())
    # The table's named kinds (the audit chain's) are constants a writer names; the
    # table itself writes nothing.
    constants = _constants(trees)
    found: dict[str, list[str]] = {}
    for path, tree in trees:
        if path == TABLE:
            continue
        for expr in _kind_expressions(tree):
            where = f"{path.relative_to(PACKAGE.parent)}:{expr.lineno}"
            if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
                found.setdefault(expr.value, []).append(where)
            elif isinstance(expr, ast.Name) and expr.id in constants:
                for value in constants[expr.id]:
                    found.setdefault(value, []).append(where)
            elif isinstance(expr, ast.JoinedStr | ast.BinOp):
                found.setdefault("<built>", []).append(where)
            # Anything else passes a kind through (a parameter, a stored row's kind):
            # mypy holds those to EventKind.
    return found


def test_every_kind_the_package_writes_is_in_the_table_and_every_kind_in_it_is_written() -> None:
    """Scanning the package's writers finds exactly the table's kinds: none outside it,
    none built at run time, and no kind in it that nothing writes."""
    found = written_kinds()
    unknown = {k: v for k, v in found.items() if k not in EVENT_KINDS}
    assert unknown == {}
    assert sorted(EVENT_KINDS - found.keys()) == []


def test_each_kind_has_a_meaning_of_its_own() -> None:
    """event_meaning describes every kind in one line, no two alike."""
    kinds: tuple[EventKind, ...] = get_args(EventKind)
    assert len(set(kinds)) == len(kinds) == len(EVENT_KINDS)
    meanings = [event_meaning(kind) for kind in kinds]
    assert all(m and "\n" not in m for m in meanings)
    assert len(set(meanings)) == len(meanings)
