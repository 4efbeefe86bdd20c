"""Store operations on external writes: intent recorded before acting, then resolved."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Final, assert_never

import attrs

from session_keeper._model.events import EventKind
from session_keeper.errors import (
    InvalidArgument,
    InvalidArgumentType,
    InvalidTransition,
    StoreCorrupt,
)
from session_keeper.stores._engine import Engine, operation
from session_keeper.stores._records import (
    WRITE_STATUSES,
    WRITE_TRANSITIONS,
    ExternalWrite,
    Lease,
    WriteStatus,
    dump_json,
)
from session_keeper.stores._sql import Q, Row, Step, as_dt, check_lease, check_str, load_mapping
from session_keeper.stores._steps import insert_event, lock_lease

_WRITE_SELECT: Final = (
    "SELECT job_id, key, status, intent, outcome, lease_token, created_at, updated_at "
    "FROM external_writes"
)


def _status_kind(status: WriteStatus) -> EventKind:
    """The event an external write's move to ``status`` is logged as."""
    match status:
        case "intent":
            return "external_write_intent"
        case "confirmed":
            return "external_write_confirmed"
        case "unknown":
            return "external_write_unknown"
        case "reconciled":
            return "external_write_reconciled"
        case _:
            assert_never(status)


def _write_from_row(row: Row) -> ExternalWrite:
    job_id, key, status, intent, outcome, token, created_at, updated_at = row
    if status not in WRITE_STATUSES:
        raise StoreCorrupt(f"external write {key!r} has unknown status {status!r}")
    return ExternalWrite(
        job_id=job_id,
        key=key,
        status=status,
        intent=load_mapping(intent, f"external write {key!r} intent"),
        outcome=None if outcome is None else load_mapping(outcome, "external write outcome"),
        lease_token=int(token),
        created_at=as_dt(created_at),
        updated_at=as_dt(updated_at),
    )


def _lock_write(lease: Lease, key: str, now: datetime) -> Step[ExternalWrite | None]:
    """Check ``lease`` and lock its row, then lock and read the write ``key``, if any."""
    yield from lock_lease(lease, now)
    rows = yield Q(
        "select_write",
        f"{_WRITE_SELECT} WHERE job_id = ? AND key = ?",
        (lease.job_id, key),
        " FOR UPDATE",
    )
    return _write_from_row(rows[0]) if rows else None


class ExternalWrites(Engine):
    """``record_write_intent``, ``resolve_write`` and ``external_writes``."""

    @operation(write=True)
    def record_write_intent(
        self, lease: Lease, key: str, intent: Mapping[str, object]
    ) -> Step[ExternalWrite]:
        """See :meth:`Store.record_write_intent`."""
        check_lease(lease)
        check_str(key, "key")
        if not isinstance(intent, Mapping):
            raise InvalidArgumentType("intent must be a mapping")
        intent_json = dump_json(dict(intent), "intent")
        now = self._clock.now()
        existing = yield from _lock_write(lease, key, now)
        if existing is not None:
            # Never overwrite: an earlier attempt may have acted; the caller must read status.
            return existing
        yield Q(
            "insert_write",
            "INSERT INTO external_writes (job_id, key, status, intent, outcome, lease_token, "
            "created_at, updated_at) VALUES (?, ?, 'intent', ?, NULL, ?, ?, ?)",
            (lease.job_id, key, intent_json, lease.token, now, now),
        )
        yield from insert_event(
            {
                "kind": _status_kind("intent"),
                "at": now,
                "job_id": lease.job_id,
                "lease_owner": lease.owner,
                "data": {"key": key},
            }
        )
        return ExternalWrite(
            job_id=lease.job_id,
            key=key,
            status="intent",
            intent=dict(intent),
            outcome=None,
            lease_token=lease.token,
            created_at=now,
            updated_at=now,
        )

    @operation(write=True)
    def resolve_write(
        self,
        lease: Lease,
        key: str,
        status: WriteStatus,
        *,
        outcome: Mapping[str, object] | None = None,
    ) -> Step[ExternalWrite]:
        """See :meth:`Store.resolve_write`."""
        check_lease(lease)
        check_str(key, "key")
        if status not in WRITE_STATUSES or status == "intent":
            raise InvalidArgument(
                f"status must be confirmed, unknown or reconciled, not {status!r}"
            )
        if outcome is not None and not isinstance(outcome, Mapping):
            raise InvalidArgumentType("outcome must be a mapping or None")
        outcome_json = None if outcome is None else dump_json(dict(outcome), "outcome")
        now = self._clock.now()
        current = yield from _lock_write(lease, key, now)
        if current is None:
            raise InvalidTransition(f"no intent recorded for external write {key!r}")
        if status not in WRITE_TRANSITIONS[current.status]:
            raise InvalidTransition(
                f"external write {key!r} cannot go from {current.status} to {status}"
            )
        yield Q(
            "update_write",
            "UPDATE external_writes SET status = ?, outcome = ?, lease_token = ?, updated_at = ? "
            "WHERE job_id = ? AND key = ?",
            (status, outcome_json, lease.token, now, lease.job_id, key),
        )
        yield from insert_event(
            {
                "kind": _status_kind(status),
                "at": now,
                "job_id": lease.job_id,
                "lease_owner": lease.owner,
                "data": {"key": key, "from": current.status},
            }
        )
        return attrs.evolve(
            current,
            status=status,
            outcome=None if outcome is None else dict(outcome),
            lease_token=lease.token,
            updated_at=now,
        )

    @operation(write=False)
    def external_writes(self, job_id: str) -> Step[list[ExternalWrite]]:
        """See :meth:`Store.external_writes`."""
        check_str(job_id, "job_id")
        rows = yield Q(
            "select_writes",
            f"{_WRITE_SELECT} WHERE job_id = ? ORDER BY created_at, key",
            (job_id,),
        )
        return [_write_from_row(r) for r in rows]
