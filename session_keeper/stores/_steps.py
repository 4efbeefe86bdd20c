"""Steps several operations share: lease and job locks, checkpoints, the event log."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final, NotRequired, TypedDict, TypeVar, cast

import attrs

from session_keeper._model.events import EventKind
from session_keeper.errors import (
    ContractError,
    InvalidArgumentType,
    JobNotFound,
    ProfileLeaseLost,
    StaleLeaseError,
    StoreCorrupt,
)
from session_keeper.stores._records import (
    EVENT_COLUMNS,
    Checkpoint,
    Event,
    Job,
    JobContract,
    Lease,
    ProfileLease,
    dump_json,
)
from session_keeper.stores._sql import Emit, Q, Row, Step, as_dt

#: A job's lease or a profile's: renewed and released by the same steps.
AnyLease = TypeVar("AnyLease", Lease, ProfileLease)

# ---------------------------------------------------------------- leases


@attrs.frozen(kw_only=True)
class LeaseRows:
    """Where one kind of lease is kept: its table, its key column, its statements' labels,
    and the errors that fence its holders.

    Job leases and profile leases are the same mechanism over two tables (a holder, a
    fencing token, an expiry), so locking, taking, renewing and releasing one is one
    step for both.
    """

    table: str
    key: str
    #: What the key names, in an error message ("job", "profile").
    noun: str
    #: Crash-injection labels of the locking ``SELECT`` and the taking, renewing and
    #: releasing ``UPDATE``.
    lock_label: str
    take_label: str
    renew_label: str
    release_label: str
    #: The error for a lease that is not (or no longer) its row's current one.
    lost: Callable[[str], Exception]
    #: The error for a key with no lease row: ``missing(key)``.
    missing: Callable[[str], Exception]
    #: What a fenced holder does to get a lease again ("claim", "acquire").
    again: str


#: The job leases (``leases``, keyed by ``job_id``).
JOB_LEASES: Final = LeaseRows(
    table="leases",
    key="job_id",
    noun="job",
    lock_label="lock_lease",
    take_label="update_lease",
    renew_label="update_lease",
    release_label="update_lease",
    lost=StaleLeaseError,
    missing=lambda job_id: JobNotFound(f"no job {job_id!r}"),
    again="claim",
)
#: The profile leases (``profile_leases``, keyed by ``profile``).
PROFILE_LEASES: Final = LeaseRows(
    table="profile_leases",
    key="profile",
    noun="profile",
    lock_label="lock_profile",
    take_label="update_profile",
    renew_label="renew_profile",
    release_label="release_profile",
    lost=ProfileLeaseLost,
    missing=lambda profile: ProfileLeaseLost(f"profile {profile!r} was never leased"),
    again="acquire",
)


def lock_lease_row(rows: LeaseRows, key: str) -> Step[list[Row]]:
    """Lock the lease row of ``key``; return it as ``[(owner, token, expires_at)]``, or
    ``[]`` when there is none."""
    found: list[Row] = yield Q(
        rows.lock_label,
        f"SELECT owner, token, expires_at FROM {rows.table} WHERE {rows.key} = ?",
        (key,),
        " FOR UPDATE",
    )
    return found


def check_held(
    rows: LeaseRows,
    key: str,
    lease: Lease | ProfileLease,
    row: Row,
    now: datetime,
    *,
    expired_ok: bool = False,
) -> None:
    """``rows.lost`` unless ``lease`` is the current lease of ``key``'s ``row`` (its
    ``owner, token, expires_at``), unexpired (``expired_ok``: or expired, with nobody
    holding it since)."""
    owner, token, expires_at = row
    if token != lease.token or owner != lease.owner:
        raise rows.lost(
            f"lease on {rows.noun} {key!r} with token {lease.token} is stale "
            f"(current token {token})"
        )
    if not expired_ok and (expires_at is None or as_dt(expires_at) <= now):
        raise rows.lost(f"lease on {rows.noun} {key!r} expired; {rows.again} it again")


def lock_held(
    rows: LeaseRows,
    key: str,
    lease: Lease | ProfileLease,
    now: datetime,
    *,
    expired_ok: bool = False,
) -> Step[None]:
    """Lock ``key``'s lease row and check ``lease`` holds it (:func:`check_held`); a key
    with no row is ``rows.missing(key)``."""
    found = yield from lock_lease_row(rows, key)
    if not found:
        raise rows.missing(key)
    check_held(rows, key, lease, found[0], now, expired_ok=expired_ok)


def lock_lease(lease: Lease, now: datetime) -> Step[None]:
    """Lock the job's lease row and check ``lease`` is current."""
    # Every claim and job mutation locks the lease row first (PostgreSQL), so two
    # writers of one job queue on the same row instead of deadlocking.
    yield from lock_held(JOB_LEASES, lease.job_id, lease, now)


