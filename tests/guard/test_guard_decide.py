"""The Guard's per-request decision (GuardPolicy), on the fake world (no browser needed)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
import pytest

from session_keeper import Grant, Guard, LoginSettings, SessionKeeper
from session_keeper.errors import GuardUnsupported, InvalidArgument, InvalidArgumentType
from session_keeper.facts import PROBE_CONVERSATION
from session_keeper.security import GuardPolicy, GuardVerdict
from session_keeper.testing import FakeBackend, FakeClock, FakePage

BILLING = "http://billing.example/invoices"


@pytest.fixture
async def world() -> AsyncIterator[tuple[SessionKeeper[FakePage], GuardPolicy, FakeBackend]]:
    """A keeper whose billing conversation signed in to billing.example, and its Guard policy."""
    backend = FakeBackend()
    keeper = SessionKeeper(
        backend,
        clock=FakeClock(),
        grants=[Grant("billing", "billing.example", actions={"read", "write"})],
    )
    guard = GuardPolicy(keeper)
    async with keeper:
        await keeper.ensure("billing")
        await keeper.ensure("research")
        await backend.sign_in("billing.example", name="billing_session")
        await keeper.record_login("billing", "billing.example")
        yield keeper, guard, backend


async def test_no_grant_is_blocked_and_the_reason_names_the_owner(
    world: tuple[SessionKeeper[FakePage], GuardPolicy, FakeBackend],
) -> None:
    """research holds no grant: its request to billing is refused, naming billing as owner."""
    _, guard, _ = world
    verdict = guard.decide("research", BILLING, "GET")
    assert not verdict.allowed and verdict.rule == "grant"
    assert verdict.reason == "research has no grant for billing.example (login belongs to billing)"


async def test_the_owner_with_a_grant_passes(
    world: tuple[SessionKeeper[FakePage], GuardPolicy, FakeBackend],
) -> None:
    """billing's read/write grant lets both its GET and its POST through."""
    _, guard, _ = world
    assert guard.decide("billing", BILLING, "GET").allowed
    assert guard.decide("billing", "http://billing.example/card", "POST").allowed


async def test_read_only_grant_reads_but_does_not_write(
    world: tuple[SessionKeeper[FakePage], GuardPolicy, FakeBackend],
) -> None:
    """GET and HEAD are reads; POST, PUT and DELETE are writes."""
    keeper, guard, _ = world
    keeper.grant(Grant("research", "billing.example", actions={"read"}))
    assert guard.decide("research", BILLING, "GET").allowed
    assert guard.decide("research", BILLING, "head").allowed
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        verdict = guard.decide("research", "http://billing.example/card", method)
        assert not verdict.allowed and verdict.action == "write"


async def test_per_site_action_override(
    world: tuple[SessionKeeper[FakePage], GuardPolicy, FakeBackend],
) -> None:
    """A site whose search is a POST can map POST to read for that site only."""
    keeper, _, _ = world
    guard = GuardPolicy(keeper, actions={"billing.example": {"POST": "read"}})
    keeper.grant(Grant("research", "billing.example", actions={"read"}))
    assert guard.decide("research", "http://billing.example/search", "POST").allowed


async def test_hosts_the_login_cookie_reaches_are_protected(
    world: tuple[SessionKeeper[FakePage], GuardPolicy, FakeBackend],
) -> None:
    """A host-only login cookie protects its host alone; a domain cookie its subdomains too."""
    keeper, guard, backend = world
    assert not guard.decide("research", BILLING, "GET").allowed
    # billing's cookie is host-only: a subdomain never receives it (browser rules).
    assert guard.decide("research", "http://api.billing.example/x", "GET").allowed
    await backend.sign_in("billing.example", name="billing_wide", domain=".billing.example")
    await keeper.record_login("billing", "billing.example")
    assert not guard.decide("research", "http://api.billing.example/x", "GET").allowed
    assert guard.decide("research", "http://docs.example/", "GET").allowed
    assert guard.decide("research", "http://notbilling.example/", "GET").allowed


async def test_unowned_pages_may_not_use_any_login(
    world: tuple[SessionKeeper[FakePage], GuardPolicy, FakeBackend],
) -> None:
    """A page no conversation owns is refused every signed-in host, and only those."""
    _, guard, _ = world
    verdict = guard.decide(None, BILLING, "GET")
    assert not verdict.allowed and verdict.rule == "unowned"
    assert guard.decide(None, "http://docs.example/", "GET").allowed


