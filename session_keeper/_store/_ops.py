"""Every store operation, written once for both databases ("sans-I/O").

An operation is a generator: it yields :class:`Q` (one SQL statement) and receives
the statement's rows. A driver runs it inside one transaction: SQLite's driver runs
the whole generator on its database thread in one hop, PostgreSQL's awaits each
statement. A raised exception rolls the transaction back, so the order of checks
below is also the order of the errors a caller sees, and nothing is written when
one is raised.

SQL is written with ``?`` placeholders in the common subset of both dialects;
``Q.pg_suffix`` adds PostgreSQL's row locks (SQLite needs none: ``BEGIN
IMMEDIATE`` already makes the writer exclusive). Timestamps are passed as aware
``datetime`` and read back through :func:`as_dt`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Generator, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar

import attrs

from session_keeper._clock import Clock
from session_keeper._errors import (
    ArtifactNotFound,
    ContractError,
    InvalidArgument,
    InvalidArgumentType,
    InvalidTransition,
    JobNotFound,
    LeaseHeldError,
    StaleLeaseError,
    StoreCorrupt,
)
from session_keeper._store._records import (
    ALLOWED_TRANSITIONS,
    EVENT_COLUMNS,
    JOB_STATES,
    WRITE_STATUSES,
    WRITE_TRANSITIONS,
    ArtifactRef,
    Checkpoint,
    CommitResult,
    Event,
    ExternalWrite,
    Job,
    JobContract,
    JobState,
    Lease,
    ResultRecord,
    StoredResult,
    WriteStatus,
    dump_json,
)

Row = tuple[Any, ...]
T = TypeVar("T")
Op = Generator["Q", list[Row], T]

#: States :meth:`Store.claim_next_ready` hands out: ready, or left running/reconciling
#: by a worker whose lease ran out.
CLAIMABLE_STATES: Final = ("ready", "running", "reconciling")
#: Keys that name a secret; a keeper state holding one is refused (invariant 1).
#: Checked on records (dicts inside lists), not on mappings keyed by ids, so a
#: conversation that happens to be called "password" is not mistaken for one.
_SECRET_KEYS: Final = frozenset({"cookie_value", "password", "secret"})


@attrs.frozen
class Q:
    """One SQL statement. ``label`` names the point for crash-injection hooks."""

    label: str
    sql: str
    params: tuple[object, ...] = ()
    #: Appended on PostgreSQL only (row locks such as ``FOR UPDATE``).
    pg_suffix: str = ""
    #: The whole statement for PostgreSQL (``%s`` placeholders), where the dialects differ.
    pg_sql: str | None = attrs.field(default=None, kw_only=True)


# ---------------------------------------------------------------- value helpers


def as_dt(value: object) -> datetime:
    """A stored timestamp (ISO text from SQLite, ``datetime`` from PostgreSQL) in UTC."""
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise StoreCorrupt("a stored timestamp is not ISO 8601") from None
        if parsed.tzinfo is not None:
            return parsed.astimezone(UTC)
    raise StoreCorrupt("a stored timestamp is malformed")


def opt_dt(value: object) -> datetime | None:
    """Like :func:`as_dt`, passing ``None`` through."""
    return None if value is None else as_dt(value)


def _load_json(text: object, what: str) -> Any:
    if isinstance(text, bytes | memoryview):
        text = bytes(text).decode("utf-8", "replace")
    if not isinstance(text, str):
        raise StoreCorrupt(f"{what} is not JSON text")
    try:
        return json.loads(text)
    except ValueError:
        raise StoreCorrupt(f"{what} is not valid JSON") from None


def _load_mapping(text: object, what: str) -> dict[str, object]:
    value = _load_json(text, what)
    if not isinstance(value, dict):
        raise StoreCorrupt(f"{what} is not a JSON object")
    return value


def digest_of(data: bytes) -> str:
    """The artifact digest format: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _check_ttl(ttl: timedelta) -> None:
    if not isinstance(ttl, timedelta):
        raise InvalidArgumentType(f"ttl must be a timedelta, not {type(ttl).__name__}")
    if ttl <= timedelta(0):
        raise InvalidArgument("ttl must be positive")


def _check_str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{what} must be a str, not {type(value).__name__}")
    if not value.strip():
        raise InvalidArgument(f"{what} must not be empty")
    return value


def _check_lease_arg(lease: object) -> Lease:
    if not isinstance(lease, Lease):
        raise InvalidArgumentType(f"lease must be a Lease, not {type(lease).__name__}")
    return lease


