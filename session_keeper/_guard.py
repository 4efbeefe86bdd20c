"""The Guard: :mod:`._guard_policy` decides, :mod:`._guard_playwright` enforces.

Kept as the one import point for the rest of the package.
"""

from __future__ import annotations

from session_keeper._guard_blocks import BLOCK_EVENT, BlockRecord
from session_keeper._guard_playwright import Guard
from session_keeper._guard_policy import READ_METHODS, BlockRule, GuardPolicy, GuardVerdict

__all__ = [
    "BLOCK_EVENT",
    "READ_METHODS",
    "BlockRecord",
    "BlockRule",
    "Guard",
    "GuardPolicy",
    "GuardVerdict",
]
