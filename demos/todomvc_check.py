"""The TodoMVC persistence check, on a real browser against DemoSites' ``todo.example``.

Usage: ``python demos/todomvc_check.py`` prints a readable report; exits 1 if any check
fails. The tests (``tests/test_todomvc.py``) import the check from here.

It repeats the bounded observation of the reliable-agents article ("What did the
TodoMVC reload check establish?") and extends it across a browser restart:

1. start from the eight existing rows; the new, uniquely named item is absent;
2. create the item: it appears exactly once, unchecked;
3. aim at an intentionally missing exact target (the new item's text minus its last
   character, which a substring match *would* find): zero matches, zero actions;
4. complete only the new item: checked, with the ``completed`` class;
5. reload: still checked, ``completed`` and struck through;
6. restart the browser (clean close, relaunch on the same profile): the same.

After every operation *all* rows are compared, not just the new one: the original
rows must keep their text, checked state and order, so a bulk toggle, an edit or a
deletion that a successful new-item check would miss is caught.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
from playwright.async_api import Locator, Page

# Run as a script (python demos/todomvc_check.py): the repository root holds `demos`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from demos.sites import DemoSites
from session_keeper import PlaywrightBackend
from session_keeper._browser.playwright import PlaywrightSession
from session_keeper.errors import InvalidArgument

__all__ = ["CheckResult", "TodoRow", "compare_rows", "read_rows", "run_todomvc_check"]

NewItemState = Literal["absent", "unchecked", "checked"]

_READ_ROWS = """() => Array.from(document.querySelectorAll('.todo-list li')).map(li => {
  const label = li.querySelector('label');
  return {
    text: label ? label.textContent : '',
    checked: !!(li.querySelector('.toggle') || {}).checked,
    completed: li.classList.contains('completed'),
    line_through: label ? getComputedStyle(label).textDecorationLine.includes('line-through')
                        : false,
  };
})"""


@attrs.frozen
class TodoRow:
    """One TodoMVC row as the page shows it."""

    text: str
    checked: bool
    #: The row carries the ``completed`` class.
    completed: bool
    #: The label is rendered struck through.
    line_through: bool

    def __str__(self) -> str:
        box = "[x]" if self.checked else "[ ]"
        marks = " completed" if self.completed else ""
        marks += " struck" if self.line_through else ""
        return f"{box} {self.text}{marks}"


@attrs.frozen
class CheckResult:
    """The outcome of comparing all rows after one operation."""

    step: str
    passed: bool
    #: What was observed (and, when failing, what differed).
    details: tuple[str, ...]
    rows: tuple[TodoRow, ...]


async def read_rows(page: Page) -> tuple[TodoRow, ...]:
    """Every row of the TodoMVC list, in order (one round trip)."""
    raw: list[dict[str, Any]] = await page.evaluate(_READ_ROWS)
    return tuple(TodoRow(**r) for r in raw)


def exact_rows(page: Page, text: str) -> Locator:
    """Rows whose label is exactly ``text`` (not a substring match)."""
    return page.locator(".todo-list li").filter(has=page.get_by_text(text, exact=True))


def compare_rows(
    step: str,
    originals: Sequence[TodoRow],
    rows: Sequence[TodoRow],
    new_text: str,
    new_state: NewItemState,
) -> CheckResult:
    """Compare every row after ``step``: originals unchanged and in order, the new item as asked.

    Passes only when the rows are exactly the original rows (same text, checked state
    and ``completed`` class, same order) followed by the new item when it should
    exist, appearing once, in ``new_state`` (a checked item must also be struck through).
    """
    problems: list[str] = []
    new_rows = [r for r in rows if r.text == new_text]
    others = [r for r in rows if r.text != new_text]

    def key(r: TodoRow) -> tuple[str, bool, bool]:
        return (r.text, r.checked, r.completed)

    if [key(r) for r in others] != [key(r) for r in originals]:
        for i in range(max(len(others), len(originals))):
            want = str(originals[i]) if i < len(originals) else "(nothing)"
            got = str(others[i]) if i < len(others) else "(missing)"
            if i >= len(others) or i >= len(originals) or key(others[i]) != key(originals[i]):
                problems.append(f"original row {i + 1}: expected {want}, found {got}")
    expected_count = 0 if new_state == "absent" else 1
    if len(new_rows) != expected_count:
        problems.append(f"new item appears {len(new_rows)} times, expected {expected_count}")
    elif new_rows:
        row = new_rows[0]
        want_checked = new_state == "checked"
        if (row.checked, row.completed) != (want_checked, want_checked):
            problems.append(f"new item is {row}, expected {'checked' if want_checked else 'open'}")
        if want_checked and not row.line_through:
            problems.append("new item is checked but not struck through")
        if rows[-1] != row:
            problems.append("new item is not the last row")

    details = [
        f"{len(originals)} original rows "
        + ("unchanged, in order" if not any("original" in p for p in problems) else "CHANGED"),
        f"new item: {new_state if not problems else 'see below'}"
        + (f" ({new_rows[0]})" if len(new_rows) == 1 else ""),
    ]
    return CheckResult(
        step=step, passed=not problems, details=tuple(details + problems), rows=tuple(rows)
    )


async def _open_todo(session: PlaywrightSession, sites: DemoSites) -> Page:
    page = await session.open_page("todo")
    await session.goto(page, sites.url("todo.example", "/"))
    await page.locator(".todo-list li").first.wait_for()
    return page


async def run_todomvc_check(
    backend: PlaywrightBackend, sites: DemoSites, *, item: str | None = None
) -> list[CheckResult]:
    """Run the six-step check with ``backend`` (a fresh profile) and return every result.

    Launches and finally closes the browser itself; ``item`` is the new item's text
    (default: a unique ``agent-check-<hex>``; at least two characters).
    """
    new_text = item if item is not None else f"agent-check-{secrets.token_hex(4)}"
    if len(new_text.strip()) < 2 or new_text != new_text.strip():
        raise InvalidArgument("the new item's text needs two or more characters, no edge spaces")
    missing = new_text[:-1]
    results: list[CheckResult] = []
    session = await backend.launch()
    try:
        page = await _open_todo(session, sites)
        originals = await read_rows(page)
        first = compare_rows("initial", originals, originals, new_text, "absent")
        if len(originals) != 8:
            first = attrs.evolve(
                first,
                passed=False,
                details=(*first.details, f"expected 8 existing rows, found {len(originals)}"),
            )
        results.append(first)

        await page.locator(".new-todo").fill(new_text)
        await page.locator(".new-todo").press("Enter")
        results.append(
            compare_rows("create", originals, await read_rows(page), new_text, "unchecked")
        )

        # An exact target that does not exist: act only on exactly one match.
        matches = await exact_rows(page, missing).count()
        actions = 0
        if matches == 1:
            await exact_rows(page, missing).locator(".toggle").check()
            actions += 1
        missing_result = compare_rows(
            "missing target", originals, await read_rows(page), new_text, "unchecked"
        )
        ok = matches == 0 and actions == 0
        results.append(
            attrs.evolve(
                missing_result,
                passed=missing_result.passed and ok,
                details=(
                    f"{missing!r}: {matches} matches, {actions} actions",
                    *missing_result.details,
                ),
            )
        )

        target = exact_rows(page, new_text)
        if await target.count() == 1:
            await target.locator(".toggle").check()
        results.append(
            compare_rows("complete", originals, await read_rows(page), new_text, "checked")
        )

        await page.reload()
        await page.locator(".todo-list li").first.wait_for()
        results.append(
            compare_rows("reload", originals, await read_rows(page), new_text, "checked")
        )

        await session.close()
        session = await backend.launch()
        page = await _open_todo(session, sites)
        results.append(
            compare_rows("restart", originals, await read_rows(page), new_text, "checked")
        )
    finally:
        await session.close()
    return results


async def main() -> int:
    with DemoSites() as sites, tempfile.TemporaryDirectory(prefix="sk-todo-") as profile:
        backend = PlaywrightBackend(profile, host_resolver_rules=sites.host_resolver_rules)
        try:
            results = await run_todomvc_check(backend, sites)
        finally:
            await backend.aclose()

    print("TodoMVC persistence check (todo.example on local Chromium)")
    print("original rows:")
    for i, row in enumerate(results[0].rows, 1):
        print(f"  {i}. {row}")
    for result in results:
        print(f"{'PASS' if result.passed else 'FAIL'}  {result.step}")
        for line in result.details:
            print(f"      {line}")
    print("final rows:")
    for i, row in enumerate(results[-1].rows, 1):
        print(f"  {i}. {row}")
    passed = sum(r.passed for r in results)
    print(f"{passed}/{len(results)} checks passed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
