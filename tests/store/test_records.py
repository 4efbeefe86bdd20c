"""The records that cross the Store boundary: JSON layout, validation, typed errors."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta, timezone

import attrs
import pytest

from session_keeper.errors import (
    ContractError,
    InvalidArgument,
    InvalidArgumentType,
    SchemaVersionError,
    StoreCorrupt,
)
from session_keeper.jobs import Checkpoint, JobContract, Lease
from session_keeper.stores import Event
from session_keeper.stores._events import log_event

SEED_FIELDS = [
    "schema_version",
    "job_id",
    "state",
    "input_manifest",
    "account_alias",
    "source_view",
    "last_committed_step",
    "next_cursor",
    "accepted_artifact",
    "artifact_digest",
    "checkpoint_revision",
    "attempts_used",
    "deadline_at",
    "pause_reason",
]


def seed_checkpoint() -> Checkpoint:
    """The seed's illustrative checkpoint."""
    return Checkpoint(
        job_id="catalogue-audit-001",
        state="ready",
        input_manifest="catalogue-fixture-v1",
        account_alias="approved-reader",
        source_view="fixture-snapshot-v1",
        last_committed_step="page-3",
        next_cursor="page-4",
        accepted_artifact="results/page-3.json",
        artifact_digest="sha256:" + "ab" * 32,
        checkpoint_revision=3,
        attempts_used=0,
        deadline_at=datetime(2026, 10, 20, 18, 0, tzinfo=UTC),
    )


def test_checkpoint_json_has_the_seed_fields_in_the_seed_order() -> None:
    """to_json writes exactly the seed's keys, schema_version first."""
    data = json.loads(seed_checkpoint().to_json())
    assert list(data) == SEED_FIELDS
    assert data["schema_version"] == 1
    assert data["pause_reason"] is None


def test_checkpoint_round_trips_through_json() -> None:
    """from_json(to_json(c)) == c, deadline included."""
    checkpoint = seed_checkpoint()
    assert Checkpoint.from_json(checkpoint.to_json()) == checkpoint


def test_checkpoint_of_an_unknown_schema_version_is_refused() -> None:
    """A newer, missing or non-integer schema_version raises SchemaVersionError."""
    data = json.loads(seed_checkpoint().to_json())
    for version in (2, 0, None, "1", True):
        with pytest.raises(SchemaVersionError):
            Checkpoint.from_json(json.dumps({**data, "schema_version": version}))
    without = {k: v for k, v in data.items() if k != "schema_version"}
    with pytest.raises(SchemaVersionError):
        Checkpoint.from_json(json.dumps(without))
    with pytest.raises(SchemaVersionError):
        Checkpoint(schema_version=2, job_id="j", state="ready")


def test_version_is_checked_before_the_other_fields() -> None:
    """A newer checkpoint with fields we do not know reports the version, not the fields."""
    newer = {"schema_version": 2, "job_id": "j", "state": "ready", "new_field": 1}
    with pytest.raises(SchemaVersionError):
        Checkpoint.from_json(json.dumps(newer))


def test_malformed_checkpoint_json_is_store_corrupt() -> None:
    """Bad JSON, a non-object, unknown fields or bad values raise StoreCorrupt."""
    good = json.loads(seed_checkpoint().to_json())
    for text in (
        "{not json",
        "[1, 2]",
        json.dumps({**good, "extra": 1}),
        json.dumps({**good, "state": "sleeping"}),
        json.dumps({**good, "checkpoint_revision": -1}),
        json.dumps({**good, "deadline_at": "tomorrow"}),
        json.dumps({**good, "deadline_at": "2026-10-20T18:00:00"}),
    ):
        with pytest.raises(StoreCorrupt):
            Checkpoint.from_json(text)


def test_checkpoint_is_frozen_and_keyword_only() -> None:
    """A Checkpoint cannot be changed in place or built positionally."""
    checkpoint = seed_checkpoint()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        checkpoint.state = "done"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Checkpoint(1, "j", "ready")  # type: ignore[call-arg]


def test_contract_round_trips_and_normalises_sets() -> None:
    """A contract survives JSON; a set of actions becomes a sorted tuple."""
    contract = JobContract(
        job_id="j",
        allowed_actions={"write", "read"},
        allowed_origins=["https://a.example"],
        deadline_at=datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2))),
        extra={"k": [1, 2]},
    )
    assert contract.allowed_actions == ("read", "write")
    assert contract.deadline_at == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert JobContract.from_json(contract.to_json()) == contract


def test_malformed_contracts_raise_contract_error() -> None:
    """Bad JSON, wrong version, unknown fields and bad values are ContractError (a ValueError)."""
    good = json.loads(JobContract(job_id="j").to_json())
    for text in (
        "nope",
        "[]",
        json.dumps({**good, "schema_version": 9}),
        json.dumps({**good, "surprise": True}),
        json.dumps({**good, "job_id": ""}),
        json.dumps({**good, "allowed_actions": "read"}),
        json.dumps({**good, "deadline_at": "soon"}),
    ):
        with pytest.raises(ContractError):
            JobContract.from_json(text)
    with pytest.raises(ValueError, match="schema_version"):
        JobContract.from_json("{}")
    with pytest.raises(ContractError):
        JobContract(job_id="j", extra={"x": {1, 2}}).to_json()


def test_contract_fields_are_validated_on_construction() -> None:
    """Constructing a contract with bad values raises InvalidArgument(Type)."""
    with pytest.raises(InvalidArgument):
        JobContract(job_id="  ")
    with pytest.raises(InvalidArgumentType):
        JobContract(job_id="j", max_attempts="3")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        JobContract(job_id="j", deadline_at=datetime(2026, 1, 1))  # naive: zone unknown
    with pytest.raises(InvalidArgument):
        JobContract(job_id="j", step_timeout_s=float("inf"))


def test_lease_needs_an_aware_expiry() -> None:
    """A Lease's expiry is converted to UTC; naive datetimes are refused."""
    lease = Lease(
        job_id="j",
        owner="w",
        token=1,
        expires_at=datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=1))),
    )
    assert lease.expires_at == datetime(2026, 1, 1, 11, tzinfo=UTC)
    with pytest.raises(InvalidArgument):
        Lease(job_id="j", owner="w", token=1, expires_at=datetime(2026, 1, 1))


def test_event_data_is_read_only_and_logged_as_json(caplog: pytest.LogCaptureFixture) -> None:
    """Event.data cannot be mutated; log_event writes one JSON object without empty fields."""
    event = Event(kind="page_committed", at=datetime(2026, 1, 1, tzinfo=UTC), data={"n": 1})
    with pytest.raises(TypeError):
        event.data["n"] = 2  # type: ignore[index]
    with caplog.at_level(logging.INFO, logger="session_keeper.events"):
        log_event(event)
    [record] = caplog.records
    assert json.loads(record.getMessage()) == {
        "kind": "page_committed",
        "at": "2026-01-01T00:00:00+00:00",
        "data": {"n": 1},
    }
    assert record.event["kind"] == "page_committed"  # type: ignore[attr-defined]
