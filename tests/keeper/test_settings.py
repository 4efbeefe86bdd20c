"""The keeper's settings groups: they check themselves, a group of the wrong type is a typed
error, and the flat keywords they replaced are gone (0.x, no shim)."""

from __future__ import annotations

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
from session_keeper.errors import InvalidArgument, InvalidArgumentType
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage

SITE = "billing.example"
KEY = bytes(range(32))


@pytest.mark.parametrize(
    "flat",
    [
        {"idle_timeout": timedelta(minutes=3)},
        {"fingerprint_key": KEY},
        {"store": None},
        {"keeper_id": "desk"},
    ],
    ids=["timeouts", "logins", "store", "keeper_id"],
)
def test_a_flat_settings_keyword_is_refused_before_anything_is_built(flat: dict[str, Any]) -> None:
    """The flat keywords the settings groups replaced are not accepted: a TypeError naming
    the keyword, and no browser launched."""
    backend = FakeBackend()
    with pytest.raises(TypeError, match=next(iter(flat))):
        SessionKeeper(backend, **flat)
    assert backend.launches == 0


@pytest.mark.parametrize(
    ("keyword", "value"),
    [
        ("idle_timeouts", LoginSettings()),
        ("login_settings", {"keep_on_idle_close": True}),
        ("durability", "keeper.db"),
    ],
)
def test_a_settings_group_of_the_wrong_type_is_a_typed_error(keyword: str, value: object) -> None:
    """A group keyword given anything but its group is InvalidArgumentType, before anything
    is built."""
    backend = FakeBackend()
    bad_group: dict[str, Any] = {keyword: value}
    with pytest.raises(InvalidArgumentType, match=keyword):
        SessionKeeper(backend, **bad_group)
    assert backend.launches == 0


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


async def test_the_settings_groups_configure_the_keeper(tmp_path: Path) -> None:
    """Each group's settings take effect: the named session cookie, the idle tab and
    browser, the login kept across an idle close, the keeper id in the store."""
    clock, backend = FakeClock(), FakeBackend()
    async with SqliteStore(tmp_path / "groups.db", clock=clock) as store:
        keeper = SessionKeeper(
            backend,
            clock=clock,
            grants=[Grant("billing", SITE)],
            idle_timeouts=IdleTimeouts(browser=timedelta(minutes=5), tab=timedelta(minutes=1)),
            login_settings=LoginSettings(
                keep_on_idle_close=True,
                fingerprint_key=KEY,
                session_cookies={SITE: ["sid"]},
            ),
            durability=Durability(store=store, keeper_id="desk"),
        )
        life = await _life(keeper, backend, clock)
    assert life[1] == ["sid"]  # only the named session cookie is evidence
    assert life[2].closed_tabs and not life[2].closed_browser
    assert life[3].closed_browser
    assert life[5] == [(SITE, "billing")]  # the login was kept across the idle close
    assert life[6] == ["desk"]
