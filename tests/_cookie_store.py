"""Waiting for Chromium to write its cookie store to the profile, for restart tests.

Measured here: Chromium commits cookie changes to ``Default/Cookies`` in batches (about
every 30 s) and a close soon after a ``Set-Cookie`` can leave the change out of the
next launch's jar. A test about what a *site* did across restarts waits until the
change is on disk, rather than for a fixed time. Names are stored in plain text (values
are encrypted), so a name is found by a byte search; the file is held open by Chromium.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

#: Longer than Chromium's commit interval.
FLUSH_LIMIT_S = 45.0
_POLL_S = 0.25


def store_bytes(profile: Path) -> bytes:
    """The profile's cookie store as it is on disk now (empty before the first write)."""
    path = profile / "Default" / "Cookies"
    return path.read_bytes() if path.exists() else b""


async def wait_for_cookie_name(profile: Path, name: str) -> None:
    """Wait until a cookie called ``name`` is in the profile's store on disk."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FLUSH_LIMIT_S
    while True:
        if name.encode() in store_bytes(profile):
            return
        if loop.time() > deadline:
            raise AssertionError(f"Chromium never wrote cookie {name!r} to {profile}")
        await asyncio.sleep(_POLL_S)


async def wait_for_store_change(profile: Path, before: bytes) -> None:
    """Wait (bounded) until the store on disk differs from ``before``: a commit happened.

    Returns at the limit too: the change may have been written before ``before`` was read.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FLUSH_LIMIT_S
    while True:
        if store_bytes(profile) != before or loop.time() >= deadline:
            return
        await asyncio.sleep(_POLL_S)
