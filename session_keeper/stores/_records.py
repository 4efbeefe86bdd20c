"""The facts that cross the Store boundary: frozen, keyword-only attrs records.

Everything here is plain data. Nothing holds a cookie value, password or token:
the keeper hands the store fingerprints and names only, and a job contract names
an *account alias*, never a credential.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

import attrs

from session_keeper._model.events import EventKind
from session_keeper._model.origins import parse_origins
from session_keeper.errors import (
    ContractError,
    InvalidArgument,
    InvalidArgumentType,
    SchemaVersionError,
    StoreCorrupt,
)

#: The checkpoint JSON layout this code writes and reads (its ``schema_version`` field);
#: a checkpoint of any other version is refused rather than misread.
CHECKPOINT_SCHEMA_VERSION: Final = 1
#: The job contract JSON layout this code writes and reads.
CONTRACT_SCHEMA_VERSION: Final = 1

JobState = Literal["ready", "running", "awaiting_human", "reconciling", "done", "failed", "stopped"]
JOB_STATES: Final[frozenset[str]] = frozenset(get_args(JobState))
#: States a job never leaves: a safe stop is terminal but is not completion.
TERMINAL_STATES: Final[frozenset[str]] = frozenset({"done", "failed", "stopped"})
#: Which state may follow which. Staying in ``running`` is allowed (to persist attempts).
ALLOWED_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        "ready": frozenset({"ready", "running", "awaiting_human", "failed", "stopped"}),
        "running": frozenset(
            {"ready", "running", "awaiting_human", "reconciling", "done", "failed", "stopped"}
        ),
        "awaiting_human": frozenset({"ready", "running", "awaiting_human", "failed", "stopped"}),
        "reconciling": frozenset(
            {"ready", "running", "awaiting_human", "reconciling", "done", "failed", "stopped"}
        ),
        "done": frozenset(),
        "failed": frozenset(),
        "stopped": frozenset(),
    }
)

WriteStatus = Literal["intent", "confirmed", "unknown", "reconciled"]
WRITE_STATUSES: Final[frozenset[str]] = frozenset(get_args(WriteStatus))
#: An external write moves forward only: an intent becomes confirmed or unknown; an
#: unknown outcome is settled by a readback (confirmed) or by a person (reconciled).
WRITE_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        "intent": frozenset({"confirmed", "unknown", "reconciled"}),
        "unknown": frozenset({"confirmed", "reconciled"}),
        "confirmed": frozenset(),
        "reconciled": frozenset(),
    }
)


# ---------------------------------------------------------------- helpers


def utc(value: datetime) -> datetime:
    """``value`` in UTC; naive datetimes are refused because their zone is a guess."""
    if not isinstance(value, datetime):
        raise InvalidArgumentType(f"expected a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument("datetimes must be timezone-aware")
    return value.astimezone(UTC)


#: One shared encoder: ``json.dumps`` with options builds a new encoder per call, and a
#: page commit encodes a dozen documents.
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dump_json(value: object, what: str) -> str:
    """Compact, strict JSON (no NaN); a value JSON cannot hold is the caller's error."""
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{what} is not JSON-serialisable: {exc}") from None


def _opt_utc(value: datetime | None) -> datetime | None:
    return None if value is None else utc(value)


def _frozen_mapping(value: Mapping[str, object] | None) -> Mapping[str, object]:
    # A read-only view so a frozen record cannot be changed through its mapping.
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise InvalidArgumentType(f"expected a mapping, not {type(value).__name__}")
    return MappingProxyType(dict(value))


