"""A renewal's attempts never type two TOTP codes of one window (no browser: a script
recipe types into a recorder, on a FakeClock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyotp

from session_keeper import (
    Grant,
    LoginSettings,
    RenewalPolicy,
    ScriptRecipe,
    SessionKeeper,
    SignInAnswer,
)
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
