"""Store operations on the event log, jobs and leases (contracts in ``Store``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Final

import attrs

from session_keeper._model.events import EventKind
from session_keeper.errors import (
    ContractError,
    InvalidArgument,
    InvalidArgumentType,
    JobNotFound,
    LeaseHeldError,
    StoreCorrupt,
)
from session_keeper.stores._engine import Engine, operation
from session_keeper.stores._records import (
    EVENT_COLUMNS,
    JOB_STATES,
    Checkpoint,
    Event,
    Job,
    JobContract,
    JobState,
    Lease,
    dump_json,
)
from session_keeper.stores._sql import (
    Emit,
    Q,
    Row,
    Step,
    as_dt,
    check_lease,
    check_str,
    check_ttl,
    load_mapping,
)
from session_keeper.stores._steps import (
    JOB_LEASES,
    JOB_SELECT,
    event_values,
    insert_event,
    job_from_row,
    lock_lease_row,
    release_lease,
    renew_lease,
    take_lease,
)

#: States :meth:`Store.claim_next_ready` hands out: ready, or left running/reconciling
#: by a worker whose lease ran out.
CLAIMABLE_STATES: Final = ("ready", "running", "reconciling")


def event_from_row(row: Row) -> Event:
    """An event from its row (``id, at, kind``, the event columns, ``data``)."""
    event_id, at, kind, *rest = row
    data = load_mapping(rest[-1], f"event {event_id} data")
    fields = dict(zip(EVENT_COLUMNS, rest[:-1], strict=True))
    try:
        return Event(id=int(event_id), at=as_dt(at), kind=kind, data=data, **fields)
    except (InvalidArgument, TypeError) as exc:
        raise StoreCorrupt(f"event {event_id} is malformed: {exc}") from None


#: Events per multi-row INSERT: one round trip for a batch (PostgreSQL pays one per
#: statement), well inside both dialects' limits on bound parameters.
_EVENTS_PER_INSERT: Final = 500
_EVENT_FIELDS: Final = ("at", "kind", *EVENT_COLUMNS, "data")


def _insert_events(events: Sequence[Event]) -> Step[list[Event]]:
    """Append ``events`` with one statement; emit each for logging after COMMIT."""
    params: list[object] = []
    for event in events:
        values = event_values(event)
        values["data"] = dump_json(dict(values.get("data") or {}), "event data")
        params += [values.get(c) for c in _EVENT_FIELDS]
    row = f"({', '.join('?' for _ in _EVENT_FIELDS)})"
    rows = yield Q(
        "insert_events",
        f"INSERT INTO events ({', '.join(_EVENT_FIELDS)}) "
        f"VALUES {', '.join(row for _ in events)} RETURNING id",
        tuple(params),
    )
    # Ids are assigned in VALUES order; RETURNING's own row order is not promised.
    ids = sorted(int(r[0]) for r in rows)
    stored = [attrs.evolve(e, id=i) for e, i in zip(events, ids, strict=True)]
    for event in stored:
        yield Emit(event)
    return stored


class EventLog(Engine):
    """``append_event``, ``append_events`` and ``events``."""

    @operation(write=True)
    def append_event(self, event: Event) -> Step[None]:
        """See :meth:`Store.append_event`."""
        if not isinstance(event, Event):
            raise InvalidArgumentType(f"event must be an Event, not {type(event).__name__}")
        yield from insert_event(event_values(event))

    @operation(write=True)
    def append_events(self, events: Sequence[Event]) -> Step[list[Event]]:
        """See :meth:`Store.append_events`."""
        if isinstance(events, str | bytes) or not isinstance(events, Sequence):
            raise InvalidArgumentType(
                f"events must be a sequence of Event, not {type(events).__name__}"
            )
        for event in events:
            if not isinstance(event, Event):
                raise InvalidArgumentType(f"events must hold Events, not {type(event).__name__}")
        stored: list[Event] = []
        for start in range(0, len(events), _EVENTS_PER_INSERT):
            stored += yield from _insert_events(events[start : start + _EVENTS_PER_INSERT])
        return stored

    @operation(write=False)
    def events(
        self,
        *,
        job_id: str | None = None,
        since_id: int | None = None,
        kind: EventKind | None = None,
        limit: int = 1000,
        newest_first: bool = False,
    ) -> Step[list[Event]]:
        """See :meth:`Store.events`."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidArgument("limit must be a positive int")
        where: list[str] = []
        params: list[object] = []
        if job_id is not None:
            where.append("job_id = ?")
            params.append(job_id)
        if since_id is not None:
            where.append("id > ?")
            params.append(int(since_id))
        if kind is not None:
            where.append("kind = ?")
            params.append(kind)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        order = "DESC" if newest_first else "ASC"
        columns = ", ".join(("id", "at", "kind", *EVENT_COLUMNS, "data"))
        rows = yield Q(
            "select_events",
            f"SELECT {columns} FROM events{clause} ORDER BY id {order} LIMIT {limit}",
            tuple(params),
        )
        return [event_from_row(r) for r in rows]


