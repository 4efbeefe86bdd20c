"""A person signs a headless browser back in through the console's live view.

    python demos/human_handoff.py

The catalogue audit (24 pages behind a login, local test site) runs on real headless
Chromium through a SessionKeeper and a JobLoop. After page 3 the browser process is
SIGKILLed: the login dies with it and the job pauses for a human. A *person* — a
second, separate Chromium scripted by Playwright — opens the console's one-time link,
the jobs page, the paused job's live view; clicks into the streamed sign-in form, types
the username and password through the console (CDP input, no shortcut into the job's
browser), presses Enter, then "I'm done". The form is on a sign-in page of the keeper's,
never the job's tab, so nothing a model drives there reads the password. The console
records the login, moves the job's tab to the signed-in page, ends the takeover and
resumes the job; the job re-verifies and completes, and the independent validator
compares every stored record with the site's ground truth.

The last line is ``RESULT paused=1 signed_in_via_console=1 resumed=1 validated=true``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import sys
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
from playwright.async_api import Page, async_playwright

# Run as a script (python demos/human_handoff.py): the repository root holds `demos`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from demos.catalogue_audit import (
    JOB_ID,
    SITE,
    browser_pid,
    catalogue_step,
    contract,
    expect_identity,
    logging_extractions,
    make_target,
    validate,
)
from demos.sites import (
    CATALOGUE_PASSWORD,
    CATALOGUE_USERNAME,
    DemoSites,
    catalogue_ground_truth,
)
from session_keeper import Durability, Grant, PlaywrightBackend, SessionKeeper, find_chromium
from session_keeper.console import Console
from session_keeper.jobs import JobLoop, StepContext
from session_keeper.security import AuditLog, Keyring, verify_audit
from session_keeper.stores import SqliteStore
from session_keeper.testing import LocalSites

CONVERSATION = f"job:{JOB_ID}"
PERSON = "dana"
#: The page before which the browser is killed.
KILL_AT = "page-4"
PAGES = ("", "browsers", "conversations", "logins", "borrows", "jobs", "events")


@attrs.frozen(kw_only=True)
class Handoff:
    """What the scenario measured, and what a canary check needs."""

    paused: int
    signed_in_via_console: int
    resumed: int
    validated: bool
    final_state: str
    records: int
    audit_entries: int
    takeovers_audited: int
    #: Every console page and API answer the person received, by name.
    pages: dict[str, bytes]
    #: Secrets that must appear in none of them (never printed).
    secrets: dict[str, str]

    def result_line(self) -> str:
        """The demo's last line."""
        return (
            f"RESULT paused={self.paused} signed_in_via_console={self.signed_in_via_console} "
            f"resumed={self.resumed} validated={str(self.validated).lower()}"
        )


async def wait_until(check: Callable[[], bool], what: str) -> None:
    """Poll ``check`` until true (at most 30 s); raise ``TimeoutError`` naming ``what``."""
    for _ in range(600):
        if check():
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


async def scripted_first_sign_in(keeper: SessionKeeper[Page], base: str) -> None:
    """Before the story: the job's account is signed in once (as an operator would)."""
    await keeper.ensure(CONVERSATION)
    page = await keeper.unguarded_page(CONVERSATION, f"{base}/login")
    await page.fill("input[name=username]", CATALOGUE_USERNAME)
    await page.fill("input[name=password]", CATALOGUE_PASSWORD)
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    await keeper.record_login(CONVERSATION, SITE, account="approved-reader")


async def click_through(person: Page, real: Page, selector: str) -> None:
    """The person clicks, in the console's streamed image, where ``selector`` is drawn.

    The geometry comes from the real page (the person sees the field in the image);
    the click itself travels console -> WebSocket -> CDP ``Input.dispatchMouseEvent``.
    """
    box = await real.locator(selector).bounding_box()
    screen = person.locator("#screen")
    shown = await screen.bounding_box()
    width = await screen.get_attribute("data-device-width")
    assert box is not None and shown is not None and width is not None
    scale = shown["width"] / float(width)
    await person.mouse.click(
        shown["x"] + (box["x"] + box["width"] / 2) * scale,
        shown["y"] + (box["y"] + box["height"] / 2) * scale,
    )
    await real.wait_for_function(
        "s => document.activeElement === document.querySelector(s)", arg=selector
    )


