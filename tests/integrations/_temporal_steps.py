"""Browser steps of the Temporal integration tests, for in-process and subprocess workers."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from temporalio import activity

from session_keeper.errors import SignedOut, TransientFailure
from session_keeper.integrations.temporal import BrowserStep, BrowserSteps
from session_keeper.jobs import Readback

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
    submit raises after the POST), as when a connection drops mid-reply.
    """

    async def submit(page: Any, key: str) -> dict[str, object]:
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
