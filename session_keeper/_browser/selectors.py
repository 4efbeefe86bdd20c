"""Which attribute names an element's test id, for ``get_by_test_id`` and generated code.

Playwright reads ``data-testid`` unless told otherwise; the setting belongs to the driver
(``playwright.selectors``), so each backend applies it to the driver it starts, before any
page is used. It changes both what ``get_by_test_id`` finds and the locators Playwright
writes for an element (``getByTestId('submit')`` when the element carries one).
"""

from __future__ import annotations

import re

from playwright.async_api import Playwright

from session_keeper.errors import InvalidArgument, InvalidArgumentType

__all__ = ["apply_test_id_attribute", "check_playwright", "check_test_id_attribute"]

# An HTML attribute name as people write them (data-testid, data-qa, x-test:id).
_ATTRIBUTE = re.compile(r"[A-Za-z_:][-A-Za-z0-9_:.]*")


def check_test_id_attribute(value: object) -> str | None:
    """``value`` as a backend's ``test_id_attribute`` (``None``: Playwright's default,
    ``data-testid``); a typed error for anything else."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgumentType("test_id_attribute must be an attribute name or None")
    if not _ATTRIBUTE.fullmatch(value) or len(value) > 100:
        raise InvalidArgument(
            "test_id_attribute must be an HTML attribute name, e.g. 'data-testid'"
        )
    return value


def check_playwright(value: object) -> Playwright | None:
    """``value`` as a backend's ``playwright`` (a started driver, or ``None``); a typed
    error for anything else (an unstarted ``async_playwright()`` included)."""
    if value is None or isinstance(value, Playwright):
        return value
    raise InvalidArgumentType(
        "playwright must be a started Playwright driver (what `async with async_playwright()`"
        " gives) or None"
    )


def apply_test_id_attribute(playwright: Playwright, name: str | None) -> None:
    """Make ``name`` the driver's test id attribute (nothing for ``None``)."""
    if name is not None:
        playwright.selectors.set_test_id_attribute(name)