def _check_revision(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentType("expected_revision must be an int")
    return value


def _check_attempts(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgument("attempts_used must be a non-negative int")
    return value


# ---------------------------------------------------------------- shared steps


def _check_lease_row(
    lease: Lease, owner: object, token: object, expires_at: object, now: datetime
) -> None:
    if token != lease.token or owner != lease.owner:
        raise StaleLeaseError(
            f"lease on job {lease.job_id!r} with token {lease.token} is stale "
            f"(current token {token})"
        )
    if expires_at is None or as_dt(expires_at) <= now:
        raise StaleLeaseError(f"lease on job {lease.job_id!r} expired; claim it again")


def _lock_lease(lease: Lease, now: datetime) -> Op[None]:
    # Every claim and job mutation locks the lease row first (PostgreSQL), so two
    # writers of one job queue on the same row instead of deadlocking.
    rows = yield Q(
        "lock_lease",
        "SELECT owner, token, expires_at FROM leases WHERE job_id = ?",
        (lease.job_id,),
        " FOR UPDATE",
    )
    if not rows:
        raise JobNotFound(f"no job {lease.job_id!r}")
    owner, token, expires_at = rows[0]
    _check_lease_row(lease, owner, token, expires_at, now)


def _lock_lease_and_job(lease: Lease, now: datetime, expected_revision: int) -> Op[Checkpoint]:
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
    _check_lease_row(lease, owner, token, expires_at, now)
    checkpoint = _checkpoint_from_row(lease.job_id, state, revision, body)
    if checkpoint.checkpoint_revision != expected_revision:
        raise StaleLeaseError(
            f"job {lease.job_id!r} is at checkpoint revision {checkpoint.checkpoint_revision}, "
            f"not {expected_revision}"
        )
    return checkpoint


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


def _parse_checkpoint(body: str) -> Checkpoint:
    checkpoint = _PARSED.get(body)
    if checkpoint is None:
        checkpoint = Checkpoint.from_json(body)  # SchemaVersionError / StoreCorrupt
        _remember_checkpoint(body, checkpoint)
    return checkpoint


def _checkpoint_from_row(job_id: str, state: object, revision: object, body: object) -> Checkpoint:
    if isinstance(body, bytes | memoryview):
        body = bytes(body).decode("utf-8", "replace")
    if not isinstance(body, str):
        raise StoreCorrupt(f"job {job_id!r}: checkpoint is not text")
    checkpoint = _parse_checkpoint(body)  # SchemaVersionError / StoreCorrupt
    if (
        checkpoint.job_id != job_id
        or checkpoint.state != state
        or checkpoint.checkpoint_revision != revision
    ):
        raise StoreCorrupt(f"job {job_id!r}: checkpoint disagrees with its job row")
    return checkpoint


def _write_checkpoint(old: Checkpoint, new: Checkpoint, now: datetime) -> Op[None]:
    body = new.to_json()
    if new.state == old.state:
        # Leaving ``state`` out of the SET spares the state index a write per page.
        sql = (
            "UPDATE checkpoints SET revision = ?, body = ?, updated_at = ? "
            "WHERE job_id = ? AND revision = ? RETURNING job_id"
        )
        params: tuple[object, ...] = (new.checkpoint_revision, body, now)
    else:
        sql = (
            "UPDATE checkpoints SET state = ?, revision = ?, body = ?, updated_at = ? "
            "WHERE job_id = ? AND revision = ? RETURNING job_id"
        )
        params = (new.state, new.checkpoint_revision, body, now)
    rows = yield Q("update_checkpoint", sql, (*params, new.job_id, old.checkpoint_revision))
    if not rows:
        # Unreachable while the row lock is held; kept as a last line of defence.
        raise StaleLeaseError(f"job {new.job_id!r} changed underneath the commit")
    _remember_checkpoint(body, new)


_EVENT_INSERT: Final = (
    f"INSERT INTO events (at, kind, {', '.join(EVENT_COLUMNS)}, data) "
    f"VALUES ({', '.join('?' for _ in range(len(EVENT_COLUMNS) + 3))}) RETURNING id"
)


def _insert_event(values: dict[str, Any]) -> Op[Event]:
    # Takes the event's fields as a dict and builds the Event once, with its id: events
    # are written on every commit, and each attrs construction validates every field.
    # A field that fails validation raises before COMMIT, so nothing is kept.
    data = dump_json(dict(values.get("data") or {}), "event data")
    params = (values["at"], values["kind"], *(values.get(c) for c in EVENT_COLUMNS), data)
    rows = yield Q("insert_event", _EVENT_INSERT, params)
    return Event(**{**values, "id": int(rows[0][0])})


def _event_values(event: Event) -> dict[str, Any]:
    return {f.name: getattr(event, f.name) for f in attrs.fields(Event) if f.name != "id"}


def _job_event(
    base: Event | None,
    default_kind: str,
    now: datetime,
    lease: Lease,
    checkpoint: Checkpoint,
    data: Mapping[str, object],
    **fields: Any,
) -> dict[str, Any]:
    # The caller's event supplies kind, timings, page identity...; the store fixes the
    # facts it is the authority on (job, revision, owner) so the log cannot disagree.
    if base is None:
        values: dict[str, Any] = {"kind": default_kind, "at": now, "data": data}
    elif isinstance(base, Event):
        values = _event_values(base)
        values["data"] = {**base.data, **data}
    else:
        raise InvalidArgumentType(f"event must be an Event, not {type(base).__name__}")
    if values.get("attempt") is None:
        values["attempt"] = checkpoint.attempts_used
    values.update(
        job_id=checkpoint.job_id,
        revision=checkpoint.checkpoint_revision,
        lease_owner=lease.owner,
        **fields,
    )
    return values


# ---------------------------------------------------------------- keeper state


def _scan_for_secrets(value: object, path: str, in_record: bool = False) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if in_record and isinstance(key, str) and key.lower() in _SECRET_KEYS:
                raise InvalidArgument(
                    f"keeper state holds a {key!r} at {path}; store fingerprints, never values"
                )
            _scan_for_secrets(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _scan_for_secrets(item, f"{path}[{i}]", in_record=True)


def _check_no_cookie_values(state: Mapping[str, object]) -> None:
    # The ledger's cookies are the one place a value would naturally sit next to a name.
    for i, login in enumerate(_dicts(state.get("logins"))):
        for j, cookie in enumerate(_dicts(login.get("cookies"))):
            if "value" in cookie:
                raise InvalidArgument(
                    f"keeper state holds a cookie value at $.logins[{i}].cookies[{j}]; "
                    "store fingerprints, never values"
                )


def _dicts(value: object) -> list[Mapping[str, object]]:
    # The keeper owns the document's shape; the projection tolerates whatever it finds.
    if not isinstance(value, list | tuple):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def _opt_text(value: object) -> str | None:
    return None if value is None else str(value)


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def save_keeper_state(keeper_id: str, state: Mapping[str, object], clock: Clock) -> Op[None]:
    """Replace the keeper's document and its read-only projection tables."""
    _check_str(keeper_id, "keeper_id")
    if not isinstance(state, Mapping):
        raise InvalidArgumentType(f"state must be a mapping, not {type(state).__name__}")
    body = dump_json(dict(state), "keeper state")
    _check_no_cookie_values(state)
    _scan_for_secrets(state, "$")
    now = clock.now()
    yield Q(
        "upsert_keeper_state",
        "INSERT INTO keeper_state (keeper_id, body, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (keeper_id) DO UPDATE SET body = excluded.body, "
        "updated_at = excluded.updated_at",
        (keeper_id, body, now),
    )
    for table in ("keeper_generations", "keeper_logins", "keeper_grants", "keeper_tabs"):
        yield Q(f"clear_{table}", f"DELETE FROM {table} WHERE keeper_id = ?", (keeper_id,))
    seen_generations: set[int] = set()
    for item in _dicts(state.get("generations")):
        generation = _opt_int(item.get("generation"))
        if generation is None or generation in seen_generations:
            continue
        seen_generations.add(generation)
        yield Q(
            "insert_generation",
            "INSERT INTO keeper_generations (keeper_id, generation, started_at, ended_at, cause) "
            "VALUES (?, ?, ?, ?, ?)",
            (
                keeper_id,
                generation,
                _opt_text(item.get("started_at")),
                _opt_text(item.get("ended_at")),
                _opt_text(item.get("cause")),
            ),
        )
    for seq, item in enumerate(_dicts(state.get("logins"))):
        cookies = [
            {"name": _opt_text(c.get("name")), "fingerprint": _opt_text(c.get("fingerprint"))}
            for c in _dicts(item.get("cookies"))
        ]
        yield Q(
            "insert_login",
            "INSERT INTO keeper_logins (keeper_id, seq, site, owner, account, generation, "
            "recorded_at, cookies) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                keeper_id,
                seq,
                _opt_text(item.get("site")),
                _opt_text(item.get("owner")),
                _opt_text(item.get("account")),
                _opt_int(item.get("generation")),
                _opt_text(item.get("recorded_at")),
                dump_json(cookies, "cookies"),
            ),
        )
    for seq, item in enumerate(_dicts(state.get("grants"))):
        yield Q(
            "insert_grant",
            "INSERT INTO keeper_grants (keeper_id, seq, body) VALUES (?, ?, ?)",
            (keeper_id, seq, dump_json(dict(item), "grant")),
        )
    for seq, item in enumerate(_dicts(state.get("tabs"))):
        url = item.get("last_verified_url") or item.get("last_url") or item.get("url")
        yield Q(
            "insert_tab",
            "INSERT INTO keeper_tabs (keeper_id, seq, conversation, last_verified_url, body) "
            "VALUES (?, ?, ?, ?, ?)",
            (
                keeper_id,
                seq,
                _opt_text(item.get("conversation")),
                _opt_text(url),
                dump_json(dict(item), "tab"),
            ),
        )


def load_keeper_state(keeper_id: str) -> Op[dict[str, object] | None]:
    """The keeper's document, or ``None`` if it never saved one."""
    _check_str(keeper_id, "keeper_id")
    rows = yield Q(
        "select_keeper_state", "SELECT body FROM keeper_state WHERE keeper_id = ?", (keeper_id,)
    )
    if not rows:
        return None
    return _load_mapping(rows[0][0], f"keeper state {keeper_id!r}")


def keeper_ids() -> Op[list[str]]:
    """Every keeper id with a saved document."""
    rows = yield Q("select_keeper_ids", "SELECT keeper_id FROM keeper_state ORDER BY keeper_id")
    return [str(r[0]) for r in rows]


# ---------------------------------------------------------------- events


def append_event(event: Event) -> Op[Event]:
    """Append ``event``; returns it with the id the store gave it."""
    if not isinstance(event, Event):
        raise InvalidArgumentType(f"event must be an Event, not {type(event).__name__}")
    return (yield from _insert_event(_event_values(event)))


def _event_from_row(row: Row) -> Event:
    event_id, at, kind, *rest = row
    data = _load_mapping(rest[-1], f"event {event_id} data")
    fields = dict(zip(EVENT_COLUMNS, rest[:-1], strict=True))
    try:
        return Event(id=int(event_id), at=as_dt(at), kind=kind, data=data, **fields)
    except (InvalidArgument, TypeError) as exc:
        raise StoreCorrupt(f"event {event_id} is malformed: {exc}") from None


def events(
    job_id: str | None, since_id: int | None, kind: str | None, limit: int, newest_first: bool
) -> Op[list[Event]]:
    """Events matching the filters, by id."""
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
    return [_event_from_row(r) for r in rows]


# ---------------------------------------------------------------- jobs


_JOB_SELECT: Final = (
    "SELECT j.job_id, j.contract, c.state, c.revision, c.body, j.submitted_at, "
    "c.updated_at, l.owner, l.token, l.expires_at FROM jobs j "
    "JOIN checkpoints c ON c.job_id = j.job_id "
    "LEFT JOIN leases l ON l.job_id = j.job_id"
)


def _job_from_row(row: Row) -> Job:
    job_id, contract_text, state, revision, body, submitted_at, updated_at, owner, token, exp = row
    try:
        contract = JobContract.from_json(contract_text)
    except ContractError as exc:
        raise StoreCorrupt(f"job {job_id!r}: stored contract is malformed ({exc})") from None
    if contract.job_id != job_id:
        raise StoreCorrupt(f"job {job_id!r}: stored contract names another job")
    checkpoint = _checkpoint_from_row(job_id, state, revision, body)
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


def submit_job(contract: JobContract, clock: Clock) -> Op[tuple[Job, Event | None]]:
    """Create the job in ``ready`` at revision 0, or return it if already submitted."""
    if not isinstance(contract, JobContract):
        raise InvalidArgumentType(f"contract must be a JobContract, not {type(contract).__name__}")
    contract_json = contract.to_json()  # ContractError before any write
    now = clock.now()
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
        rows = yield Q("select_job", f"{_JOB_SELECT} WHERE j.job_id = ?", (contract.job_id,))
        existing = _job_from_row(rows[0])
        if existing.contract != contract:
            raise ContractError(f"job {contract.job_id!r} exists with a different contract")
        return existing, None
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
    event = yield from _insert_event(
        {"kind": "job_submitted", "at": now, "job_id": contract.job_id, "revision": 0}
    )
    job = Job(
        contract=contract, checkpoint=checkpoint, lease=None, submitted_at=now, updated_at=now
    )
    return job, event


def load_job(job_id: str) -> Op[Job]:
    """The job, or :class:`JobNotFound`."""
    _check_str(job_id, "job_id")
    rows = yield Q("select_job", f"{_JOB_SELECT} WHERE j.job_id = ?", (job_id,))
    if not rows:
        raise JobNotFound(f"no job {job_id!r}")
    return _job_from_row(rows[0])


def list_jobs(states: Iterable[str] | None) -> Op[list[Job]]:
    """Jobs (optionally only in ``states``) in submission order."""
    params: tuple[object, ...] = ()
    clause = ""
    if states is not None:
        wanted = tuple(states)
        bad = [s for s in wanted if s not in JOB_STATES]
        if bad:
            raise InvalidArgument(f"unknown job states: {bad}")
        if not wanted:
            return []
        clause = f" WHERE c.state IN ({', '.join('?' for _ in wanted)})"
        params = wanted
    rows = yield Q(
        "select_jobs", f"{_JOB_SELECT}{clause} ORDER BY j.submitted_at, j.job_id", params
    )
    return [_job_from_row(r) for r in rows]


# ---------------------------------------------------------------- leases


def claim(job_id: str, owner: str, ttl: timedelta, clock: Clock) -> Op[tuple[Lease, Event]]:
    """Take the job's lease if it is free or expired; the token grows by one."""
    _check_str(job_id, "job_id")
    _check_str(owner, "owner")
    _check_ttl(ttl)
    now = clock.now()
    rows = yield Q(
        "lock_lease",
        "SELECT owner, token, expires_at FROM leases WHERE job_id = ?",
        (job_id,),
        " FOR UPDATE",
    )
    if not rows:
        raise JobNotFound(f"no job {job_id!r}")
    return (yield from _take_lease(job_id, owner, ttl, now, rows[0]))


def _take_lease(
    job_id: str, owner: str, ttl: timedelta, now: datetime, row: Row
) -> Op[tuple[Lease, Event]]:
    holder, token, expires_at = row
    if holder is not None and expires_at is not None and as_dt(expires_at) > now:
        raise LeaseHeldError(
            f"job {job_id!r} is leased by {holder!r} until {as_dt(expires_at).isoformat()}"
        )
    lease = Lease(job_id=job_id, owner=owner, token=int(token) + 1, expires_at=now + ttl)
    yield Q(
        "update_lease",
        "UPDATE leases SET owner = ?, token = ?, expires_at = ? WHERE job_id = ?",
        (owner, lease.token, lease.expires_at, job_id),
    )
    data: dict[str, object] = {"token": lease.token, "ttl_s": ttl.total_seconds()}
    if holder is not None:
        data["took_over_from"] = holder
    event = yield from _insert_event(
        {"kind": "lease_claimed", "at": now, "job_id": job_id, "lease_owner": owner, "data": data}
    )
    return lease, event


def claim_next_ready(owner: str, ttl: timedelta, clock: Clock) -> Op[tuple[Lease, Event] | None]:
    """Claim the oldest claimable job with a free or expired lease, or return ``None``."""
    _check_str(owner, "owner")
    _check_ttl(ttl)
    now = clock.now()
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


def extend(lease: Lease, ttl: timedelta, clock: Clock) -> Op[Lease]:
    """Move a current lease's expiry to ``now + ttl``; the token stays."""
    _check_lease_arg(lease)
    _check_ttl(ttl)
    now = clock.now()
    yield from _lock_lease(lease, now)
    renewed = attrs.evolve(lease, expires_at=now + ttl)
    yield Q(
        "update_lease",
        "UPDATE leases SET expires_at = ? WHERE job_id = ?",
        (renewed.expires_at, lease.job_id),
    )
    return renewed


def release(lease: Lease, clock: Clock) -> Op[Event]:
    """Free the lease (expired or not) if its token is still the current one."""
    _check_lease_arg(lease)
    now = clock.now()
    rows = yield Q(
        "lock_lease",
        "SELECT owner, token FROM leases WHERE job_id = ?",
        (lease.job_id,),
        " FOR UPDATE",
    )
    if not rows:
        raise JobNotFound(f"no job {lease.job_id!r}")
    owner, token = rows[0]
    if owner != lease.owner or token != lease.token:
        raise StaleLeaseError(
            f"lease on job {lease.job_id!r} with token {lease.token} is stale (current {token})"
        )
    yield Q(
        "update_lease",
        "UPDATE leases SET owner = NULL, expires_at = NULL WHERE job_id = ?",
        (lease.job_id,),
    )
    return (
        yield from _insert_event(
            {
                "kind": "lease_released",
                "at": now,
                "job_id": lease.job_id,
                "lease_owner": lease.owner,
                "data": {"token": lease.token},
            }
        )
    )


# ---------------------------------------------------------------- job mutations


def transition(
    lease: Lease,
    expected_revision: int,
    state: JobState,
    pause_reason: str | None,
    attempts_used: int | None,
    event: Event | None,
    clock: Clock,
) -> Op[tuple[Checkpoint, Event]]:
    """Move the job to ``state`` (see :data:`ALLOWED_TRANSITIONS`), revision + 1."""
    _check_lease_arg(lease)
    _check_revision(expected_revision)
    if state not in JOB_STATES:
        raise InvalidArgument(f"unknown job state {state!r}")
    if pause_reason is not None and not isinstance(pause_reason, str):
        raise InvalidArgumentType("pause_reason must be a str or None")
    if state == "awaiting_human" and not pause_reason:
        raise InvalidArgument("awaiting_human needs a pause_reason a person can act on")
    attempts = _check_attempts(attempts_used)
    now = clock.now()
    current = yield from _lock_lease_and_job(lease, now, expected_revision)
    if state not in ALLOWED_TRANSITIONS[current.state]:
        raise InvalidTransition(f"job {lease.job_id!r} cannot go from {current.state} to {state}")
    if attempts is not None and attempts < current.attempts_used:
        raise InvalidArgument("attempts_used never goes back (the budget would silently reset)")
    new = attrs.evolve(
        current,
        state=state,
        pause_reason=pause_reason,
        attempts_used=current.attempts_used if attempts is None else attempts,
        checkpoint_revision=current.checkpoint_revision + 1,
    )
    yield from _write_checkpoint(current, new, now)
    logged = yield from _insert_event(
        _job_event(
            event,
            "job_state_changed",
            now,
            lease,
            new,
            {"from": current.state, "to": state, "pause_reason": pause_reason},
        )
    )
    return new, logged


@attrs.frozen(kw_only=True)
class PreparedPage:
    """A page commit's arguments, checked and serialised before any transaction."""

    lease: Lease
    expected_revision: int
    #: The number of records passed (duplicates by source_record_id included).
    record_count: int
    #: True when at least one record was passed.
    has_records: bool
    #: The page as one JSON array of ``[source_record_id, data]`` pairs.
    page_json: str
    next_cursor: str | None
    step: str
    artifact: ArtifactRef | None
    attempts_used: int | None
    state: JobState


def prepare_page(
    lease: Lease,
    expected_revision: int,
    records: Sequence[ResultRecord],
    next_cursor: str | None,
    step: str,
    artifact: ArtifactRef | None,
    attempts_used: int | None,
    state: JobState | None,
) -> PreparedPage:
    """Check and serialise a page commit; pure, so it runs on the caller's thread.

    Raises the same typed errors as the commit would, before anything is written.
    """
    _check_lease_arg(lease)
    _check_revision(expected_revision)
    _check_str(step, "step")
    if next_cursor is not None and not isinstance(next_cursor, str):
        raise InvalidArgumentType("next_cursor must be a str or None")
    if isinstance(records, str | bytes) or not isinstance(records, Sequence):
        raise InvalidArgumentType("records must be a sequence of ResultRecord")
    if not all(isinstance(r, ResultRecord) for r in records):
        raise InvalidArgumentType("records must be a sequence of ResultRecord")
    if artifact is not None and not isinstance(artifact, ArtifactRef):
        raise InvalidArgumentType("artifact must be an ArtifactRef or None")
    final_state: JobState = "running" if state is None else state
    if final_state not in ALLOWED_TRANSITIONS["running"]:
        raise InvalidArgument(f"unknown job state {final_state!r}")
    if final_state == "awaiting_human":
        raise InvalidArgument("pause with transition(), which records a pause_reason")
    attempts = _check_attempts(attempts_used)
    unique: dict[str, Mapping[str, object]] = {}
    for record in records:
        if record.source_record_id not in unique:
            unique[record.source_record_id] = record.data
    # The whole page travels as one JSON array of [source_record_id, data] pairs: one
    # encode and one bound parameter instead of one per record and six per row.
    # Serialised before the transaction starts, so bad data never half-writes.
    page_json = dump_json([[rid, dict(data)] for rid, data in unique.items()], "record data")
    return PreparedPage(
        lease=lease,
        expected_revision=expected_revision,
        record_count=len(records),
        has_records=bool(unique),
        page_json=page_json,
        next_cursor=next_cursor,
        step=step,
        artifact=artifact,
        attempts_used=attempts,
        state=final_state,
    )


def commit_page(
    page: PreparedPage, event: Event | None, clock: Clock
) -> Op[tuple[CommitResult, Event]]:
    """Results, artifact reference, cursor and revision: all in one transaction."""
    if not isinstance(page, PreparedPage):
        raise InvalidArgumentType("commit_page takes a PreparedPage (see prepare_page)")
    lease, expected_revision, step = page.lease, page.expected_revision, page.step
    artifact, attempts, next_cursor = page.artifact, page.attempts_used, page.next_cursor
    final_state, page_json = page.state, page.page_json
    now = clock.now()

    current = yield from _lock_lease_and_job(lease, now, expected_revision)
    if current.state != "running":
        raise InvalidTransition(
            f"job {lease.job_id!r} is {current.state}; pages are committed only while running"
        )
    if attempts is not None and attempts < current.attempts_used:
        raise InvalidArgument("attempts_used never goes back (the budget would silently reset)")
    if artifact is not None:
        # Checks the artifact exists and marks it referenced in one statement; on
        # PostgreSQL the row lock also holds off a concurrent collection.
        found = yield Q(
            "reference_artifact",
            "UPDATE artifacts SET referenced_at = ? WHERE digest = ? AND size = ? RETURNING digest",
            (now, artifact.digest, artifact.size),
        )
        if not found:
            raise ArtifactNotFound(
                f"artifact {artifact.digest} was not written and verified before the commit"
            )

    new_revision = current.checkpoint_revision + 1
    new_records = 0
    if page.has_records:
        inserted = yield Q(
            "insert_results",
            # ("WHERE true" resolves SQLite's INSERT ... SELECT ... ON CONFLICT ambiguity.)
            "INSERT INTO results (job_id, source_record_id, data, revision, ordinal, step) "
            "SELECT ?, json_extract(value, '$[0]'), json_extract(value, '$[1]'), ?, key, ? "
            "FROM json_each(?) WHERE true "
            "ON CONFLICT (job_id, source_record_id) DO NOTHING RETURNING source_record_id",
            (lease.job_id, new_revision, step, page_json),
            pg_sql=(
                "INSERT INTO results (job_id, source_record_id, data, revision, ordinal, step) "
                "SELECT %s::text, e ->> 0, (e -> 1)::text, %s::bigint, ord - 1, %s::text "
                "FROM json_array_elements(%s::json) WITH ORDINALITY AS t(e, ord) "
                "ON CONFLICT (job_id, source_record_id) DO NOTHING RETURNING source_record_id"
            ),
        )
        new_records = len(inserted)

    new = attrs.evolve(
        current,
        state=final_state,
        last_committed_step=step,
        next_cursor=next_cursor,
        accepted_artifact=None if artifact is None else artifact.name,
        artifact_digest=None if artifact is None else artifact.digest,
        checkpoint_revision=new_revision,
        attempts_used=current.attempts_used if attempts is None else attempts,
        pause_reason=None,
    )
    yield from _write_checkpoint(current, new, now)
    already = page.record_count - new_records
    logged = yield from _insert_event(
        _job_event(
            event,
            "page_committed",
            now,
            lease,
            new,
            {"new_records": new_records, "already_present": already, "next_cursor": next_cursor},
            step=step,
            artifact=None if artifact is None else artifact.digest,
        )
    )
    assert logged.id is not None
    result = CommitResult(
        checkpoint=new, new_records=new_records, already_present=already, event_id=logged.id
    )
    return result, logged


def results(job_id: str) -> Op[list[StoredResult]]:
    """Committed results of the job, in commit order."""
    _check_str(job_id, "job_id")
    rows = yield Q(
        "select_results",
        "SELECT job_id, source_record_id, data, revision, step FROM results "
        "WHERE job_id = ? ORDER BY revision, ordinal",
        (job_id,),
    )
    return [
        StoredResult(
            job_id=r[0],
            source_record_id=r[1],
            data=_load_mapping(r[2], f"result {r[1]!r}"),
            revision=int(r[3]),
            step=r[4],
        )
        for r in rows
    ]


def count_results(job_id: str) -> Op[int]:
    """How many results the job has."""
    _check_str(job_id, "job_id")
    rows = yield Q("count_results", "SELECT COUNT(*) FROM results WHERE job_id = ?", (job_id,))
    return int(rows[0][0])


# ---------------------------------------------------------------- artifacts


def write_artifact(data: bytes, clock: Clock) -> Op[str]:
    """Store the bytes under their digest (re-writing refreshes the collection grace)."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidArgumentType("artifact data must be bytes")
    blob = bytes(data)
    digest = digest_of(blob)
    yield Q(
        "insert_artifact",
        "INSERT INTO artifacts (digest, size, data, created_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (digest) DO UPDATE SET created_at = excluded.created_at",
        (digest, len(blob), blob, clock.now()),
    )
    return digest


def read_artifact(digest: str) -> Op[bytes]:
    """The artifact's bytes, checked against their digest."""
    _check_str(digest, "digest")
    rows = yield Q("select_artifact", "SELECT data FROM artifacts WHERE digest = ?", (digest,))
    if not rows:
        raise ArtifactNotFound(f"no artifact {digest}")
    data = bytes(rows[0][0])
    if digest_of(data) != digest:
        raise StoreCorrupt(f"artifact {digest} does not match its digest")
    return data


def collect_unreferenced_artifacts(older_than: timedelta, clock: Clock) -> Op[list[str]]:
    """Delete artifacts no commit referenced, written more than ``older_than`` ago."""
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        raise InvalidArgument("older_than must be a non-negative timedelta")
    cutoff = clock.now() - older_than
    candidates = yield Q(
        "select_unreferenced",
        "SELECT digest FROM artifacts WHERE created_at < ? AND referenced_at IS NULL",
        (cutoff,),
        # Skip artifacts a commit is referencing right now (it holds their row lock).
        " FOR UPDATE SKIP LOCKED",
    )
    collected: list[str] = []
    for (digest,) in candidates:
        rows = yield Q(
            "delete_artifact",
            "DELETE FROM artifacts WHERE digest = ? AND referenced_at IS NULL RETURNING digest",
            (digest,),
        )
        collected.extend(str(r[0]) for r in rows)
    return collected


# ---------------------------------------------------------------- external writes


def _write_from_row(row: Row) -> ExternalWrite:
    job_id, key, status, intent, outcome, token, created_at, updated_at = row
    if status not in WRITE_STATUSES:
        raise StoreCorrupt(f"external write {key!r} has unknown status {status!r}")
    return ExternalWrite(
        job_id=job_id,
        key=key,
        status=status,
        intent=_load_mapping(intent, f"external write {key!r} intent"),
        outcome=None if outcome is None else _load_mapping(outcome, "external write outcome"),
        lease_token=int(token),
        created_at=as_dt(created_at),
        updated_at=as_dt(updated_at),
    )


_WRITE_SELECT: Final = (
    "SELECT job_id, key, status, intent, outcome, lease_token, created_at, updated_at "
    "FROM external_writes"
)


def record_write_intent(
    lease: Lease, key: str, intent: Mapping[str, object], clock: Clock
) -> Op[tuple[ExternalWrite, Event | None]]:
    """Record that the job is about to act outside the store; an existing record wins."""
    _check_lease_arg(lease)
    _check_str(key, "key")
    if not isinstance(intent, Mapping):
        raise InvalidArgumentType("intent must be a mapping")
    intent_json = dump_json(dict(intent), "intent")
    now = clock.now()
    yield from _lock_lease(lease, now)
    existing = yield Q(
        "select_write",
        f"{_WRITE_SELECT} WHERE job_id = ? AND key = ?",
        (lease.job_id, key),
        " FOR UPDATE",
    )
    if existing:
        # Never overwrite: an earlier attempt may have acted; the caller must read status.
        return _write_from_row(existing[0]), None
    yield Q(
        "insert_write",
        "INSERT INTO external_writes (job_id, key, status, intent, outcome, lease_token, "
        "created_at, updated_at) VALUES (?, ?, 'intent', ?, NULL, ?, ?, ?)",
        (lease.job_id, key, intent_json, lease.token, now, now),
    )
    event = yield from _insert_event(
        {
            "kind": "external_write_intent",
            "at": now,
            "job_id": lease.job_id,
            "lease_owner": lease.owner,
            "data": {"key": key},
        }
    )
    write = ExternalWrite(
        job_id=lease.job_id,
        key=key,
        status="intent",
        intent=dict(intent),
        outcome=None,
        lease_token=lease.token,
        created_at=now,
        updated_at=now,
    )
    return write, event


def resolve_write(
    lease: Lease,
    key: str,
    status: WriteStatus,
    outcome: Mapping[str, object] | None,
    clock: Clock,
) -> Op[tuple[ExternalWrite, Event]]:
    """Move an external write forward (see :data:`WRITE_TRANSITIONS`)."""
    _check_lease_arg(lease)
    _check_str(key, "key")
    if status not in WRITE_STATUSES or status == "intent":
        raise InvalidArgument(f"status must be confirmed, unknown or reconciled, not {status!r}")
    if outcome is not None and not isinstance(outcome, Mapping):
        raise InvalidArgumentType("outcome must be a mapping or None")
    outcome_json = None if outcome is None else dump_json(dict(outcome), "outcome")
    now = clock.now()
    yield from _lock_lease(lease, now)
    rows = yield Q(
        "select_write",
        f"{_WRITE_SELECT} WHERE job_id = ? AND key = ?",
        (lease.job_id, key),
        " FOR UPDATE",
    )
    if not rows:
        raise InvalidTransition(f"no intent recorded for external write {key!r}")
    current = _write_from_row(rows[0])
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
    event = yield from _insert_event(
        {
            "kind": f"external_write_{status}",
            "at": now,
            "job_id": lease.job_id,
            "lease_owner": lease.owner,
            "data": {"key": key, "from": current.status},
        }
    )
    resolved = attrs.evolve(
        current,
        status=status,
        outcome=None if outcome is None else dict(outcome),
        lease_token=lease.token,
        updated_at=now,
    )
    return resolved, event


def external_writes(job_id: str) -> Op[list[ExternalWrite]]:
    """The job's external writes, oldest first."""
    _check_str(job_id, "job_id")
    rows = yield Q(
        "select_writes",
        f"{_WRITE_SELECT} WHERE job_id = ? ORDER BY created_at, key",
        (job_id,),
    )
    return [_write_from_row(r) for r in rows]