def take_lease(
    rows: LeaseRows,
    key: str,
    row: Row,
    *,
    ttl: timedelta,
    now: datetime,
    new: Callable[[int, datetime], AnyLease],
    held: Callable[[str], Exception],
    event: EventValues,
) -> Step[AnyLease]:
    """Hand the lease row of ``key`` to a new holder, unless another holds it unexpired.

    ``row`` is the row's ``(owner, token, expires_at)``, locked by the caller. The new
    lease is ``new(token, expires_at)`` with the next fencing token, so a write fenced
    with an older one is refused. A row held unexpired raises ``held(message)`` and
    changes nothing. ``event`` (kind, who, which job) is appended with the new token and
    TTL added to its data, and whom the lease was taken over from when its holder never
    released it.
    """
    holder, token, expires_at = row
    if holder is not None and expires_at is not None and as_dt(expires_at) > now:
        raise held(
            f"{rows.noun} {key!r} is leased by {holder!r} until {as_dt(expires_at).isoformat()}"
        )
    lease = new(int(token) + 1, now + ttl)
    yield Q(
        rows.take_label,
        f"UPDATE {rows.table} SET owner = ?, token = ?, expires_at = ? WHERE {rows.key} = ?",
        (lease.owner, lease.token, lease.expires_at, key),
    )
    given: Mapping[str, object] = event.get("data") or {}
    data = {**given, "token": lease.token, "ttl_s": ttl.total_seconds()}
    if holder is not None:
        # The previous holder never released: it died or stalled past its expiry.
        data["took_over_from"] = holder
    yield from insert_event({**event, "data": data})
    return lease


def renew_lease(
    rows: LeaseRows, key: str, lease: AnyLease, ttl: timedelta, now: datetime
) -> Step[AnyLease]:
    """``lease`` (still its row's, unexpired: :func:`lock_held`) runs on ``ttl`` from now."""
    yield from lock_held(rows, key, lease, now)
    renewed = attrs.evolve(lease, expires_at=now + ttl)
    yield Q(
        rows.renew_label,
        f"UPDATE {rows.table} SET expires_at = ? WHERE {rows.key} = ?",
        (renewed.expires_at, key),
    )
    return renewed


def release_lease(
    rows: LeaseRows, key: str, lease: AnyLease, now: datetime, event: EventValues
) -> Step[None]:
    """Nobody holds the row of ``key`` any more, and ``event`` says who let it go.

    ``lease`` must still be the row's (:func:`lock_held`), but may have expired: an
    expired lease nobody took over is still given back. The row's token stays, so the
    next holder's grows.
    """
    yield from lock_held(rows, key, lease, now, expired_ok=True)
    yield Q(
        rows.release_label,
        f"UPDATE {rows.table} SET owner = NULL, expires_at = NULL WHERE {rows.key} = ?",
        (key,),
    )
    yield from insert_event(event)