class Jobs(Engine):
    """``submit_job``, ``load_job``, ``load_checkpoint`` and ``jobs``."""

    @operation(write=True)
    def submit_job(self, contract: JobContract) -> Step[Job]:
        """See :meth:`Store.submit_job`."""
        if not isinstance(contract, JobContract):
            raise InvalidArgumentType(
                f"contract must be a JobContract, not {type(contract).__name__}"
            )
        contract_json = contract.to_json()  # ContractError before any write
        now = self._clock.now()
        checkpoint = Checkpoint(
            job_id=contract.job_id,
            state="ready",
            input_manifest=contract.input_manifest,
            account_alias=contract.account_alias,
            source_view=contract.source_view,
            next_cursor=contract.start_cursor,
            deadline_at=contract.deadline_at,
        )
        inserted = yield Q(
            "insert_job",
            "INSERT INTO jobs (job_id, contract, submitted_at) VALUES (?, ?, ?) "
            "ON CONFLICT (job_id) DO NOTHING RETURNING job_id",
            (contract.job_id, contract_json, now),
        )
        if not inserted:
            rows = yield Q("select_job", f"{JOB_SELECT} WHERE j.job_id = ?", (contract.job_id,))
            existing = job_from_row(rows[0])
            if existing.contract != contract:
                raise ContractError(f"job {contract.job_id!r} exists with a different contract")
            return existing
        yield Q(
            "insert_checkpoint",
            "INSERT INTO checkpoints (job_id, state, revision, body, updated_at) "
            "VALUES (?, 'ready', 0, ?, ?)",
            (contract.job_id, checkpoint.to_json(), now),
        )
        yield Q(
            "insert_lease",
            "INSERT INTO leases (job_id, owner, token, expires_at) VALUES (?, NULL, 0, NULL)",
            (contract.job_id,),
        )
        yield from insert_event(
            {"kind": "job_submitted", "at": now, "job_id": contract.job_id, "revision": 0}
        )
        return Job(
            contract=contract, checkpoint=checkpoint, lease=None, submitted_at=now, updated_at=now
        )

    @operation(write=False)
    def load_job(self, job_id: str) -> Step[Job]:
        """See :meth:`Store.load_job`."""
        check_str(job_id, "job_id")
        rows = yield Q("select_job", f"{JOB_SELECT} WHERE j.job_id = ?", (job_id,))
        if not rows:
            raise JobNotFound(f"no job {job_id!r}")
        return job_from_row(rows[0])

    async def load_checkpoint(self, job_id: str) -> Checkpoint:
        """See :meth:`Store.load_checkpoint`."""
        return (await self.load_job(job_id)).checkpoint

    async def jobs(self, *, states: Iterable[JobState] | None = None) -> list[Job]:
        """See :meth:`Store.jobs`."""
        # Read here, once: a retried transaction must not find a spent iterator.
        wanted = None if states is None else tuple(states)
        return await self._perform(lambda: self._jobs(wanted), write=False, name="jobs")

    def _jobs(self, states: tuple[str, ...] | None) -> Step[list[Job]]:
        params: tuple[object, ...] = ()
        clause = ""
        if states is not None:
            bad = [s for s in states if s not in JOB_STATES]
            if bad:
                raise InvalidArgument(f"unknown job states: {bad}")
            if not states:
                return []
            clause = f" WHERE c.state IN ({', '.join('?' for _ in states)})"
            params = states
        rows = yield Q(
            "select_jobs", f"{JOB_SELECT}{clause} ORDER BY j.submitted_at, j.job_id", params
        )
        return [job_from_row(r) for r in rows]


