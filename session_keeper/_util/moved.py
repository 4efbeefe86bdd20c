"""Public names that moved to another namespace: the old path works for one release,
with a :class:`DeprecationWarning` naming the new one (a module ``__getattr__``)."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping

__all__ = ["moved_names"]


def moved_names(module: str, homes: Mapping[str, str]) -> Callable[[str], object]:
    """What ``module``'s ``__getattr__`` calls: each name in ``homes`` is looked up in its
    new home, with a warning; any other name is an :class:`AttributeError` as usual."""

    def lookup(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} moved to {home}.{name}; the old path is removed in the next release",
            DeprecationWarning,
            stacklevel=3,  # past this and the module's __getattr__: the importer
        )
        return getattr(importlib.import_module(home), name)

    return lookup
