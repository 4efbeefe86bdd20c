"""The TodoMVC persistence check: the comparison itself, then the real run on Chromium."""

from __future__ import annotations

import pytest

from demos.sites import TODO_SEED, DemoSites
from demos.todomvc_check import (
    NewItemState,
    TodoRow,
    compare_rows,
    run_todomvc_check,
)

from .conftest import BackendFactory

NEW = "agent-check-unit"
ORIGINALS = tuple(TodoRow(text, done, done, done) for text, done in TODO_SEED)
DONE = TodoRow(NEW, True, True, True)
OPEN = TodoRow(NEW, False, False, False)


def flip(row: TodoRow) -> TodoRow:
    return TodoRow(row.text, not row.checked, not row.completed, not row.line_through)


def test_compare_accepts_the_expected_rows() -> None:
    """Unchanged originals plus the new item in the asked state pass, at every step shape."""
    assert compare_rows("initial", ORIGINALS, ORIGINALS, NEW, "absent").passed
    assert compare_rows("create", ORIGINALS, (*ORIGINALS, OPEN), NEW, "unchecked").passed
    assert compare_rows("reload", ORIGINALS, (*ORIGINALS, DONE), NEW, "checked").passed


@pytest.mark.parametrize(
    ("damage", "rows", "state"),
    [
        ("bulk toggle", (*map(flip, ORIGINALS), DONE), "checked"),
        ("one original toggled", (flip(ORIGINALS[0]), *ORIGINALS[1:], DONE), "checked"),
        ("edited text", (TodoRow("Buy oat milk", False, False, False), *ORIGINALS[1:]), "absent"),
        ("deleted row", (*ORIGINALS[:3], *ORIGINALS[4:], DONE), "checked"),
        ("reordered", (ORIGINALS[1], ORIGINALS[0], *ORIGINALS[2:], DONE), "checked"),
        ("new item twice", (*ORIGINALS, OPEN, OPEN), "unchecked"),
        ("new item missing", ORIGINALS, "unchecked"),
        ("new item not completed", (*ORIGINALS, OPEN), "checked"),
        ("checked without the class", (*ORIGINALS, TodoRow(NEW, True, False, False)), "checked"),
        ("completed but not struck", (*ORIGINALS, TodoRow(NEW, True, True, False)), "checked"),
        ("new item present too early", (*ORIGINALS, OPEN), "absent"),
    ],
)
def test_compare_catches_damage(
    damage: str, rows: tuple[TodoRow, ...], state: NewItemState
) -> None:
    """Each kind of damage a new-item-only check could miss fails the all-rows comparison."""
    result = compare_rows(damage, ORIGINALS, rows, NEW, state)
    assert not result.passed
    assert len(result.details) > 2  # the two summary lines plus what differed


@pytest.mark.chromium
async def test_todomvc_persists_through_reload_and_restart(
    playwright_backend: BackendFactory, sites: DemoSites
) -> None:
    """On real Chromium the new item survives reload and restart; the eight rows never change."""
    results = await run_todomvc_check(playwright_backend(), sites, item="agent-check-pytest")
    assert [r.step for r in results] == [
        "initial",
        "create",
        "missing target",
        "complete",
        "reload",
        "restart",
    ]
    failures = [(r.step, r.details) for r in results if not r.passed]
    assert failures == []
    assert results[0].rows == ORIGINALS
    assert results[2].details[0] == "'agent-check-pytes': 0 matches, 0 actions"
    assert results[-1].rows == (*ORIGINALS, TodoRow("agent-check-pytest", True, True, True))
