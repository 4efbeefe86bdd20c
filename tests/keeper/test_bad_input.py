"""Bad input gets a typed error from the one exception tree, and changes nothing."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from session_keeper import Durability, Grant, SessionKeeper
from session_keeper._keeper.saving.sealed_rows import saved_document
from session_keeper._model.cookies import normalize_site
from session_keeper.errors import (
    InvalidArgument,
    InvalidArgumentType,
    KeeperClosedError,
    LoginNotObserved,
    SessionKeeperError,
    UsageError,
)
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock

from .conftest import Factory


async def test_conversation_id_of_the_wrong_type(make_keeper: Factory) -> None:
    """A non-str conversation id is an InvalidArgumentType (also a TypeError)."""
    keeper = make_keeper()
    bad: Any = 42
    with pytest.raises(InvalidArgumentType) as info:
        await keeper.ensure(bad)
    assert isinstance(info.value, TypeError) and isinstance(info.value, SessionKeeperError)
    assert keeper.generation == 0


async def test_empty_site_and_empty_conversation(make_keeper: Factory) -> None:
    """Empty names are InvalidArgument (also a ValueError)."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    with pytest.raises(InvalidArgument):
        keeper.decide("billing", "  ")
    with pytest.raises(InvalidArgument):
        await keeper.ensure("")
    with pytest.raises(InvalidArgument):
        Grant("billing", "")


def test_grant_rejects_bad_values() -> None:
    """Grants refuse naive expiry, non-positive uses, empty or single-string actions."""
    with pytest.raises(InvalidArgument):
        Grant("billing", "billing.example", expires_at=datetime(2026, 1, 1))
    with pytest.raises(InvalidArgument):
        Grant("billing", "billing.example", uses=0)
    with pytest.raises(InvalidArgument):
        Grant("billing", "billing.example", actions=frozenset())
    with pytest.raises(InvalidArgumentType):
        Grant("billing", "billing.example", actions="read")


async def test_grant_for_unknown_action_changes_nothing(make_keeper: Factory) -> None:
    """A grant naming an unknown action is refused and not added."""
    keeper = make_keeper(grants=[])
    with pytest.raises(InvalidArgument):
        keeper.grant(Grant("billing", "billing.example", actions={"read", "launch-missiles"}))
    assert keeper.grants() == ()