async def person_signs_in(
    console: Console,
    keeper: SessionKeeper[Page],
    base: str,
    chromium: str,
    artifacts: Path | None,
    out: Callable[[str], None],
) -> dict[str, bytes]:
    """The person, in a second browser, does the whole hand-off through the console."""
    pages: dict[str, bytes] = {}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium, headless=True)
        try:
            person = await browser.new_page(viewport={"width": 1400, "height": 1000})

            async def keep(name: str) -> None:
                pages[name] = (await person.content()).encode()
                if artifacts is not None:
                    await person.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)

            await person.goto(console.login_link(PERSON))
            for section in PAGES:
                await person.goto(f"{console.url}/{section}")
                await keep(section or "overview")
            await person.goto(f"{console.url}/jobs")
            out(f"the person sees: {await person.inner_text(f'#job-{JOB_ID} td:nth-child(2)')}")
            await person.click(f"#job-{JOB_ID} a.live")
            await person.wait_for_selector("#screen:not([data-frames='0'])")
            # The paused job's tab is on a fresh browser: open the site's sign-in form (in a
            # sign-in page of the keeper's; the job's tab never shows the form).
            await person.fill("#address", f"{base}/login")
            async with person.expect_navigation():
                await person.click("#navigate button")
            # To know where the fields are drawn: the page the live view streams.
            (real,) = keeper.unguarded_sign_in_pages(CONVERSATION)
            await real.wait_for_selector("input[name=username]")
            await person.wait_for_function(
                "() => document.querySelector('#status').textContent.includes('/login')"
            )
            await click_through(person, real, "input[name=username]")
            await person.keyboard.type(CATALOGUE_USERNAME)
            await click_through(person, real, "input[name=password]")
            await person.keyboard.type(CATALOGUE_PASSWORD)
            await real.wait_for_function(
                "n => document.querySelector('input[name=password]').value.length === n",
                arg=len(CATALOGUE_PASSWORD),
            )
            frames = int(await person.get_attribute("#screen", "data-frames") or 0)
            await person.wait_for_function(
                "n => Number(document.querySelector('#screen').dataset.frames) > n", arg=frames
            )
            await keep("live")
            async with real.expect_navigation():
                await person.keyboard.press("Enter")
            await person.wait_for_function(
                "() => document.querySelector('#status').textContent.includes('/items')"
            )
            out("the person signed in through the live view; presses I'm done")
            await person.fill("#account", "approved-reader")
            await person.click("#done-button")
            await person.wait_for_selector("#flash")
            flash = await person.inner_text("#flash")
            out(f"console: {flash}")
            await keep("after-done")
            r = await person.request.get(f"{console.url}/api/state")
            pages["api/state"] = await r.body()
        finally:
            await browser.close()
    return pages


