"""Keeper testing mode: observe the keeper's background writer and tab queues.

For tests that need to see a moment a public call would hide: the background write
having run (and perhaps failed) before the next awaited call reports it, and the
per-conversation tab queues being empty once no call is in flight.
"""

from __future__ import annotations

from typing import Any

from session_keeper._keeper.keeper import SessionKeeper


async def drain_keeper_writes(keeper: SessionKeeper[Any]) -> None:
    """Wait until the keeper's background writer is idle; raise nothing it failed with.

    A failure stays kept for the keeper's next awaited call (see ``SessionKeeper``).
    """
    await keeper._persist.writes.drain()


def held_tab_locks(keeper: SessionKeeper[Any]) -> int:
    """How many conversations hold per-conversation tab state (a call in flight or queued)."""
    return keeper._tabs.held_locks