class Leases(Engine):
    """``claim``, ``claim_next_ready``, ``extend`` and ``release``."""

    @operation(write=True)
    def claim(self, job_id: str, owner: str, ttl: timedelta) -> Step[Lease]:
        """See :meth:`Store.claim`."""
        check_str(job_id, "job_id")
        check_str(owner, "owner")
        check_ttl(ttl)
        now = self._clock.now()
        rows = yield from lock_lease_row(JOB_LEASES, job_id)
        if not rows:
            raise JobNotFound(f"no job {job_id!r}")
        return (yield from _take_lease(job_id, owner, ttl, now, rows[0]))

    @operation(write=True)
    def claim_next_ready(self, owner: str, ttl: timedelta) -> Step[Lease | None]:
        """See :meth:`Store.claim_next_ready`."""
        check_str(owner, "owner")
        check_ttl(ttl)
        now = self._clock.now()
        states = ", ".join("?" for _ in CLAIMABLE_STATES)
        rows = yield Q(
            "pick_job",
            "SELECT l.job_id, l.owner, l.token, l.expires_at FROM leases l "
            "JOIN checkpoints c ON c.job_id = l.job_id JOIN jobs j ON j.job_id = l.job_id "
            f"WHERE c.state IN ({states}) AND (l.owner IS NULL OR l.expires_at <= ?) "
            "ORDER BY j.submitted_at, j.job_id LIMIT 1",
            (*CLAIMABLE_STATES, now),
            # Workers skip rows another worker is claiming instead of queueing behind it.
            " FOR UPDATE OF l SKIP LOCKED",
        )
        if not rows:
            return None
        job_id, *lease_row = rows[0]
        return (yield from _take_lease(job_id, owner, ttl, now, tuple(lease_row)))

    @operation(write=True)
    def extend(self, lease: Lease, ttl: timedelta) -> Step[Lease]:
        """See :meth:`Store.extend`."""
        check_lease(lease)
        check_ttl(ttl)
        return (yield from renew_lease(JOB_LEASES, lease.job_id, lease, ttl, self._clock.now()))

    @operation(write=True)
    def release(self, lease: Lease) -> Step[None]:
        """See :meth:`Store.release`."""
        check_lease(lease)
        now = self._clock.now()
        yield from release_lease(
            JOB_LEASES,
            lease.job_id,
            lease,
            now,
            {
                "kind": "lease_released",
                "at": now,
                "job_id": lease.job_id,
                "lease_owner": lease.owner,
                "data": {"token": lease.token},
            },
        )


def _take_lease(job_id: str, owner: str, ttl: timedelta, now: datetime, row: Row) -> Step[Lease]:
    """Hand the job's locked lease ``row`` to ``owner`` (see :func:`take_lease`)."""
    return (
        yield from take_lease(
            JOB_LEASES,
            job_id,
            row,
            ttl=ttl,
            now=now,
            new=lambda token, expires_at: Lease(
                job_id=job_id, owner=owner, token=token, expires_at=expires_at
            ),
            held=LeaseHeldError,
            event={"kind": "lease_claimed", "at": now, "job_id": job_id, "lease_owner": owner},
        )
    )
