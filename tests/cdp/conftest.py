"""Remote Chromium (started by the test, not the keeper) behind a cuttable proxy."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from session_keeper.testing import LocalSites

from ._remote import CutProxy, RemoteChromium


@pytest.fixture
async def remote(sites: LocalSites, chromium_path: str) -> AsyncIterator[RemoteChromium]:
    """A Chromium with ``--remote-debugging-port=0`` on its own profile; killed at the end."""
    browser = RemoteChromium(chromium_path, sites.host_resolver_rules)
    await browser.start()
    yield browser
    await browser.stop()


@pytest.fixture
async def proxy(remote: RemoteChromium) -> AsyncIterator[CutProxy]:
    """A TCP proxy to the remote browser's DevTools port that the test can cut."""
    cut = CutProxy(remote.port)
    await cut.start()
    yield cut
    await cut.stop()