def lock_lease_and_job(lease: Lease, now: datetime, expected_revision: int) -> Step[Checkpoint]:
    """Lock the lease and checkpoint rows, check the lease and the revision."""
    # One statement for both rows: a page commit is latency-bound, and each statement
    # is a round trip (PostgreSQL) or a VM run (SQLite). Errors keep the documented
    # order: missing job, then stale lease, then unreadable row, then stale revision.
    rows = yield Q(
        "lock_lease_and_job",
        "SELECT l.owner, l.token, l.expires_at, c.state, c.revision, c.body "
        "FROM leases l JOIN checkpoints c ON c.job_id = l.job_id WHERE l.job_id = ?",
        (lease.job_id,),
        " FOR UPDATE OF l, c",
    )
    if not rows:
        raise JobNotFound(f"no job {lease.job_id!r}")
    owner, token, expires_at, state, revision, body = rows[0]
    check_held(JOB_LEASES, lease.job_id, lease, (owner, token, expires_at), now)
    checkpoint = checkpoint_from_row(lease.job_id, state, revision, body)
    if checkpoint.checkpoint_revision != expected_revision:
        raise StaleLeaseError(
            f"job {lease.job_id!r} is at checkpoint revision {checkpoint.checkpoint_revision}, "
            f"not {expected_revision}"
        )
    return checkpoint


# ---------------------------------------------------------------- checkpoints

#: Parsed checkpoints by their exact JSON text (a pure memo: the same text always
#: parses to an equal, immutable Checkpoint, whatever the database holds).
_PARSED: Final[dict[str, Checkpoint]] = {}
_PARSED_MAX: Final = 4096


def _remember_checkpoint(body: str, checkpoint: Checkpoint) -> None:
    # A job's row is read back on every commit: the text we last wrote parses to the
    # object we already have (``to_json`` and ``from_json`` round-trip exactly), so
    # the next commit of the job skips the parse. Plain dict operations are atomic
    # under the GIL; several stores' threads may share this memo.
    if len(_PARSED) >= _PARSED_MAX:
        with contextlib.suppress(StopIteration, RuntimeError):
            _PARSED.pop(next(iter(_PARSED)), None)
    _PARSED[body] = checkpoint


def checkpoint_from_row(job_id: str, state: object, revision: object, body: object) -> Checkpoint:
    """The checkpoint a row holds; :class:`StoreCorrupt` / :class:`SchemaVersionError`."""
    if isinstance(body, bytes | memoryview):
        body = bytes(body).decode("utf-8", "replace")
    if not isinstance(body, str):
        raise StoreCorrupt(f"job {job_id!r}: checkpoint is not text")
    checkpoint = _PARSED.get(body)
    if checkpoint is None:
        checkpoint = Checkpoint.from_json(body)  # SchemaVersionError / StoreCorrupt
        _remember_checkpoint(body, checkpoint)
    if (
        checkpoint.job_id != job_id
        or checkpoint.state != state
        or checkpoint.checkpoint_revision != revision
    ):
        raise StoreCorrupt(f"job {job_id!r}: checkpoint disagrees with its job row")
    return checkpoint


def write_checkpoint(old: Checkpoint, new: Checkpoint, now: datetime) -> Step[None]:
    """Replace ``old`` (still at its revision) by ``new``."""
    body = new.to_json()
    if new.state == old.state:
        # Leaving ``state`` out of the SET spares the state index a write per page.
        sql = (
            "UPDATE checkpoints SET revision = ?, body = ?, updated_at = ? "
            "WHERE job_id = ? AND revision = ?"
        )
        params: tuple[object, ...] = (new.checkpoint_revision, body, now)
    else:
        sql = (
            "UPDATE checkpoints SET state = ?, revision = ?, body = ?, updated_at = ? "
            "WHERE job_id = ? AND revision = ?"
        )
        params = (new.state, new.checkpoint_revision, body, now)
    rows = yield Q(
        "update_checkpoint", sql, (*params, new.job_id, old.checkpoint_revision), answer="changes"
    )
    if not rows[0][0]:
        # Unreachable while the row lock is held; kept as a last line of defence.
        raise StaleLeaseError(f"job {new.job_id!r} changed underneath the commit")
    _remember_checkpoint(body, new)


JOB_SELECT: Final = (
    "SELECT j.job_id, j.contract, c.state, c.revision, c.body, j.submitted_at, "
    "c.updated_at, l.owner, l.token, l.expires_at FROM jobs j "
    "JOIN checkpoints c ON c.job_id = j.job_id "
    "LEFT JOIN leases l ON l.job_id = j.job_id"
)


