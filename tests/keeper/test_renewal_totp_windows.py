"""A renewal's attempts never type two TOTP codes of one window (no browser: a script
recipe types into a recorder, on a FakeClock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyotp
import pytest

from session_keeper import (
    Grant,
    LoginSettings,
    RenewalPolicy,
    ScriptRecipe,
    SessionKeeper,
    SignInAnswer,
)
from session_keeper.errors import InvalidArgument
from session_keeper.security import Credentials, EnvCredentials
from session_keeper.testing import FakeBackend, FakeClock

SITE = "totp.example"
OWNER = "owner"
SECRET = "KRUGKIDTMVRXEZLUEBUXGIDTMVQWYZLE"


class CodeField:
    """Stands where a recipe's code field would: records each code typed, and when."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.typed: list[tuple[datetime, str]] = []

    async def fill(self, value: str) -> None:
        self.typed.append((self.clock.now(), value))


async def test_a_refused_code_is_not_typed_again_in_its_window() -> None:
    """Every attempt refused, the first typed 0.5 s before its window ends (no margin, no
    backoff): the second attempt types the next window's code, never the first again."""
    window_end = datetime(2026, 10, 13, 9, 0, 30, tzinfo=UTC)
    clock = FakeClock(window_end - timedelta(seconds=0.5))
    field = CodeField(clock)

    async def sign_in(tab: object, credentials: Credentials) -> SignInAnswer:
        await credentials.fill(field, "totp", totp=True)  # type: ignore[arg-type]
        return "refused"

    environ = {EnvCredentials().variable(SITE, "totp"): SECRET}
    keeper = SessionKeeper(
        FakeBackend(),
        clock=clock,
        grants=[Grant(OWNER, SITE)],
        login_settings=LoginSettings(
            fingerprint_key=bytes(range(32)),
            recipes={SITE: ScriptRecipe(sign_in=sign_in, fields=("totp",))},
            credentials=EnvCredentials(environ=environ),
            renewal=RenewalPolicy(attempts=2, backoff=timedelta(0), totp_margin=timedelta(0)),
        ),
    )
    async with keeper:
        await keeper.ensure(OWNER)
        renewal = await keeper.renew_login(OWNER, SITE)
    assert (renewal.outcome, renewal.attempts) == ("refused", 2)
    codes = [code for _, code in field.typed]
    assert codes == [
        pyotp.TOTP(SECRET).at(window_end - timedelta(seconds=1)),
        pyotp.TOTP(SECRET).at(window_end),
    ]
    assert renewal.reason == "the sign-in script answered refused"


async def test_a_refused_code_waits_for_the_next_window_of_the_secrets_own_period() -> None:
    """The credential is an otpauth URI with period=60: the first code typed half a
    second before a 30 s boundary is that 60 s window's, and after its refusal the
    second attempt waits for the 60 s window's end (30.5 s, not 0.5 s) and types that
    window's code."""
    start = datetime(2026, 10, 13, 9, 0, 29, 500_000, tzinfo=UTC)  # 30.5 s left of 60
    clock = FakeClock(start)
    field = CodeField(clock)

    async def sign_in(tab: object, credentials: Credentials) -> SignInAnswer:
        await credentials.fill(field, "totp", totp=True)  # type: ignore[arg-type]
        return "refused"

    uri = f"otpauth://totp/{SITE}:alice?secret={SECRET}&issuer={SITE}&period=60"
    environ = {EnvCredentials().variable(SITE, "totp"): uri}
    keeper = SessionKeeper(
        FakeBackend(),
        clock=clock,
        grants=[Grant(OWNER, SITE)],
        login_settings=LoginSettings(
            fingerprint_key=bytes(range(32)),
            recipes={SITE: ScriptRecipe(sign_in=sign_in, fields=("totp",))},
            credentials=EnvCredentials(environ=environ),
            renewal=RenewalPolicy(attempts=2, backoff=timedelta(0)),
        ),
    )
    async with keeper:
        await keeper.ensure(OWNER)
        renewal = await keeper.renew_login(OWNER, SITE)
    assert (renewal.outcome, renewal.attempts) == ("refused", 2)
    next_window = datetime(2026, 10, 13, 9, 1, 0, tzinfo=UTC)
    assert field.typed == [
        (start, pyotp.TOTP(SECRET, interval=60).at(start)),
        (next_window, pyotp.TOTP(SECRET, interval=60).at(next_window)),
    ]
    assert clock.elapsed == timedelta(seconds=30.5)  # the wait was on the keeper's clock


async def test_a_bad_totp_uri_is_refused_before_anything_is_typed() -> None:
    """A TOTP credential that is an otpauth URI with period=0: the renewal raises
    InvalidArgument (no secret in it) before the password is typed, and nothing is."""
    typed: list[str] = []

    class Field:
        async def fill(self, value: str) -> None:
            typed.append(value)

    async def sign_in(tab: object, credentials: Credentials) -> SignInAnswer:
        await credentials.fill(Field(), "password")  # type: ignore[arg-type]
        await credentials.fill(Field(), "totp", totp=True)  # type: ignore[arg-type]
        return "signed_in"

    uri = f"otpauth://totp/{SITE}:alice?secret={SECRET}&period=0"
    environ = {
        EnvCredentials().variable(SITE, "password"): "pw-canary-31c9",
        EnvCredentials().variable(SITE, "totp"): uri,
    }
    keeper = SessionKeeper(
        FakeBackend(),
        grants=[Grant(OWNER, SITE)],
        login_settings=LoginSettings(
            fingerprint_key=bytes(range(32)),
            recipes={SITE: ScriptRecipe(sign_in=sign_in, fields=("password", "totp"))},
            credentials=EnvCredentials(environ=environ),
        ),
    )
    async with keeper:
        await keeper.ensure(OWNER)
        with pytest.raises(InvalidArgument, match="period") as err:
            await keeper.renew_login(OWNER, SITE)
    assert typed == []
    assert SECRET not in str(err.value) and uri not in str(err.value)
