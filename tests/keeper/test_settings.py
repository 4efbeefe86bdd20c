"""The keeper's settings groups: they check themselves, the flat keywords they replace still
work with a warning naming the replacement, and mixing the two spellings is refused."""

# codemod_settings: keep flat keywords (this file tests the deprecated spelling itself).

from __future__ import annotations

import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from session_keeper import (
    Durability,
    FormField,
    FormRecipe,
    FormStep,
    Grant,
    IdleTimeouts,
    LoginSettings,
    PageSign,
    RenewalPolicy,
    SessionKeeper,
)
from session_keeper.errors import InvalidArgument, InvalidArgumentType, UsageError
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage

SITE = "billing.example"
KEY = bytes(range(32))


def flat_keeper(backend: FakeBackend, **flat: Any) -> SessionKeeper[FakePage]:
    """A keeper built with the deprecated flat keywords (the warning is checked elsewhere)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return SessionKeeper(backend, **flat)


def test_a_flat_keyword_warns_naming_the_group_that_replaces_it() -> None:
    """idle_timeout= still works, with a DeprecationWarning that names the new spelling
    and points at the caller's line."""
    with pytest.warns(DeprecationWarning, match="deprecated") as caught:
        keeper = SessionKeeper(FakeBackend(), idle_timeout=timedelta(minutes=3), keeper_id="desk")
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "idle_timeout= -> idle_timeouts=IdleTimeouts(browser=...)" in message
    assert "keeper_id= -> durability=Durability(keeper_id=...)" in message
    assert caught[0].filename == __file__
    assert keeper.keeper_id == "desk"


@pytest.mark.parametrize(
    ("flat", "group"),
    [
        ({"tab_idle_timeout": timedelta(minutes=1)}, {"idle_timeouts": IdleTimeouts()}),
        ({"fingerprint_key": KEY}, {"login_settings": LoginSettings()}),
        ({"store": None}, {"durability": Durability(keeper_id="desk")}),
    ],
    ids=["timeouts", "logins", "durability"],
)
def test_a_flat_keyword_with_the_group_that_replaces_it_is_refused(
    flat: dict[str, Any], group: dict[str, Any]
) -> None:
    """A flat keyword given with its own group is a UsageError, before anything is built."""
    backend = FakeBackend()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused before any deprecation is told
        with pytest.raises(UsageError, match="both given"):
            SessionKeeper(backend, **flat, **group)
    assert backend.launches == 0


def test_an_unknown_keyword_is_a_typed_error() -> None:
    """A keyword that is neither a setting nor a flat one is InvalidArgumentType (a TypeError)."""
    bad: dict[str, Any] = {"idle": timedelta(minutes=1)}
    with pytest.raises(InvalidArgumentType, match="idle"):
        SessionKeeper(FakeBackend(), **bad)


def bad(value: object) -> Any:
    """A malformed setting, passed where the signature says otherwise."""
    return value


async def _probe(page: object) -> str | None:
    return None


STEP = FormStep(fields=[FormField(credential="password", label="Password")])
SIGN = PageSign(selector="#account")

BAD_SETTINGS: list[tuple[str, Any, type[Exception]]] = [
    ("browser=0", lambda: IdleTimeouts(browser=timedelta(0)), InvalidArgument),
    ("browser=int", lambda: IdleTimeouts(browser=bad(600)), InvalidArgumentType),
    ("tab<0", lambda: IdleTimeouts(tab=timedelta(seconds=-1)), InvalidArgument),
    ("conversation=0", lambda: IdleTimeouts(conversation=timedelta(0)), InvalidArgument),
    ("keep=str", lambda: LoginSettings(keep_on_idle_close=bad("yes")), InvalidArgumentType),
    ("key short", lambda: LoginSettings(fingerprint_key=b"short"), InvalidArgument),
    ("key=str", lambda: LoginSettings(fingerprint_key=bad("k" * 32)), InvalidArgumentType),
    ("probes=list", lambda: LoginSettings(probes=bad([SITE])), InvalidArgumentType),
    ("probes=None", lambda: LoginSettings(probes=bad(None)), InvalidArgumentType),
    ("probe site empty", lambda: LoginSettings(probes={" ": _probe}), InvalidArgument),
    ("cookies=str", lambda: LoginSettings(session_cookies={SITE: "sid"}), InvalidArgumentType),
    ("cookies empty", lambda: LoginSettings(session_cookies={SITE: []}), InvalidArgument),
    ("recipes=str", lambda: LoginSettings(recipes={SITE: bad("form")}), InvalidArgumentType),
    ("credentials=dict", lambda: LoginSettings(credentials=bad({})), InvalidArgumentType),
    ("renewal=int", lambda: LoginSettings(renewal=bad(3)), InvalidArgumentType),
    ("attempts=0", lambda: RenewalPolicy(attempts=0), InvalidArgument),
    ("health_every=0", lambda: RenewalPolicy(health_every=timedelta(0)), InvalidArgument),
    ("recipe ftp", lambda: FormRecipe(url="ftp://x", steps=[STEP], success=SIGN), InvalidArgument),
    ("field 2 ways", lambda: FormField(credential="u", label="U", selector="#u"), InvalidArgument),
    ("sign empty", lambda: PageSign(), InvalidArgument),
    ("sign bad re", lambda: PageSign(url="("), InvalidArgument),
    ("keeper_id NUL", lambda: Durability(keeper_id="main\x00"), InvalidArgument),
    ("keeper_id=int", lambda: Durability(keeper_id=bad(7)), InvalidArgumentType),
    ("keyring=bytes", lambda: Durability(keyring=bad(KEY)), InvalidArgumentType),
    ("audit=str", lambda: Durability(audit=bad("audit.log")), InvalidArgumentType),
    ("vault=dict", lambda: Durability(vault=bad({})), InvalidArgumentType),
]


