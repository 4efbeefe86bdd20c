"""A job whose login expires on the server three times: renewed twice, a person once.

    python demos/login_renewal.py

A job reads ``totp.example``'s item pages (a local test site: password, then a TOTP
second factor) on real headless Chromium through a SessionKeeper and a JobLoop whose
``read`` action may be retried after a fresh login (``restart_policy={"read":
"relogin"}``). The site's credentials are sealed in the keeper's own SQLite store
(``SealedCredentials``); a ``FormRecipe`` says how to sign in. After pages 1 and 2 the
server signs every session out: the loop renews the login from the vault (TOTP code
included) and carries on, asking nobody. After page 3 the site answers the password with
a "verify this new device" page the recipe does not know: the renewal stops there and
the job pauses for a person, with the console's live-view link. The person signs in;
the job resumes and finishes, and every stored item is compared with the site's.

The password and the TOTP secret are then searched for in the store's files, the logs,
the events and the error texts. The last line is
``RESULT renewals=2 human_asks=1 canary_hits=0 lost=0 duplicated=0 validated=true``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

from playwright.async_api import Page

# Run as a script (python demos/login_renewal.py): the repository root holds `demos`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from demos.guard_attacks import search_canaries
from demos.sites import DemoSites
from session_keeper import (
    Durability,
    FormField,
    FormRecipe,
    FormStep,
    Grant,
    LoginSettings,
    PageSign,
    PlaywrightBackend,
    RenewalPolicy,
    SessionKeeper,
    find_chromium,
)
from session_keeper.console import Console
from session_keeper.errors import PageChanged
from session_keeper.jobs import Accepted, JobContract, JobLoop, StepContext
from session_keeper.security import AuditLog, Keyring, SealedCredentials
from session_keeper.stores import SqliteStore
from session_keeper.testing import job_loop_testing
from session_keeper.testing._login_sites import TOTP_ITEM_PAGES, TOTP_PASSWORD, TOTP_SECRET

SITE = "totp.example"
CONV = "job:items"
JOB_ID = "items"

RECIPE = FormRecipe(
    url=f"http://{SITE}/login",
    steps=[
        FormStep(
            fields=[
                FormField(credential="username", label="Username"),
                FormField(credential="password", label="Password"),
            ]
        ),
        FormStep(fields=[FormField(credential="totp", label="Code", totp=True)]),
    ],
    success=PageSign(url=r"/account$"),
    failure=PageSign(selector="#error"),
    timeout=timedelta(seconds=5),
)

ITEMS_JS = """() => ({
    identity: document.querySelector('#page-id')?.textContent ?? null,
    rows: [...document.querySelectorAll('#items tr')].map(r => ({
        source_record_id: r.dataset.id, name: r.querySelector('.name').textContent,
    })),
    next: !!document.querySelector('#next'),
})"""


async def whoami(page: Page) -> str | None:
    """The site's own word on who is signed in (the LoginProbe)."""
    answer = await page.goto(f"http://{SITE}/whoami")
    return None if answer is None else (await answer.json())["account"]


def page_no(cursor: str | None) -> int:
    return int((cursor or "page-1").removeprefix("page-"))


async def items_step(ctx: StepContext[Page]) -> Accepted:
    """Read one items page; anything else is a changed page."""
    seen = await ctx.page.evaluate(ITEMS_JS)
    if seen["identity"] is None:
        raise PageChanged("no items page here")
    nxt = f"page-{page_no(ctx.cursor) + 1}" if seen["next"] else None
    return ctx.accept(seen["rows"], nxt, page_identity=str(seen["identity"]))


async def person_signs_in(keeper: SessionKeeper[Page]) -> None:
    """The person, on the live view, finishes the sign-in the recipe could not."""
    page = await keeper.unguarded_page(CONV, f"http://{SITE}/login")
    await keeper.begin_login(CONV, SITE)
    await page.get_by_label("Username").fill("alice")
    await page.get_by_label("Password").fill(TOTP_PASSWORD)  # the person knows it
    await page.click("button[type=submit]")
    await page.get_by_label("Code").wait_for()
    import pyotp  # the person's authenticator app

    await page.get_by_label("Code").fill(pyotp.TOTP(TOTP_SECRET).now())
    await page.click("button[type=submit]")
    await page.wait_for_url("**/account")
    await keeper.record_login(CONV, SITE)


