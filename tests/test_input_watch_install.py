"""The input watch's install into a context: its two steps sent side by side, each done once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from playwright.async_api import BrowserContext

from session_keeper._browser.page_activity import BINDING, PageActivity


class Context:
    """Records the install calls a PageActivity makes; the binding fails once when told."""

    def __init__(self, *, binding_fails: bool) -> None:
        self.calls: list[str] = []
        self.binding_fails = binding_fails
        self.in_flight = 0
        self.overlapped = False

    async def _step(self, name: str) -> None:
        self.calls.append(name)
        self.in_flight += 1
        self.overlapped |= self.in_flight > 1
        await asyncio.sleep(0.01)
        self.in_flight -= 1

    async def expose_binding(self, name: str, callback: Any) -> None:
        assert name == BINDING
        await self._step("binding")
        if self.binding_fails:
            self.binding_fails = False
            raise RuntimeError("the page went away")

    async def add_init_script(self, script: str) -> None:
        assert "__sessionKeeperInputWatch" in script
        await self._step("script")


def activity() -> PageActivity:
    async def answers() -> None:
        return None

    return PageActivity(lambda: datetime.now(UTC), lambda _: None, lambda: False, answers)


async def test_the_binding_and_the_script_are_installed_side_by_side_once() -> None:
    """One install sends both steps at once (a new browser's first page waits for it), and
    an install after it sends nothing."""
    context = Context(binding_fails=False)
    watch = activity()
    await watch.installing(cast("BrowserContext", context))
    assert sorted(context.calls) == ["binding", "script"]
    assert context.overlapped
    await watch.installing(cast("BrowserContext", context))
    assert sorted(context.calls) == ["binding", "script"]


async def test_a_failed_step_is_retried_and_a_finished_one_is_not_repeated() -> None:
    """The binding failing raises once both steps ended; the next install retries the
    binding only (the script, done, is not added twice)."""
    context = Context(binding_fails=True)
    watch = activity()
    with pytest.raises(RuntimeError):
        await watch.installing(cast("BrowserContext", context))
    assert sorted(context.calls) == ["binding", "script"]
    await watch.installing(cast("BrowserContext", context))
    assert sorted(context.calls) == ["binding", "binding", "script"]