@pytest.mark.parametrize(("make", "error"), [pytest.param(m, e, id=i) for i, m, e in BAD_SETTINGS])
def test_the_settings_groups_refuse_bad_values_with_typed_errors(
    make: Any, error: type[Exception]
) -> None:
    """Each group checks its fields when it is made: a typed error, never a raw one."""
    with pytest.raises(error):
        make()


def test_the_fingerprint_key_is_not_in_the_repr() -> None:
    """LoginSettings' repr never shows its secret key."""
    settings = LoginSettings(fingerprint_key=KEY)
    assert KEY.hex() not in repr(settings) and repr(KEY) not in repr(settings)
    assert "fingerprint_key" not in repr(settings)


async def _life(
    keeper: SessionKeeper[FakePage], backend: FakeBackend, clock: FakeClock
) -> list[Any]:
    """A turn, a sign-in on the named session cookie, an idle tab, an idle browser, a restart:
    everything the keeper says along the way."""
    said: list[Any] = []
    async with keeper:
        said.append(await keeper.ensure("billing"))
        await keeper.tab("billing", f"https://{SITE}/")
        await backend.sign_in(SITE, name="sid", value="v1", persistent=True)
        await backend.sign_in(SITE, name="csrf", value="c1", persistent=True)
        record = await keeper.record_login("billing", SITE)
        said.append([c.name for c in record.cookies])
        clock.advance(timedelta(minutes=2))
        said.append(await keeper.sweep())  # the tab is idle, the browser not yet
        clock.advance(timedelta(minutes=4))
        said.append(await keeper.sweep())  # the browser is idle: closed, logins kept
        said.append(await keeper.ensure("billing"))
        said.append([(r.site, r.owner) for r in keeper.logins()])
        said.append(await keeper.store.keeper_ids() if keeper.store else None)
    return said


async def test_a_flat_keyword_keeper_behaves_as_the_same_keeper_built_with_groups(
    tmp_path: Path,
) -> None:
    """The flat keywords and the groups configure the same keeper: one life, told alike."""
    lives = []
    for spelling in ("flat", "groups"):
        clock, backend = FakeClock(), FakeBackend()
        async with SqliteStore(tmp_path / f"{spelling}.db", clock=clock) as store:
            common: dict[str, Any] = {"clock": clock, "grants": [Grant("billing", SITE)]}
            if spelling == "flat":
                keeper = flat_keeper(
                    backend,
                    **common,
                    idle_timeout=timedelta(minutes=5),
                    tab_idle_timeout=timedelta(minutes=1),
                    keep_logins_on_idle_close=True,
                    fingerprint_key=KEY,
                    session_cookies={SITE: ["sid"]},
                    store=store,
                    keeper_id="desk",
                )
            else:
                keeper = SessionKeeper(
                    backend,
                    **common,
                    idle_timeouts=IdleTimeouts(
                        browser=timedelta(minutes=5), tab=timedelta(minutes=1)
                    ),
                    login_settings=LoginSettings(
                        keep_on_idle_close=True,
                        fingerprint_key=KEY,
                        session_cookies={SITE: ["sid"]},
                    ),
                    durability=Durability(store=store, keeper_id="desk"),
                )
            lives.append(await _life(keeper, backend, clock))
    flat, grouped = lives
    assert flat == grouped
    # The settings took effect (not two keepers equally deaf to them).
    assert flat[1] == ["sid"]  # only the named session cookie is evidence
    assert flat[2].closed_tabs and not flat[2].closed_browser
    assert flat[3].closed_browser
    assert flat[5] == [(SITE, "billing")]  # the login was kept across the idle close
    assert flat[6] == ["desk"]
