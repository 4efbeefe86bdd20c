"""Events go to the store *and* to stdlib logging, through this one helper."""

from __future__ import annotations

import json
import logging

from session_keeper._telemetry import event_fields
from session_keeper._util.redact import scrubbing_logger
from session_keeper.stores._records import Event

#: The logger every stored event is also written to.
EVENT_LOGGER = scrubbing_logger("session_keeper.events")


def log_event(event: Event) -> None:
    """Log ``event`` at INFO on ``session_keeper.events``.

    The message is the event as one JSON object (greppable, parseable); the record
    also carries it as ``record.event`` for structured handlers. The event holds
    fingerprints and names only, so nothing secret is logged. Its columns (and the names
    in its data: conversation, site, rule ...) are also the record's structured fields
    (``session_keeper.job.id``, ``session_keeper.conversation`` ...), as every library
    record's are.
    """
    if not EVENT_LOGGER.isEnabledFor(logging.INFO):
        return
    payload = event.to_dict()
    # Skip the empty fields: the log line stays short and the JSON stays complete.
    compact = {k: v for k, v in payload.items() if v is not None and v != {}}
    EVENT_LOGGER.info(
        "%s",
        json.dumps(compact, default=str, ensure_ascii=False),
        extra={"event": payload, **event_fields(payload)},
    )
