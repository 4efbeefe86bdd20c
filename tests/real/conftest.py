"""Fixtures of the real-Chromium tests: otp.example (a Django app with django-otp, in a
process of its own), started when a test asks for it and shared by the test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from demos.sites.otp_django import OtpSite

#: otp.example's TOTP time step in these tests, seconds: short, so a test waiting for a
#: fresh window waits seconds, not half-minutes; the keeper learns it from the otpauth URI
#: in its vault. Twelve: the keeper's margin stays 5 s, and a renewal that waited for a
#: window has 7 s to reach the code field and type that window's code. Six (a 3 s margin,
#: 3 s to type) was too short once in CI: the next code came a window late.
OTP_STEP_S = 12


@pytest.fixture(scope="session")
def otp_site() -> Iterator[OtpSite]:
    """otp.example for the whole test session (migrated and seeded once), its devices on
    :data:`OTP_STEP_S`-second windows."""
    with OtpSite(step=OTP_STEP_S) as running:
        yield running
