"""Console tests keep screenshots of every console page under tests/console/artifacts/."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def artifacts(request: pytest.FixtureRequest) -> Path:
    """A directory for this test's screenshots (gitignored; CI may upload it)."""
    name: str = request.node.name
    where = Path(__file__).parent / "artifacts" / name
    where.mkdir(parents=True, exist_ok=True)
    return where
