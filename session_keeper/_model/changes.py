"""The keys a book changed since its saver last took them.

Each book of the keeper's state (grants, logins, borrow requests, conversations) marks
the keys it changes *as it changes them*, so a save writes those rows and looks at
nothing else: its cost follows the change, never the size of the state.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class Changes(Generic[K]):
    """A set of changed keys, taken whole by a save (and put back if it fails)."""

    __slots__ = ("_keys",)

    def __init__(self) -> None:
        self._keys: set[K] = set()

    def add(self, key: K) -> None:
        """``key``'s row may differ from what was written."""
        self._keys.add(key)

    def update(self, keys: Iterable[K]) -> None:
        """Every one of ``keys`` may differ from what was written."""
        self._keys.update(keys)

    def take(self) -> set[K]:
        """Every marked key, unmarking them (a failed save gives them back by ``update``)."""
        taken, self._keys = self._keys, set()
        return taken

    def __bool__(self) -> bool:
        return bool(self._keys)
