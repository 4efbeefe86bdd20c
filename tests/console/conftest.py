"""Console tests keep screenshots of every console page under tests/console/artifacts/."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ._world import World, world_in


@pytest.fixture
def artifacts(request: pytest.FixtureRequest) -> Path:
    """A directory for this test's screenshots (gitignored; CI may upload it)."""
    name: str = request.node.name
    where = Path(__file__).parent / "artifacts" / name
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    """Console on port 0 over a keeper, store and job loop, billing signed in."""
    async with world_in(tmp_path) as built:
        yield built
