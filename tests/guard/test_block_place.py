"""A navigation finds the Guard's record of refusing it: the record and the look-up spell a
URL's place (origin and path) the same way, whatever the URL (pure: no browser)."""

from __future__ import annotations

from typing import Any

import pytest

from session_keeper._keeper.guard_link.block_log import BlockLog
from session_keeper._keeper.guard_link.navigation_guard import navigation_block
from session_keeper._leaf.blocks import BlockRecord
from session_keeper._model.verdict import GuardVerdict
from session_keeper._telemetry import Telemetry
from session_keeper.testing import FakeClock


class _Watched:
    """A keeper as the navigation checks see it, with the block log as its Guard's."""

    def __init__(self, log: BlockLog) -> None:
        self._log = log

    @property
    def navigation_guard(self) -> _Watched:
        return self

    @property
    def blocks(self) -> tuple[BlockRecord, ...]:
        return self._log.blocks

    @property
    def block_log(self) -> BlockLog:
        return self._log

    def navigation_refusal(self, page: Any, since: int) -> BlockRecord | None:
        return None


@pytest.mark.parametrize(
    "url",
    [
        "https://billing.example/invoices?id=7#top",
        "http://Billing.EXAMPLE:8080/pay",
        "http://billing.example",
        "file:///" + "deep/" * 60 + "id_rsa",  # a path longer than a record keeps
        "data:text/html,<p>secret-token-123</p>",
        "chrome://settings/clearBrowserData",
    ],
)
async def test_a_refused_navigation_is_found_by_the_url_it_was_refused_at(url: str) -> None:
    """The block the log recorded for a document at ``url`` is the one the navigation
    check finds for that same ``url``."""
    log = BlockLog(store=None, clock=FakeClock(), telemetry=Telemetry(enabled=False), audit=None)
    verdict = GuardVerdict(allowed=False, rule="grant", reason="no grant")
    await log.record("c1", "https://other.example/", "GET", verdict, "document")
    block = await log.record("c1", url, "GET", verdict, "document")
    assert navigation_block(_Watched(log), "c1", url, since=0) is block
    assert navigation_block(_Watched(log), "c2", url, since=0) is None
