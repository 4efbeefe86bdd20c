"""Fixtures of the real-Chromium tests: otp.example (a Django app with django-otp, in a
process of its own), started when a test asks for it and shared by the test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from demos.sites.otp_django import OtpSite


@pytest.fixture(scope="session")
def otp_site() -> Iterator[OtpSite]:
    """otp.example for the whole test session (migrated and seeded once)."""
    with OtpSite() as running:
        yield running
