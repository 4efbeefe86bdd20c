"""Keeper testing mode: observe the keeper's background writer and tab queues.

For tests that need to see a moment a public call would hide: the background write
having run (and perhaps failed) before the next awaited call reports it, and the
per-conversation tab queues being empty once no call is in flight.
"""

from __future__ import annotations

from session_keeper._keeper.facade.keeper import drain_keeper_writes, held_tab_locks

__all__ = ["drain_keeper_writes", "held_tab_locks"]