async def test_probe_pages_read_but_never_write(
    world: tuple[SessionKeeper[FakePage], GuardPolicy, FakeBackend],
) -> None:
    """The keeper's login probe may ask "who is signed in?" (GET) and nothing more."""
    _, guard, _ = world
    assert guard.decide(PROBE_CONVERSATION, BILLING, "GET").allowed
    assert not guard.decide(PROBE_CONVERSATION, "http://billing.example/card", "POST").allowed


async def test_origin_allowlist_blocks_everything_outside_it(
    world: tuple[SessionKeeper[FakePage], GuardPolicy, FakeBackend],
) -> None:
    """With an allowlist, origins outside it are refused, signed in or not."""
    _, guard, _ = world
    guard.allow_origins("research", ["http://docs.example", "todo.example"])
    assert guard.decide("research", "http://docs.example/guide", "GET").allowed
    assert guard.decide("research", "http://todo.example/", "GET").allowed
    refused = guard.decide("research", "http://sso.example/", "GET")
    assert not refused.allowed and refused.rule == "allowlist"
    assert refused.reason == "http://sso.example is outside research's origin allowlist"
    # Another scheme is another origin.
    assert not guard.decide("research", "https://docs.example/", "GET").allowed
    guard.clear_origins("research")
    assert guard.decide("research", "http://sso.example/", "GET").allowed


async def test_non_network_urls_are_not_judged(
    world: tuple[SessionKeeper[FakePage], GuardPolicy, FakeBackend],
) -> None:
    """data:, blob: and about: URLs never reach a site; the Guard lets them be."""
    _, guard, _ = world
    for url in ("about:blank", "data:text/html,hi", "blob:http://billing.example/x"):
        assert guard.decide("research", url, "GET").allowed


async def test_after_a_restart_nobody_passes_before_ensure() -> None:
    """A login that survived a restart is refused until the conversation has called ensure()."""
    backend = FakeBackend()
    clock = FakeClock()
    keeper = SessionKeeper(
        backend,
        clock=clock,
        grants=[Grant("billing", "billing.example")],
        login_settings=LoginSettings(keep_on_idle_close=True, fingerprint_key=bytes(32)),
    )
    guard = GuardPolicy(keeper)
    async with keeper:
        await keeper.ensure("billing")
        await backend.sign_in("billing.example", persistent=True)
        await keeper.record_login("billing", "billing.example")
        assert backend.current is not None
        await backend.current.close()
        await keeper.ensure("other")  # relaunches; billing has not heard yet
        verdict = guard.decide("billing", BILLING, "GET")
        assert not verdict.allowed and verdict.rule == "grant"
        await keeper.ensure("billing")
        assert guard.decide("billing", BILLING, "GET").allowed


async def test_a_guard_refuses_to_start_on_a_browser_it_cannot_enforce_on() -> None:
    """FakeBackend has no network to route: the launch fails typed, nothing runs unguarded."""
    backend = FakeBackend()
    keeper = SessionKeeper(backend, clock=FakeClock())
    guard = Guard(keeper)
    async with keeper:
        with pytest.raises(GuardUnsupported, match="FakeSession"):
            await keeper.ensure("research")
        assert backend.current is None or not backend.current.alive
        assert guard.enforcing is False
        assert "inactive" in repr(guard)


async def test_bad_configuration_is_refused() -> None:
    """Malformed allowlists and overrides are usage errors, raised at once."""
    keeper = SessionKeeper(FakeBackend(), clock=FakeClock())
    guard = Guard(keeper)
    with pytest.raises(InvalidArgumentType):
        guard.allow_origins("research", "http://docs.example")
    with pytest.raises(InvalidArgument):
        guard.allow_origins("research", ["ftp://docs.example"])
    with pytest.raises(InvalidArgumentType):
        Guard(keeper, protect="billing.example")
    with pytest.raises(InvalidArgumentType):
        GuardPolicy(keeper, protect="billing.example")
    with pytest.raises(InvalidArgumentType):
        Guard(keeper, actions={"billing.example": "read"})  # type: ignore[dict-item]


async def test_a_host_reached_by_two_logins_needs_both_grants(
    world: tuple[SessionKeeper[FakePage], GuardPolicy, FakeBackend],
) -> None:
    """api.billing.example receives billing's and its own login: one grant is not enough."""
    keeper, guard, backend = world
    await backend.sign_in("billing.example", name="billing_wide", domain=".billing.example")
    await keeper.record_login("billing", "billing.example")
    await backend.sign_in("api.billing.example", name="api_session")
    await keeper.record_login("research", "api.billing.example")
    keeper.grant(Grant("research", "api.billing.example"))
    verdict = guard.decide("research", "http://api.billing.example/v1", "GET")
    assert not verdict.allowed and verdict.site == "billing.example"
    keeper.grant(Grant("research", "billing.example"))
    assert guard.decide("research", "http://api.billing.example/v1", "GET").allowed


