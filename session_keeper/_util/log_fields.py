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

_FIELDS: contextvars.ContextVar[Mapping[str, object]] = contextvars.ContextVar(
    "session_keeper_log_fields", default=MappingProxyType({})
)


class log_fields:  # noqa: N801 -- used as a function: ``with log_fields(...):``
    """Within the block, every library log record carries ``fields`` (``None`` ones skipped).

    Keys are written with ``__`` for ``.``: ``job__id=`` becomes ``session_keeper.job.id``.
    A class, not a generator: every turn and tab operation enters one.
    """

    __slots__ = ("_fields", "_token")

    def __init__(self, **fields: object) -> None:
        self._fields = fields
        self._token: contextvars.Token[Mapping[str, object]] | None = None

    def __enter__(self) -> None:
        merged = dict(_FIELDS.get())
        for key, value in self._fields.items():
            if value is not None:
                merged["session_keeper." + key.replace("__", ".")] = value
        self._token = _FIELDS.set(MappingProxyType(merged))

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _FIELDS.reset(self._token)
            self._token = None


def current_fields() -> Mapping[str, object]:
    """The fields log records get here and now."""
    return _FIELDS.get()


class LogFieldsFilter(logging.Filter):
    """Adds the context's fields to a record; fields the call passed in ``extra`` win."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = _FIELDS.get()
        if fields:
            have = record.__dict__
            for key, value in fields.items():
                have.setdefault(key, value)
        return True


def log_extra(**fields: object) -> dict[str, object]:
    """``extra=`` for one log call: ``fields`` under their structured names, ``None`` ones
    skipped (see :func:`log_fields`)."""
    return {"session_keeper." + k.replace("__", "."): v for k, v in fields.items() if v is not None}
