"""Browser steps of the Temporal integration tests, for in-process and subprocess workers."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from temporalio import activity

from session_keeper.errors import SignedOut, TransientFailure
from session_keeper.integrations.temporal import BrowserStep, BrowserSteps
from session_keeper.jobs import Readback
from tests.integrations._faults import stall_once

STEPS = BrowserSteps()

READ_ROWS = "rows => rows.map(r => r.cells[0].textContent)"


@STEPS.step("read_invoices", sites=("billing.example",))
async def read_invoices(step: BrowserStep[Any], url: str) -> list[str]:
    """The invoice numbers billing lists; its sign-in page means the login is gone."""
    page = await step.page(url)
    if await page.title() != "Invoices":
        raise SignedOut("billing shows its sign-in page")
    rows: list[str] = await page.locator("#invoices tr").evaluate_all(READ_ROWS)
    return rows


async def _post_refund(page: Any, key: str, amount: str) -> dict[str, Any]:
    script = """async ([key, amount]) => {
        const r = await fetch(`/refund?idempotency_key=${encodeURIComponent(key)}&amount=${amount}`,
                              {method: "POST"});
        return await r.json();
    }"""
    answer: dict[str, Any] = await page.evaluate(script, [key, amount])
    return answer


@STEPS.step("refund", sites=("billing.example",))
async def refund(step: BrowserStep[Any], arg: dict[str, Any]) -> Mapping[str, object]:
    """One refund through billing's page, under the step's idempotency key.

    ``arg["lose_answer"]``: the refund reaches the site but its answer is lost (the
    submit raises after the POST), as when a connection drops mid-reply;
    ``arg["lose_request"]``: the submit fails before the POST leaves (first attempt
    only). ``arg["stall_s"]``: the worker's whole process stalls that long (a blocking
    sleep: no lease renewal, no heartbeat, as in a long GC pause or a frozen VM) once,
    before it opens the page (``stall_at="page"``) or before it writes (``"write"``).
    """
    if arg.get("stall_at") == "page":
        stall_once(arg)
    await step.page(arg["url"])
    if arg.get("stall_at") == "write":
        stall_once(arg)

    async def submit(page: Any, key: str) -> dict[str, object]:
        if arg.get("lose_request") and activity.info().attempt == 1:
            raise TransientFailure("the refund's request never left")
        answer = await _post_refund(page, key, arg["amount"])
        if arg.get("lose_answer"):
            raise TransientFailure("the refund's answer was lost on the way back")
        return {"refund_id": answer["refund_id"], "how": "submitted"}

    async def readback(page: Any, key: str) -> Readback:
        script = """async (key) => {
            const r = await fetch(`/refunds/${key}`);
            return {status: r.status, body: await r.json()};
        }"""
        seen = await page.evaluate(script, key)
        if seen["status"] == 404:
            return Readback(status="absent")
        if seen["status"] == 200:
            return Readback(
                status="applied",
                outcome={"refund_id": seen["body"]["refund_id"], "how": "readback"},
            )
        return Readback(status="unknown")

    return await step.write("refund", submit, readback, url=arg["url"])


@STEPS.step("flaky_visit")
async def flaky_visit(step: BrowserStep[Any], url: str) -> int:
    """Open ``url``; the first attempt then fails as a page hiccup would (retried)."""
    await step.page(url)
    attempt = activity.info().attempt
    if attempt == 1:
        raise TransientFailure("the page hiccuped")
    return attempt


#: Attempts of ``refused_visit`` seen in this process (the retry policy must make none).
REFUSED_ATTEMPTS: list[int] = []


@STEPS.step("refused_visit")
async def refused_visit(step: BrowserStep[Any], url: str) -> None:
    """Open ``url``, which the keeper's rules refuse (a ``chrome:`` page)."""
    REFUSED_ATTEMPTS.append(activity.info().attempt)
    await step.page(url)


@STEPS.step("walk")
async def walk(step: BrowserStep[Any], arg: dict[str, Any]) -> dict[str, Any]:
    """Visit ``base`` with ``page=N`` for N from the checkpoint on, a heartbeat after each."""
    start = int(step.checkpoint or 0)
    seen = []
    sep = "&" if "?" in arg["base"] else "?"
    for n in range(start, int(arg["pages"])):
        await step.page(f"{arg['base']}{sep}page={n}")
        seen.append(n)
        step.heartbeat(n + 1)
        await asyncio.sleep(float(arg.get("pause", 0)))
    return {"start": start, "pages": seen, "attempt": activity.info().attempt}


@STEPS.step("walk_pages")
async def walk_pages(step: BrowserStep[Any], arg: dict[str, Any]) -> dict[str, Any]:
    """Read ``base`` with ``page=N`` for N from the checkpoint on; the checkpoint carries
    the pages read so far, so the step's result is every page once, whoever read it.

    ``arg["title"]``: the title a signed-in page shows (another one is a sign-in page:
    the login is gone). ``arg["pause"]``: seconds between pages.
    """
    done: dict[str, Any] = dict(step.checkpoint or {"next": 0, "read": []})
    start = int(done["next"])
    sep = "&" if "?" in arg["base"] else "?"
    for n in range(start, int(arg["pages"])):
        page = await step.page(f"{arg['base']}{sep}page={n}")
        if arg.get("title") and await page.title() != arg["title"]:
            raise SignedOut("the site shows its sign-in page")
        done = {"next": n + 1, "read": [*done["read"], n]}
        step.heartbeat(done)
        await asyncio.sleep(float(arg.get("pause", 0)))
    return {"start": start, "read": done["read"], "attempt": activity.info().attempt}


@STEPS.step("read_page")
async def read_page(step: BrowserStep[Any], arg: dict[str, Any]) -> str:
    """Open ``base`` with ``page=N``, dwell ``pause`` seconds (reading), return its title."""
    sep = "&" if "?" in arg["base"] else "?"
    page = await step.page(f"{arg['base']}{sep}page={arg['n']}")
    await asyncio.sleep(float(arg.get("pause", 0)))
    title: str = await page.title()
    return title