class Capture(logging.Handler):
    """Every record the keeper logs: message, arguments and extra fields."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.getMessage()} {record.__dict__!r}")


async def main() -> int:
    handler = Capture()
    logging.getLogger("session_keeper").addHandler(handler)
    logging.getLogger("session_keeper").setLevel(logging.DEBUG)
    errors: list[str] = []
    with DemoSites() as sites, tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "keeper.db"
        keyring = Keyring.generate()
        backend = PlaywrightBackend(
            Path(tmp) / "profile",
            executable_path=find_chromium(),
            host_resolver_rules=sites.host_resolver_rules,
        )
        try:
            async with SqliteStore(str(db)) as store:
                vault = SealedCredentials(store, keyring)
                await vault.set(SITE, "username", "alice")
                await vault.set(SITE, "password", TOTP_PASSWORD)
                await vault.set(SITE, "totp", TOTP_SECRET)
                keeper: SessionKeeper[Page] = SessionKeeper(
                    backend,
                    grants=[Grant(CONV, SITE, actions={"read"})],
                    restart_policy={"read": "relogin"},
                    login_settings=LoginSettings(
                        probes={SITE: whoami},
                        recipes={SITE: RECIPE},
                        credentials=vault,
                        renewal=RenewalPolicy(backoff=timedelta(seconds=0.2)),
                    ),
                    durability=Durability(
                        store=store, keyring=keyring, audit=AuditLog(store, keyring)
                    ),
                )
                committed = 0

                async def server_expiry() -> None:
                    nonlocal committed
                    committed += 1
                    if committed <= 3:
                        sites.expire_sessions(SITE)
                        print(f"after page {committed}: the server signs every session out")
                    if committed == 3:
                        sites.challenge_new_device(True)
                        print("the site now asks to verify a new device after the password")

                async with keeper:
                    await keeper.ensure(CONV)
                    first = await keeper.renew_login(CONV, SITE)
                    print(f"signed in by the recipe: {first.outcome} as {first.account}")
                    contract = JobContract(
                        job_id=JOB_ID,
                        site=SITE,
                        allowed_origins=(f"http://{SITE}",),
                        required_fields=("name",),
                        start_cursor="page-1",
                        login_url=f"http://{SITE}/login*",
                        extra={"conversation": CONV},
                    )
                    loop = JobLoop(keeper, store, "w1")
                    job_loop_testing(loop, fault_hooks={"after_commit": server_expiry})
                    await loop.submit(contract)

                    async def run() -> str:
                        out = await loop.run(
                            JOB_ID,
                            items_step,
                            target=lambda c: f"http://{SITE}/items?page={page_no(c)}",
                            expect_identity=lambda c: f"items page {page_no(c)}",
                        )
                        return out.state

                    state = await run()
                    job = await store.load_job(JOB_ID)
                    print(f"the job is {state}: {job.checkpoint.pause_reason}")
                    async with Console(keeper, loop=loop, bind="127.0.0.1:0") as console:
                        live = console.live_link(CONV).split("?", 1)[0]
                        print(f"the console's live view for a person: {live} (signed link)")
                        sites.challenge_new_device(False)
                        await person_signs_in(keeper)
                    await loop.resume(JOB_ID, decided_by="ann")
                    state = await run()
                    print(f"the person signed in; the job resumed and ended {state}")
                    try:
                        await keeper.renew_login("stranger", SITE)
                    except Exception as exc:  # the refusal's text joins the canary scan
                        errors.append(f"{type(exc).__name__}: {exc}")
                    await keeper.persist()
                ids = [r.source_record_id for r in await store.results(JOB_ID)]
                events = await store.events(limit=100_000)
        finally:
            sites.challenge_new_device(False)
            await backend.aclose()
        audit = [e.data for e in events if e.kind == "audit"]
        renewals = sum(1 for e in audit if e.get("type") == "login_renewed") - 1
        asks = sum(1 for e in events if e.kind == "human_pause")
        expected = [f"item-{n}-{i}" for n in range(1, TOTP_ITEM_PAGES + 1) for i in (1, 2)]
        hits = search_canaries(
            {"password": TOTP_PASSWORD, "totp secret": TOTP_SECRET},
            {
                "sqlite": b"".join(p.read_bytes() for p in sorted(db.parent.glob("keeper.db*"))),
                "events": repr([e.to_dict() for e in events]).encode(),
                "logs": "\n".join(handler.lines).encode(),
                "errors": "\n".join(errors).encode(),
            },
        )
    lost = len(set(expected) - set(ids))
    duplicated = len(ids) - len(set(ids))
    validated = state == "done" and sorted(set(ids)) == expected and bool(errors)
    print(
        f"RESULT renewals={renewals} human_asks={asks} canary_hits={len(hits)} lost={lost} "
        f"duplicated={duplicated} validated={str(validated).lower()}"
    )
    return 0 if validated and not hits else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
