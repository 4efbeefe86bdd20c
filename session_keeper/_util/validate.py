"""Argument checks shared by the public entry points: typed errors, before any change.

Each check raises :class:`InvalidArgumentType` for the wrong type and
:class:`InvalidArgument` for a wrong value, so a bad call never reaches state (and
never surfaces as a raw ``TypeError``, ``AttributeError`` or ``OverflowError``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from session_keeper.errors import InvalidArgument, InvalidArgumentType


def check_collection(value: object, what: str) -> list[Any]:
    """``value`` as a list: a collection, but neither ``None`` nor a single ``str``."""
    if isinstance(value, (str, bytes)):
        raise InvalidArgumentType(
            f"{what} must be a collection, not a single {type(value).__name__}"
        )
    if value is None or isinstance(value, Mapping) or not isinstance(value, Iterable):
        raise InvalidArgumentType(f"{what} must be a collection, not {type(value).__name__}")
    return list(value)


def check_mapping(value: object, what: str) -> Mapping[Any, Any]:
    """``value`` when it is a mapping (``None`` is not one)."""
    if not isinstance(value, Mapping):
        raise InvalidArgumentType(f"{what} must be a mapping, not {type(value).__name__}")
    return value


def check_age(older_than: object) -> timedelta:
    """A retention pass's ``older_than``: a ``timedelta``, zero or more."""
    if not isinstance(older_than, timedelta):
        raise InvalidArgumentType(
            f"older_than must be a timedelta, not {type(older_than).__name__}"
        )
    if older_than < timedelta(0):
        raise InvalidArgument("older_than must not be negative")
    return older_than


def check_duration(value: object, what: str, *, after: datetime | None = None) -> timedelta:
    """A positive ``timedelta``; with ``after``, one that still gives a representable instant."""
    if not isinstance(value, timedelta):
        raise InvalidArgumentType(f"{what} must be a timedelta, not {type(value).__name__}")
    if value <= timedelta(0):
        raise InvalidArgument(f"{what} must be positive")
    if after is not None:
        try:
            after + value
        except OverflowError:
            raise InvalidArgument(f"{what} is too long: it ends after year 9999") from None
    return value
