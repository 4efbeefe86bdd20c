"""The structured fields every library log record carries (``record.__dict__`` keys).

A record gets the fields of what the library is doing when it logs: the conversation of
the turn or tab operation, the job, step, attempt and revision of a job step, the browser
generation. They are the names of the span attributes (``session_keeper.conversation``,
``session_keeper.job.id`` ...), set as flat keys on the record, so a JSON formatter,
structlog's ``ExtraAdder`` or OpenTelemetry's logging bridge shows them unchanged. Values
are names and numbers only, never a secret.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["LogFieldsFilter", "current_fields", "log_extra", "log_fields"]

#: The fields of the enclosing blocks, innermost last. Entering a block only adds its
#: layer; the layers are merged when a record (or a caller) reads them, which is rare
#: next to the turns that enter a block each.
_LAYERS: contextvars.ContextVar[tuple[Mapping[str, object], ...]] = contextvars.ContextVar(
    "session_keeper_log_fields", default=()
)

#: ``job__id`` -> ``session_keeper.job.id``, for the handful of keys the library uses.
_NAMES: dict[str, str] = {}


def _name(key: str) -> str:
    name = _NAMES.get(key)
    if name is None:
        name = _NAMES[key] = "session_keeper." + key.replace("__", ".")
    return name


class log_fields:  # noqa: N801 -- used as a function: ``with log_fields(...):``
    """Within the block, every library log record carries ``fields`` (``None`` ones skipped).

    Keys are written with ``__`` for ``.``: ``job__id=`` becomes ``session_keeper.job.id``.
    A class, not a generator: every turn and tab operation enters one. An inner block's
    field wins over an outer one's of the same name (unless it is ``None``).
    """

    __slots__ = ("_fields", "_token")

    def __init__(self, **fields: object) -> None:
        self._fields = fields
        self._token: contextvars.Token[tuple[Mapping[str, object], ...]] | None = None

    def __enter__(self) -> None:
        self._token = _LAYERS.set((*_LAYERS.get(), self._fields))

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _LAYERS.reset(self._token)
            self._token = None


def current_fields() -> Mapping[str, object]:
    """The fields log records get here and now."""
    merged: dict[str, object] = {}
    for layer in _LAYERS.get():
        for key, value in layer.items():
            if value is not None:
                merged[_name(key)] = value
    return MappingProxyType(merged)


class LogFieldsFilter(logging.Filter):
    """Adds the context's fields to a record; fields the call passed in ``extra`` win."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _LAYERS.get():
            have = record.__dict__
            for key, value in current_fields().items():
                have.setdefault(key, value)
        return True


def log_extra(**fields: object) -> dict[str, object]:
    """``extra=`` for one log call: ``fields`` under their structured names, ``None`` ones
    skipped (see :func:`log_fields`)."""
    return {_name(k): v for k, v in fields.items() if v is not None}