def _non_empty_str(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{attribute.name} must be a str, not {type(value).__name__}")
    if not value.strip():
        raise InvalidArgument(f"{attribute.name} must not be empty")


def _opt_str(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise InvalidArgumentType(f"{attribute.name} must be a str or None")


def _non_negative_int(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentType(f"{attribute.name} must be an int")
    if value < 0:
        raise InvalidArgument(f"{attribute.name} must not be negative")


def _opt_int(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise InvalidArgumentType(f"{attribute.name} must be an int or None")


def _opt_float(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise InvalidArgumentType(f"{attribute.name} must be a number or None")
    if not math.isfinite(value):
        raise InvalidArgument(f"{attribute.name} must be finite")


def _job_state(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in JOB_STATES:
        raise InvalidArgument(f"{attribute.name} must be one of {sorted(JOB_STATES)}")


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _parse_dt(value: object, what: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise StoreCorrupt(f"{what} is not an ISO timestamp")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise StoreCorrupt(f"{what} is not an ISO timestamp") from None
    if parsed.tzinfo is None:
        raise StoreCorrupt(f"{what} has no time zone")
    return parsed.astimezone(UTC)


# ---------------------------------------------------------------- leases


@attrs.frozen(kw_only=True)
class Lease:
    """Ownership of one job until ``expires_at``; ``token`` fences out older owners.

    The store increases ``token`` on every successful claim of the job, so a worker
    that lost its lease (expired, then claimed by another) carries a smaller token
    and every mutating call it makes is rejected with :class:`StaleLeaseError`.
    """

    job_id: str = attrs.field(validator=_non_empty_str)
    owner: str = attrs.field(validator=_non_empty_str)
    token: int = attrs.field(validator=_non_negative_int)
    expires_at: datetime = attrs.field(converter=utc)


@attrs.frozen(kw_only=True)
class ProfileLease:
    """Use of one browser profile by one holder until ``expires_at``.

    ``token`` grows on every acquisition of the profile, so a holder whose lease ran
    out (and maybe was taken by another) carries a smaller or expired token, and every
    write it fences with it is refused with :class:`ProfileLeaseLost`.
    """

    profile: str = attrs.field(validator=_non_empty_str)
    owner: str = attrs.field(validator=_non_empty_str)
    token: int = attrs.field(validator=_non_negative_int)
    expires_at: datetime = attrs.field(converter=utc)


@attrs.frozen(kw_only=True)
class WriteIntent:
    """The intent to submit one external write, recorded before a step submits it.

    A durable step's attempt records it (with the renewal of the profile lease that
    fences the submit, :meth:`~session_keeper.stores.ProfileLeaseStore.intend_write`)
    before it sends anything: an attempt that finds one recorded already reads the
    destination back first, whatever its engine says about attempts.
    """

    #: The write's idempotency key, derived from the workflow, the step and the write's
    #: name (never a cookie, password or token).
    key: str = attrs.field(validator=_non_empty_str)
    #: The profile lease, renewed in the same transaction.
    lease: ProfileLease
    #: ``True`` when no attempt had recorded ``key`` before this one.
    first: bool
    #: When ``key``'s intent was first recorded.
    recorded_at: datetime = attrs.field(converter=utc)


# ---------------------------------------------------------------- contracts


def _str_tuple(value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        raise InvalidArgumentType("expected a sequence of str")
    items = list(value)
    if not all(isinstance(v, str) and v for v in items):
        raise InvalidArgument("expected non-empty str items")
    # Sets have no order; sort them so the same contract always serialises the same.
    return tuple(sorted(items)) if isinstance(value, set | frozenset) else tuple(items)


def _origins(_inst: object, _attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    parse_origins(value)


@attrs.frozen(kw_only=True)
class JobContract:
    """What a job may do and when it is finished: its site, origins, actions and budgets.

    ``account_alias`` names the intended account, never its credentials. ``login_url``
    is a glob (``fnmatch``, case-sensitive) for the site's sign-in page, matched against
    the page's whole URL and against it without query and fragment
    (``"http://catalogue.example/login*"``): a step that lands there means the site
    signed the job out. ``extra`` carries loop-specific settings as JSON. Construction
    validates every field; :meth:`from_json` raises :class:`ContractError` for anything malformed.
    """

    job_id: str = attrs.field(validator=_non_empty_str)
    site: str | None = attrs.field(default=None, validator=_opt_str)
    #: Origins the job's pages may show (see ``session_keeper._model.origins`` for the rule:
    #: scheme + host must match, the port only when an entry names one). Malformed
    #: entries raise :class:`InvalidArgument` here (:class:`ContractError` from JSON).
    allowed_origins: tuple[str, ...] = attrs.field(
        default=(), converter=_str_tuple, validator=_origins
    )
    allowed_actions: tuple[str, ...] = attrs.field(default=("read",), converter=_str_tuple)
    account_alias: str | None = attrs.field(default=None, validator=_opt_str)
    input_manifest: str | None = attrs.field(default=None, validator=_opt_str)
    source_view: str | None = attrs.field(default=None, validator=_opt_str)
    required_fields: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    stop_condition: str | None = attrs.field(default=None, validator=_opt_str)
    start_cursor: str | None = attrs.field(default=None, validator=_opt_str)
    deadline_at: datetime | None = attrs.field(default=None, converter=_opt_utc)
    max_attempts: int | None = attrs.field(default=None, validator=_opt_int)
    step_timeout_s: float | None = attrs.field(default=None, validator=_opt_float)
    no_progress_limit_s: float | None = attrs.field(default=None, validator=_opt_float)
    extra: Mapping[str, object] = attrs.field(factory=dict, converter=_frozen_mapping)
    login_url: str | None = attrs.field(default=None, validator=_opt_str)

    def to_dict(self) -> dict[str, object]:
        """The contract as JSON-ready data, ``schema_version`` first."""
        return {
            "schema_version": CONTRACT_SCHEMA_VERSION,
            "job_id": self.job_id,
            "site": self.site,
            "allowed_origins": list(self.allowed_origins),
            "allowed_actions": list(self.allowed_actions),
            "account_alias": self.account_alias,
            "input_manifest": self.input_manifest,
            "source_view": self.source_view,
            "required_fields": list(self.required_fields),
            "stop_condition": self.stop_condition,
            "start_cursor": self.start_cursor,
            "deadline_at": _iso(self.deadline_at),
            "max_attempts": self.max_attempts,
            "step_timeout_s": self.step_timeout_s,
            "no_progress_limit_s": self.no_progress_limit_s,
            "extra": dict(self.extra),
            "login_url": self.login_url,
        }

    def to_json(self) -> str:
        """Compact JSON; raises :class:`ContractError` if ``extra`` is not JSON."""
        try:
            return dump_json(self.to_dict(), "contract")
        except InvalidArgument as exc:
            raise ContractError(str(exc)) from None

    @classmethod
    def from_json(cls, text: str | bytes) -> JobContract:
        """Parse a contract; :class:`ContractError` for bad JSON, fields or version."""
        try:
            raw = json.loads(text)
        except (ValueError, TypeError):
            raise ContractError("contract is not valid JSON") from None
        if not isinstance(raw, dict):
            raise ContractError("contract must be a JSON object")
        version = raw.pop("schema_version", None)
        if version != CONTRACT_SCHEMA_VERSION:
            raise ContractError(f"unknown contract schema_version {version!r}")
        names = {a.name for a in attrs.fields(cls)}
        unknown = sorted(set(raw) - names)
        if unknown:
            raise ContractError(f"unknown contract fields: {', '.join(unknown)}")
        deadline = raw.get("deadline_at")
        try:
            if deadline is not None:
                raw["deadline_at"] = _parse_dt(deadline, "deadline_at")
            return cls(**raw)
        except (InvalidArgument, TypeError, StoreCorrupt) as exc:
            raise ContractError(f"malformed contract: {exc}") from None


# ---------------------------------------------------------------- checkpoints


@attrs.frozen(kw_only=True)
class Checkpoint:
    """A job's last accepted boundary; its JSON keeps the fields in declaration order,
    ``schema_version`` first, so a stored checkpoint reads the same everywhere.

    ``checkpoint_revision`` grows by one on every accepted change (page commit or
    state transition); a writer must name the revision it read, so a stale writer
    is rejected. ``next_cursor`` never runs ahead of the results committed with it.
    """

    schema_version: int = attrs.field(default=CHECKPOINT_SCHEMA_VERSION)
    job_id: str = attrs.field(validator=_non_empty_str)
    state: JobState = attrs.field(validator=_job_state)
    input_manifest: str | None = attrs.field(default=None, validator=_opt_str)
    account_alias: str | None = attrs.field(default=None, validator=_opt_str)
    source_view: str | None = attrs.field(default=None, validator=_opt_str)
    last_committed_step: str | None = attrs.field(default=None, validator=_opt_str)
    next_cursor: str | None = attrs.field(default=None, validator=_opt_str)
    accepted_artifact: str | None = attrs.field(default=None, validator=_opt_str)
    artifact_digest: str | None = attrs.field(default=None, validator=_opt_str)
    checkpoint_revision: int = attrs.field(default=0, validator=_non_negative_int)
    attempts_used: int = attrs.field(default=0, validator=_non_negative_int)
    deadline_at: datetime | None = attrs.field(default=None, converter=_opt_utc)
    pause_reason: str | None = attrs.field(default=None, validator=_opt_str)

    @schema_version.validator
    def _check_version(self, _attribute: attrs.Attribute[int], value: int) -> None:
        if value != CHECKPOINT_SCHEMA_VERSION:
            raise SchemaVersionError(f"unknown checkpoint schema_version {value!r}")

    def to_dict(self) -> dict[str, object]:
        """JSON-ready data in field order: ``schema_version`` first."""
        out: dict[str, object] = {}
        for field in attrs.fields(Checkpoint):
            value = getattr(self, field.name)
            out[field.name] = _iso(value) if isinstance(value, datetime) else value
        return out

    def to_json(self) -> str:
        """Compact JSON with ``schema_version`` as the first key."""
        return dump_json(self.to_dict(), "checkpoint")

    @classmethod
    def from_json(cls, text: str | bytes) -> Checkpoint:
        """Parse a checkpoint.

        Raises, in this order: :class:`StoreCorrupt` if it is not a JSON object;
        :class:`SchemaVersionError` if ``schema_version`` is missing or not one this
        code knows (checked before any other field, so a newer layout is never
        half-read); :class:`StoreCorrupt` for unknown or ill-typed fields.
        """
        try:
            raw = json.loads(text)
        except (ValueError, TypeError):
            raise StoreCorrupt("checkpoint is not valid JSON") from None
        if not isinstance(raw, dict):
            raise StoreCorrupt("checkpoint must be a JSON object")
        version = raw.get("schema_version")
        if version != CHECKPOINT_SCHEMA_VERSION or isinstance(version, bool):
            raise SchemaVersionError(f"unknown checkpoint schema_version {version!r}")
        names = {a.name for a in attrs.fields(cls)}
        unknown = sorted(set(raw) - names)
        if unknown:
            raise StoreCorrupt(f"unknown checkpoint fields: {', '.join(unknown)}")
        try:
            raw["deadline_at"] = _parse_dt(raw.get("deadline_at"), "deadline_at")
            return cls(**raw)
        except (InvalidArgument, TypeError) as exc:
            raise StoreCorrupt(f"malformed checkpoint: {exc}") from None


# ---------------------------------------------------------------- jobs and results


@attrs.frozen(kw_only=True)
class Job:
    """A job as stored: its contract, its current checkpoint and who holds it."""

    contract: JobContract
    checkpoint: Checkpoint
    #: The current holder, or ``None`` when the lease is free. May be expired.
    lease: Lease | None
    submitted_at: datetime
    updated_at: datetime

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self.contract.job_id

    @property
    def state(self) -> JobState:
        """The job's state, from its checkpoint."""
        return self.checkpoint.state


@attrs.frozen(kw_only=True)
class ResultRecord:
    """One validated record to commit; ``source_record_id`` is its idempotency key."""

    source_record_id: str = attrs.field(validator=_non_empty_str)
    data: Mapping[str, object] = attrs.field(factory=dict, converter=_frozen_mapping)


@attrs.frozen(kw_only=True)
class StoredResult:
    """A committed result row: the first accepted version of ``source_record_id``.

    ``revision`` and ``step`` name the commit that accepted it (its
    ``page_committed`` event has the time).
    """

    job_id: str
    source_record_id: str
    data: Mapping[str, object] = attrs.field(converter=_frozen_mapping)
    revision: int
    step: str


@attrs.frozen(kw_only=True)
class ArtifactRef:
    """An artifact that was written *and* read back with a matching digest."""

    name: str = attrs.field(validator=_non_empty_str)
    #: ``"sha256:<hex>"`` of the bytes.
    digest: str = attrs.field(validator=_non_empty_str)
    size: int = attrs.field(validator=_non_negative_int)


def _artifact_bytes(value: bytes | bytearray | memoryview) -> bytes:
    # Checked at run time too: callers without a type checker pass text.
    if not isinstance(value, bytes | bytearray | memoryview):
        raise InvalidArgumentType(f"artifact data must be bytes, not {type(value).__name__}")
    return bytes(value)


@attrs.frozen(kw_only=True)
class PageArtifact:
    """An artifact's bytes for :meth:`Store.commit_page` to write in the page's own
    transaction: stored (and read back) only if the fenced commit is, never without it."""

    name: str = attrs.field(validator=_non_empty_str)
    # Left out of repr: a page's evidence may be long, and is the caller's to show.
    data: bytes = attrs.field(converter=_artifact_bytes, repr=False)


@attrs.frozen(kw_only=True)
class CommitResult:
    """What one :meth:`Store.commit_page` made durable."""

    checkpoint: Checkpoint
    #: Records stored for the first time by this commit.
    new_records: int
    #: Records whose ``source_record_id`` was already stored (or repeated in the batch);
    #: the first accepted version is kept.
    already_present: int
    #: The id the store gave the commit's event.
    event_id: int
    #: The artifact the new checkpoint names (written and read back), or ``None``.
    artifact: ArtifactRef | None = None


@attrs.frozen(kw_only=True)
class ExternalWrite:
    """An action with effects outside the store, tracked so it is never resubmitted blindly."""

    job_id: str
    key: str
    status: WriteStatus
    intent: Mapping[str, object] = attrs.field(converter=_frozen_mapping)
    outcome: Mapping[str, object] | None
    lease_token: int
    created_at: datetime
    updated_at: datetime


# ---------------------------------------------------------------- events


@attrs.frozen(kw_only=True)
class Event:
    """One structured event for the append-only log: which job, step, attempt, revision,
    lease owner and browser generation, what failed and how much budget is left.

    ``id`` is ``None`` until the store assigns one. ``data`` holds anything else as
    JSON; never put a cookie value, password or token in it.
    """

    #: One of :data:`~session_keeper._model.events.EventKind`. A kind this version does
    #: not know, read from a store another version wrote, is kept as it was stored.
    kind: EventKind = attrs.field(validator=_non_empty_str)
    at: datetime = attrs.field(converter=utc)
    id: int | None = attrs.field(default=None, validator=_opt_int)
    job_id: str | None = attrs.field(default=None, validator=_opt_str)
    step: str | None = attrs.field(default=None, validator=_opt_str)
    attempt: int | None = attrs.field(default=None, validator=_opt_int)
    revision: int | None = attrs.field(default=None, validator=_opt_int)
    lease_owner: str | None = attrs.field(default=None, validator=_opt_str)
    generation: int | None = attrs.field(default=None, validator=_opt_int)
    page_identity: str | None = attrs.field(default=None, validator=_opt_str)
    failure_class: str | None = attrs.field(default=None, validator=_opt_str)
    validation: str | None = attrs.field(default=None, validator=_opt_str)
    artifact: str | None = attrs.field(default=None, validator=_opt_str)
    elapsed_s: float | None = attrs.field(default=None, validator=_opt_float)
    remaining_budget_s: float | None = attrs.field(default=None, validator=_opt_float)
    data: Mapping[str, object] = attrs.field(factory=dict, converter=_frozen_mapping)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready data (``at`` as ISO 8601)."""
        out: dict[str, object] = {}
        for field in attrs.fields(Event):
            value = getattr(self, field.name)
            if isinstance(value, datetime):
                value = value.isoformat()
            elif field.name == "data":
                value = dict(value)
            out[field.name] = value
        return out


#: Event columns after ``id``, ``at``, ``kind``; the store's table has one column each.
EVENT_COLUMNS: Final = (
    "job_id",
    "step",
    "attempt",
    "revision",
    "lease_owner",
    "generation",
    "page_identity",
    "failure_class",
    "validation",
    "artifact",
    "elapsed_s",
    "remaining_budget_s",
)


@attrs.frozen(kw_only=True)
class Pruned:
    """What one retention pass removed."""

    #: How many rows it removed (events, or results).
    removed: int
    #: Events: the id up to which the log was pruned (``None`` when nothing was old
    #: enough). Results: ``None``.
    through_id: int | None = None