async def test_record_login_without_cookies(make_keeper: Factory) -> None:
    """record_login before the sign-in completed: LoginNotObserved, and no ledger entry."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    with pytest.raises(LoginNotObserved, match=r"billing\.example"):
        await keeper.record_login("billing", "billing.example")
    assert keeper.logins() == ()


async def test_every_method_refuses_after_close(make_keeper: Factory) -> None:
    """After aclose(), each entry point raises KeeperClosedError (a UsageError)."""
    keeper = make_keeper()
    await keeper.aclose()
    with pytest.raises(KeeperClosedError):
        await keeper.ensure("a")
    with pytest.raises(KeeperClosedError):
        keeper.decide("a", "billing.example")
    with pytest.raises(KeeperClosedError):
        await keeper.sweep()
    with pytest.raises(KeeperClosedError):
        await keeper.unguarded_page("a")
    assert issubclass(KeeperClosedError, UsageError)


def test_keeper_options_are_checked(make_keeper: Factory) -> None:
    """Unknown restart policies are refused at construction (the settings groups check
    themselves: see test_settings)."""
    with pytest.raises(InvalidArgument):
        make_keeper(restart_policy={"read": "pray"})
    with pytest.raises(InvalidArgument):
        make_keeper(restart_policy={"teleport": "stop"})


# -- typed errors everywhere: one table per area, each case named after its input ----------


def bad(value: object) -> Any:
    """A malformed argument, passed where the signature says otherwise."""
    return value


KEEPER_OPTIONS: list[tuple[str, dict[str, Any], type[Exception]]] = [
    ("restart_policy=list", {"restart_policy": ["read"]}, InvalidArgumentType),
    ("grants=None", {"grants": None}, InvalidArgumentType),
    ("grants=[str]", {"grants": ["billing.example"]}, InvalidArgumentType),
    ("actions=None", {"actions": None}, InvalidArgumentType),
    ("actions=str", {"actions": "read"}, InvalidArgumentType),
    ("actions=[None]", {"actions": [None]}, InvalidArgumentType),
    ("actions=[NUL]", {"actions": ["re\x00ad"], "grants": []}, InvalidArgument),
    ("idle_timeouts=timedelta", {"idle_timeouts": timedelta(minutes=1)}, InvalidArgumentType),
    ("durability=str", {"durability": "keeper.db"}, InvalidArgumentType),
]


@pytest.mark.parametrize(
    ("options", "error"),
    [pytest.param(o, e, id=i) for i, o, e in KEEPER_OPTIONS],
)
def test_malformed_keeper_options_are_typed_errors_at_construction(
    make_keeper: Factory, options: dict[str, Any], error: type[Exception]
) -> None:
    """Each malformed SessionKeeper option is InvalidArgument(Type), never a raw TypeError."""
    with pytest.raises(error):
        make_keeper(**options)


def _approve(**kw: Any) -> Callable[[SessionKeeper[Any]], object]:
    """approve_borrow with one argument replaced by ``kw``."""
    args: dict[str, Any] = {"site": "billing.example", "action": "write", "approved_by": "alice"}
    args.update(kw)
    conversation = args.pop("conversation", "research")
    return lambda k: k.approve_borrow(conversation, **args)


KEEPER_CALLS: list[tuple[str, Callable[[SessionKeeper[Any]], object], type[Exception]]] = [
    ("approve_borrow(expires_in=60)", _approve(expires_in=bad(60)), InvalidArgumentType),
    ("approve_borrow(expires_in=-5s)", _approve(expires_in=timedelta(seconds=-5)), InvalidArgument),
    ("approve_borrow(expires_in=0)", _approve(expires_in=timedelta(0)), InvalidArgument),
    ("approve_borrow(expires_in=max)", _approve(expires_in=timedelta.max), InvalidArgument),
    ("approve_borrow(approved_by=bad(7))", _approve(approved_by=bad(7)), InvalidArgumentType),
    ("approve_borrow(approved_by=NUL)", _approve(approved_by="al\x00ice"), InvalidArgument),
    ("approve_borrow(conversation=NUL)", _approve(conversation="a\x00b"), InvalidArgument),
    ("approve_borrow(conversation=ESC)", _approve(conversation="a\x1bb"), InvalidArgument),
    ("approve_borrow(site=https://)", _approve(site="https://"), InvalidArgument),
    ("approve_borrow(site=[::1)", _approve(site="[::1"), InvalidArgument),
    ("approve_borrow(site=host:port)", _approve(site="billing.example:https"), InvalidArgument),
    ("approve_borrow(site=space)", _approve(site="billing example"), InvalidArgument),
    (
        "begin_takeover(expires_in=max)",
        lambda k: k.begin_takeover("billing", expires_in=timedelta.max),
        InvalidArgument,
    ),
    (
        "begin_takeover(expires_in=60)",
        lambda k: k.begin_takeover("billing", expires_in=bad(60)),
        InvalidArgumentType,
    ),
    ("ensure(NUL)", lambda k: k.ensure("billing\x00"), InvalidArgument),
    ("ensure(newline)", lambda k: k.ensure("billing\n2"), InvalidArgument),
    ("decide(NUL)", lambda k: k.decide("billing\x00", "billing.example"), InvalidArgument),
    ("revoke(site=NUL)", lambda k: k.revoke("billing", "billing.exa\x00mple"), InvalidArgument),
    ("tab(url=NUL)", lambda k: k.tab("billing", "https://billing.example/\x00"), InvalidArgument),
    (
        "start_sweeper(every=max)",
        lambda k: k.start_sweeper(every=timedelta.max),
        InvalidArgument,
    ),
]


async def _invoke(call: Callable[[SessionKeeper[Any]], object], keeper: SessionKeeper[Any]) -> None:
    result = call(keeper)
    if inspect.isawaitable(result):
        await result


@pytest.mark.parametrize(
    ("call", "error"),
    [pytest.param(c, e, id=i) for i, c, e in KEEPER_CALLS],
)
async def test_malformed_keeper_calls_are_typed_errors_and_the_store_is_unchanged(
    tmp_path: Path,
    clock: FakeClock,
    call: Callable[[SessionKeeper[Any]], object],
    error: type[Exception],
) -> None:
    """A malformed call is InvalidArgument(Type) at the call; the saved document does not change."""
    backend = FakeBackend()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        keeper = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            grants=[Grant("billing", "billing.example")],
        )
        async with keeper:
            await keeper.ensure("billing")
            await keeper.unguarded_page("billing", "https://billing.example/")
            await backend.sign_in("billing.example")
            await keeper.record_login("billing", "billing.example")
            await keeper.persist()
            before = await saved_document(store, "default")
            grants = keeper.grants()
            with pytest.raises(error):
                await _invoke(call, keeper)
            await keeper.persist()
            assert await saved_document(store, "default") == before
            assert keeper.grants() == grants


GRANTS: list[tuple[str, Callable[[], Grant], type[Exception]]] = [
    (
        "actions=None",
        lambda: Grant("billing", "billing.example", actions=bad(None)),
        InvalidArgumentType,
    ),
    (
        "actions=[[read]]",
        lambda: Grant("b", "billing.example", actions=bad([["read"]])),
        InvalidArgumentType,
    ),
    (
        "approved_by=int",
        lambda: Grant("b", "billing.example", approved_by=bad(7)),
        InvalidArgumentType,
    ),
    (
        "approved_by=NUL",
        lambda: Grant("b", "billing.example", approved_by="a\x00"),
        InvalidArgument,
    ),
    ("conversation=NUL", lambda: Grant("a\x00b", "billing.example"), InvalidArgument),
    ("conversation=DEL", lambda: Grant("a\x7fb", "billing.example"), InvalidArgument),
    ("site=NUL", lambda: Grant("billing", "billing\x00.example"), InvalidArgument),
    ("site=scheme-only", lambda: Grant("billing", "https://"), InvalidArgument),
    ("site=user@", lambda: Grant("billing", "user@billing.example"), InvalidArgument),
]


@pytest.mark.parametrize(("make", "error"), [pytest.param(m, e, id=i) for i, m, e in GRANTS])
def test_malformed_grants_are_typed_errors(
    make: Callable[[], Grant], error: type[Exception]
) -> None:
    """A Grant with a malformed field is refused when it is made, so it can never be saved."""
    with pytest.raises(error):
        make()


@pytest.mark.parametrize(
    ("given", "host"),
    [
        ("billing.example", "billing.example"),
        ("https://billing.example", "billing.example"),
        ("https://Billing.Example:8443/invoices?x=1", "billing.example"),
        ("billing.example:8000", "billing.example"),
        ("billing.example/invoices", "billing.example"),
        (".billing.example", "billing.example"),
        ("[::1]:8080", "::1"),
        ("[::1]", "::1"),
        ("http://[::1]:8080/x", "::1"),
        ("::1", "::1"),
        ("127.0.0.1:8000", "127.0.0.1"),
    ],
)
def test_a_site_given_as_url_or_host_and_port_is_its_host(given: str, host: str) -> None:
    """A site is parsed to its host (IPv6 without brackets), never cut at the first colon."""
    assert normalize_site(given) == host
    assert Grant("billing", given).site == host


async def test_a_grant_for_a_site_url_covers_that_site(make_keeper: Factory, backend: Any) -> None:
    """Grant('billing', 'https://billing.example') lets billing act on billing.example."""
    keeper = make_keeper(grants=[Grant("billing", "https://billing.example:443/")])
    await keeper.ensure("billing")
    await backend.sign_in("billing.example")
    await keeper.record_login("billing", "http://billing.example")
    assert keeper.decide("billing", "billing.example").outcome == "act"


def test_a_name_accepted_for_one_use_is_still_checked_for_another() -> None:
    """Validated names are remembered per use: a fine site name is no licence as a conversation."""
    from session_keeper._model.grants import check_name

    assert check_name("session-keeper:probe", "site") == "session-keeper:probe"
    with pytest.raises(InvalidArgument, match="reserved"):
        check_name("session-keeper:probe", "conversation")
    assert check_name("session-keeper:probe", "site") == "session-keeper:probe"