def job_from_row(row: Row) -> Job:
    """A :data:`JOB_SELECT` row as a :class:`Job`."""
    job_id, contract_text, state, revision, body, submitted_at, updated_at, owner, token, exp = row
    try:
        contract = JobContract.from_json(contract_text)
    except ContractError as exc:
        raise StoreCorrupt(f"job {job_id!r}: stored contract is malformed ({exc})") from None
    if contract.job_id != job_id:
        raise StoreCorrupt(f"job {job_id!r}: stored contract names another job")
    checkpoint = checkpoint_from_row(job_id, state, revision, body)
    lease = None
    if owner is not None and exp is not None:
        lease = Lease(job_id=job_id, owner=owner, token=int(token), expires_at=as_dt(exp))
    return Job(
        contract=contract,
        checkpoint=checkpoint,
        lease=lease,
        submitted_at=as_dt(submitted_at),
        updated_at=as_dt(updated_at),
    )


# ---------------------------------------------------------------- events

_EVENT_INSERT: Final = (
    f"INSERT INTO events (at, kind, {', '.join(EVENT_COLUMNS)}, data) "
    f"VALUES ({', '.join('?' for _ in range(len(EVENT_COLUMNS) + 3))})"
)


class EventValues(TypedDict):
    """An event's fields except ``id``, as :func:`insert_event` takes them: ``kind`` is
    an :data:`EventKind`, so mypy refuses a dict that names a kind the table lacks."""

    kind: EventKind
    at: datetime
    job_id: NotRequired[str | None]
    step: NotRequired[str | None]
    attempt: NotRequired[int | None]
    revision: NotRequired[int | None]
    lease_owner: NotRequired[str | None]
    generation: NotRequired[int | None]
    page_identity: NotRequired[str | None]
    failure_class: NotRequired[str | None]
    validation: NotRequired[str | None]
    artifact: NotRequired[str | None]
    elapsed_s: NotRequired[float | None]
    remaining_budget_s: NotRequired[float | None]
    # A mapping; the batch insert puts its JSON text in its place before binding.
    data: NotRequired[Any]


def insert_event(values: EventValues) -> Step[Event]:
    """Append an event (given as its fields) and emit it for logging after COMMIT."""
    # Takes the event's fields as a dict and builds the Event once, with its id: events
    # are written on every commit, and each attrs construction validates every field.
    # A field that fails validation raises before COMMIT, so nothing is kept.
    data = dump_json(dict(values.get("data") or {}), "event data")
    columns: dict[str, Any] = {**values}
    params = (values["at"], values["kind"], *(columns.get(c) for c in EVENT_COLUMNS), data)
    rows = yield Q("insert_event", _EVENT_INSERT, params, " RETURNING id", answer="rowid")
    event = Event(**values, id=int(rows[0][0]))
    yield Emit(event)
    return event


def event_values(event: Event) -> EventValues:
    """An event's fields except ``id``."""
    # Built from Event's own fields, so the keys and their types are the TypedDict's.
    return cast(
        "EventValues",
        {f.name: getattr(event, f.name) for f in attrs.fields(Event) if f.name != "id"},
    )


def job_event(
    base: Event | None,
    default_kind: EventKind,
    now: datetime,
    lease: Lease,
    checkpoint: Checkpoint,
    data: Mapping[str, object],
) -> EventValues:
    """The fields of a job's event: the caller's, with the store's facts on top."""
    # The caller's event supplies kind, timings, page identity...; the store fixes the
    # facts it is the authority on (job, revision, owner) so the log cannot disagree.
    if base is None:
        values: EventValues = {"kind": default_kind, "at": now, "data": data}
    elif isinstance(base, Event):
        values = event_values(base)
        values["data"] = {**base.data, **data}
    else:
        raise InvalidArgumentType(f"event must be an Event, not {type(base).__name__}")
    if values.get("attempt") is None:
        values["attempt"] = checkpoint.attempts_used
    values["job_id"] = checkpoint.job_id
    values["revision"] = checkpoint.checkpoint_revision
    values["lease_owner"] = lease.owner
    return values
