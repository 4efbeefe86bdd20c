"""Fixtures of the Guard's tests: the SameSite=None (HTTPS) sites and browsers wired to them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from session_keeper import PlaywrightBackend
from session_keeper.testing import LocalSites

from ..conftest import BackendFactory


@pytest.fixture(scope="session")
def secure_sites() -> Iterator[LocalSites]:
    """The local sites over HTTPS, billing signing in with a ``SameSite=None; Secure`` cookie."""
    with LocalSites(samesite="None") as running:
        yield running


@pytest.fixture
def secure_backend(
    playwright_backend: BackendFactory, secure_sites: LocalSites
) -> Callable[..., PlaywrightBackend]:
    """A factory of test browsers that reach :func:`secure_sites` (and send 3rd-party cookies)."""

    def make(**kwargs: Any) -> PlaywrightBackend:
        kwargs.setdefault("host_resolver_rules", secure_sites.host_resolver_rules)
        return playwright_backend(**kwargs)

    return make
