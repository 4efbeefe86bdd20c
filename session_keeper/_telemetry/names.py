"""Attribute names and the metric instruments, in one table.

OpenTelemetry semantic-convention names where one exists (``url.scheme``,
``server.address``, ``url.path``, ``db.system.name``, ``error.type``), else
``session_keeper.*``. A URL is reported as scheme, host, port and path only: its query
string and fragment may carry a token, and user-info a password.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from session_keeper._util.redact import redact_url

__all__ = ["COUNTERS", "EVENT_FIELDS", "HISTOGRAMS", "event_fields", "url_attributes"]

#: name -> (unit, description) of every counter the library adds to.
COUNTERS: Final[dict[str, tuple[str, str]]] = {
    "session_keeper.browser.restarts": ("{restart}", "Browsers relaunched (a new generation)"),
    "session_keeper.losses": ("{loss}", "Losses told to conversations, by kind"),
    "session_keeper.guard.admissions": ("{request}", "Requests the Guard let leave"),
    "session_keeper.guard.refusals": ("{request}", "Requests the Guard refused, by rule"),
    "session_keeper.lease_losses": ("{loss}", "Leases lost (kind: job or profile)"),
    "session_keeper.login.renewals": ("{renewal}", "Login renewals, by site and outcome"),
}

#: name -> (unit, description) of every histogram the library records.
HISTOGRAMS: Final[dict[str, tuple[str, str]]] = {
    "session_keeper.job.step.duration": ("s", "How long one job step attempt took"),
    "session_keeper.job.human_pause.age": ("s", "How long a job waited for a person"),
}


def url_attributes(url: str) -> dict[str, object]:
    """``url`` as ``url.scheme``, ``server.address``, ``server.port`` and ``url.path``."""
    redacted = redact_url(url) or ""
    try:
        parts = urlsplit(redacted)
        port = parts.port
    except ValueError:
        return {"url.scheme": redacted.partition(":")[0][:16]}
    out: dict[str, object] = {"url.scheme": parts.scheme}
    if parts.hostname:
        out["server.address"] = parts.hostname
    if port is not None:
        out["server.port"] = port
    if parts.scheme in ("http", "https"):
        out["url.path"] = parts.path or "/"
    return out


#: An event's columns under their structured names (log fields and span attributes).
EVENT_FIELDS: Final[dict[str, str]] = {
    "kind": "session_keeper.event",
    "job_id": "session_keeper.job.id",
    "step": "session_keeper.job.step",
    "attempt": "session_keeper.job.attempt",
    "revision": "session_keeper.job.revision",
    "lease_owner": "session_keeper.job.lease_owner",
    "generation": "session_keeper.generation",
    "page_identity": "session_keeper.job.page_identity",
    "failure_class": "session_keeper.job.failure_class",
    "validation": "session_keeper.job.validation",
    "elapsed_s": "session_keeper.job.elapsed_s",
    "remaining_budget_s": "session_keeper.job.remaining_budget_s",
}

#: Names in an event's data that are names (never secrets) and worth a field of their own.
EVENT_DATA_FIELDS: Final = ("conversation", "site", "action", "owner", "rule", "cause", "reason")


def event_fields(event: dict[str, object]) -> dict[str, object]:
    """An event (its ``to_dict()``) as structured fields: its set columns and named data."""
    out: dict[str, object] = {}
    for column, name in EVENT_FIELDS.items():
        value = event.get(column)
        if value is not None:
            out[name] = value
    data = event.get("data")
    if isinstance(data, dict):
        for key in EVENT_DATA_FIELDS:
            value = data.get(key)
            if isinstance(value, str | int | float | bool):
                out["session_keeper." + key] = value
    return out