async def handoff(
    sites: LocalSites,
    tmp: Path,
    *,
    chromium: str | None = None,
    artifacts: Path | None = None,
    out: Callable[[str], None] = print,
) -> Handoff:
    """Run the whole story; return what it measured."""
    chromium = chromium or find_chromium()
    base = sites.url(SITE, "").rstrip("/")
    key = secrets.token_bytes(32)
    keyring = Keyring({"k1": key})
    backend = PlaywrightBackend(
        tmp / "profile", executable_path=chromium, host_resolver_rules=sites.host_resolver_rules
    )
    extractions = tmp / "extractions.jsonl"
    killed: list[int] = []
    try:
        async with SqliteStore(tmp / "handoff.db") as store:
            audit = AuditLog(store, keyring)
            keeper = SessionKeeper(
                backend,
                durability=Durability(
                    store=store, keeper_id="handoff", keyring=keyring, audit=audit
                ),
                grants=[Grant(CONVERSATION, SITE, actions={"read"})],
            )
            async with keeper:
                loop = JobLoop(keeper, store, "worker-1", backoff_base=timedelta(milliseconds=50))
                await store.submit_job(contract())
                await scripted_first_sign_in(keeper, base)

                async def step(ctx: StepContext[Page]) -> Any:
                    if ctx.cursor == KILL_AT and not killed:
                        pid = browser_pid(tmp / "profile")
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                        await wait_until(lambda: not keeper.alive, "the keeper to see the kill")
                    return await catalogue_step(ctx)

                logged = logging_extractions(step, extractions)
                target = make_target(base)

                async def run() -> str:
                    outcome = await loop.run(
                        JOB_ID, logged, target=target, expect_identity=expect_identity
                    )
                    return outcome.state

                first = await run()
                job = await store.load_job(JOB_ID)
                out(f"after {job.checkpoint.last_committed_step}: SIGKILL the browser process")
                out(f"the job is {first}: {job.checkpoint.pause_reason}")
                logins_before = sum(
                    1 for r in sites.requests(SITE) if r.path == "/login" and r.method == "POST"
                )
                async with Console(keeper, loop=loop, bind="127.0.0.1:0") as console:
                    out(f"console at {console.url}")
                    pages = await person_signs_in(console, keeper, base, chromium, artifacts, out)
                sign_ins = (
                    sum(
                        1 for r in sites.requests(SITE) if r.path == "/login" and r.method == "POST"
                    )
                    - logins_before
                )
                state = (await store.load_job(JOB_ID)).checkpoint.state
                final = await run() if state == "ready" else state
                out(f"the job re-verified its login and ended {final}")
                cookies = [str(c.get("value")) for c in await backend_cookies(keeper)]
            entries = await verify_audit(store, keyring, expected_head=audit.head)
            events = await store.events(job_id=JOB_ID)
            audit_events = [e.data for e in await store.events(kind="audit", limit=100_000)]
            verdict = await validate(store, extractions)
    finally:
        await backend.aclose()
    takeovers = [e for e in audit_events if e.get("type") == "takeover_begun"]
    recorded_after = (
        [
            e
            for e in audit_events[audit_events.index(takeovers[0]) :]
            if e.get("type") == "login_recorded"
        ]
        if takeovers
        else []
    )
    resumed = [
        e for e in events if e.kind == "human_resumed" and e.data.get("decided_by") == PERSON
    ]
    truth = catalogue_ground_truth()
    return Handoff(
        paused=sum(1 for e in events if e.kind == "human_pause"),
        signed_in_via_console=int(sign_ins == 1 and len(recorded_after) == 1),
        resumed=len(resumed),
        validated=bool(verdict["validated"]) and verdict["records"] == len(truth),
        final_state=final,
        records=int(verdict["records"]),
        audit_entries=entries,
        takeovers_audited=len(takeovers),
        pages=pages,
        secrets={
            **{f"cookie {i}": v for i, v in enumerate(cookies)},
            "catalogue password": CATALOGUE_PASSWORD,
            "keyring key": key.hex(),
        },
    )


async def backend_cookies(keeper: SessionKeeper[Page]) -> list[Any]:
    """The live browser's cookies (for the canary check only; never printed)."""
    page = await keeper.unguarded_page(CONVERSATION)
    return list(await page.context.cookies())


def main(argv: list[str] | None = None) -> int:
    """Run the story headless and print its RESULT line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifacts", type=Path, help="save a screenshot of each console page")
    args = parser.parse_args(argv)
    if args.artifacts is not None:
        args.artifacts.mkdir(parents=True, exist_ok=True)

    async def go() -> Handoff:
        with tempfile.TemporaryDirectory(prefix="handoff-") as tmp, DemoSites() as sites:
            return await handoff(sites, Path(tmp), artifacts=args.artifacts)

    result = asyncio.run(go())
    print(result.result_line())
    return 0 if result.validated and result.paused and result.resumed else 1


if __name__ == "__main__":
    raise SystemExit(main())