def bad(value: object) -> Any:
    """A malformed argument, passed where the signature says otherwise."""
    return value


GUARD_CONFIG: list[tuple[str, Callable[[SessionKeeper[FakePage]], object], type[Exception]]] = [
    ("actions=list", lambda k: Guard(k, actions=bad(["read"])), InvalidArgumentType),
    (
        "actions=None-mapping",
        lambda k: Guard(k, actions=bad({"billing.example": None})),
        InvalidArgumentType,
    ),
    ("protect=None", lambda k: Guard(k, protect=bad(None)), InvalidArgumentType),
    ("protect=[url-without-host]", lambda k: Guard(k, protect=["https://"]), InvalidArgument),
    ("allowlists=list", lambda k: Guard(k, allowlists=bad(["docs.example"])), InvalidArgumentType),
    (
        "allow_origins(None)",
        lambda k: Guard(k).allow_origins("research", bad(None)),
        InvalidArgumentType,
    ),
    (
        "allow_origins([None])",
        lambda k: Guard(k).allow_origins("research", bad([None])),
        InvalidArgumentType,
    ),
    (
        "allow_origins(NUL)",
        lambda k: Guard(k).allow_origins("research", ["docs\x00.example"]),
        InvalidArgument,
    ),
]


@pytest.mark.parametrize(("make", "error"), [pytest.param(m, e, id=i) for i, m, e in GUARD_CONFIG])
async def test_malformed_guard_configuration_is_a_typed_error(
    make: Callable[[SessionKeeper[FakePage]], object], error: type[Exception]
) -> None:
    """Each malformed Guard option is InvalidArgument(Type) at the call, never a raw TypeError."""
    keeper = SessionKeeper(FakeBackend(), clock=FakeClock())
    with pytest.raises(error):
        make(keeper)


async def test_decide_answers_a_public_frozen_verdict(
    world: tuple[SessionKeeper[FakePage], GuardPolicy, FakeBackend],
) -> None:
    """The decision is a public frozen GuardVerdict, the same from the policy and the Guard."""
    keeper, policy, _ = world
    verdict = policy.decide("research", BILLING, "GET")
    assert isinstance(verdict, GuardVerdict)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        verdict.allowed = True  # type: ignore[misc]
    assert Guard(keeper).decide("research", BILLING, "GET") == verdict


async def test_a_redirect_hop_of_a_spent_write_is_the_same_write(
    world: tuple[SessionKeeper[FakePage], GuardPolicy, FakeBackend],
) -> None:
    """A one-time write admits its request's 307 hop (same sites), and nothing after it."""
    keeper, policy, _ = world
    keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
    first = policy.decide("research", "http://billing.example/old-card", "POST", spend=True)
    assert first.allowed and first.spent and first.sites == ("billing.example",)
    hop = policy.decide(
        "research", "http://billing.example/card", "POST", spend=True, admitted=first.sites
    )
    assert hop.allowed and not hop.spent
    second = policy.decide("research", "http://billing.example/card", "POST", spend=True)
    assert not second.allowed and second.rule == "grant"


async def test_settled_hosts_follow_every_grant_login_allowlist_and_party_change(
    world: tuple[SessionKeeper[FakePage], GuardPolicy, FakeBackend],
) -> None:
    """The cached answer of which hosts go unpaused is recomputed on each change that can
    move it: a revoke, a grant, a new login, an allowlist, another page's owner."""
    keeper, guard, backend = world
    assert guard.settled_hosts({"billing"}) == {"billing.example"}
    assert guard.settled_hosts(set()) == set()
    assert guard.settled_hosts({"billing", "research"}) == set()
    keeper.revoke("billing", "billing.example")
    assert guard.settled_hosts({"billing"}) == set()
    keeper.grant(Grant("billing", "billing.example", actions={"read"}))
    assert guard.settled_hosts({"billing"}) == {"billing.example"}
    await backend.sign_in("docs.example", name="docs_session")
    await keeper.record_login("research", "docs.example")
    assert guard.settled_hosts({"billing"}) == {"billing.example"}
    keeper.grant(Grant("billing", "docs.example", actions={"read"}))
    assert guard.settled_hosts({"billing"}) == {"billing.example", "docs.example"}
    guard.allow_origins("research", ["http://docs.example"])
    assert guard.settled_hosts({"billing"}) == set()
