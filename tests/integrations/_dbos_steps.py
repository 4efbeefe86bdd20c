"""Browser steps and the workflow of the DBOS integration tests (in-process and subprocess).

``browser_run(plan)`` runs ``plan["steps"]`` (``[[name, arg], ...]``) in order in one
:class:`WorkflowBrowser` and returns what each step returned and what it was told.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from dbos import DBOS

from session_keeper.errors import SignedOut, TransientFailure
from session_keeper.integrations.dbos import BrowserStep, BrowserSteps, WorkflowBrowser
from session_keeper.jobs import Readback
from tests.integrations._faults import stall_once

STEPS = BrowserSteps()

#: Retries a test waits for: quick, as a page hiccup is.
FAST = timedelta(seconds=0.2)

READ_ROWS = "rows => rows.map(r => r.cells[0].textContent)"

#: Dwells a test in this process ends early (``arg["released_by"]``: :func:`release`).
_RELEASES: dict[str, threading.Event] = {}


def release(name: str) -> None:
    """End the dwell of the steps given ``released_by=name`` (now, or as they start it)."""
    _RELEASES.setdefault(name, threading.Event()).set()


async def _dwell(arg: Mapping[str, Any]) -> None:
    """Dwell ``arg["pause_after"]`` seconds; with ``arg["released_by"]``, only until the
    test in this process calls :func:`release` with that name (a wait on what the test
    waits for, not a guess at how long it takes). A thread's event: DBOS may run the step
    on another loop than the test's."""
    seconds = float(arg.get("pause_after", 0))
    name = arg.get("released_by")
    if name is None:
        await asyncio.sleep(seconds)
        return
    await asyncio.to_thread(_RELEASES.setdefault(str(name), threading.Event()).wait, seconds)


@STEPS.step("dbos_read_invoices", sites=("billing.example",), interval=FAST)
async def read_invoices(step: BrowserStep[Any], url: str) -> list[str]:
    """The invoice numbers billing lists; its sign-in page means the login is gone."""
    page = await step.page(url)
    if await page.title() != "Invoices":
        raise SignedOut("billing shows its sign-in page")
    rows: list[str] = await page.locator("#invoices tr").evaluate_all(READ_ROWS)
    return rows


@STEPS.step("dbos_refund", sites=("billing.example",), interval=FAST)
async def refund(step: BrowserStep[Any], arg: dict[str, Any]) -> Mapping[str, object]:
    """One refund through billing's page, under the step's idempotency key.

    ``arg["lose_answer"]``: the refund reaches the site but its answer is lost (the
    submit raises after the POST), as when a connection drops mid-reply;
    ``arg["lose_request"]``: the submit fails before the POST leaves (first attempt
    only); ``arg["pause_after"]``: seconds the step dwells after the POST was answered (a
    window in which its process can die with the write made but not recorded), at most,
    with ``arg["released_by"]`` (:func:`release` ends it);
    ``arg["stall_s"]``: the process stalls that long once (``stall_once``), before the
    step opens the page (``stall_at="page"``) or before it writes (``"write"``).
    """
    if arg.get("stall_at") == "page":
        stall_once(arg)
    if arg.get("stall_at") == "write":
        await step.page(arg["url"])
        stall_once(arg)

    async def submit(page: Any, key: str) -> dict[str, object]:
        if arg.get("lose_request") and _attempt() == 1:
            raise TransientFailure("the refund's request never left")
        script = """async ([key, amount]) => {
            const r = await fetch(
                `/refund?idempotency_key=${encodeURIComponent(key)}&amount=${amount}`,
                {method: "POST"});
            return await r.json();
        }"""
        answer = await page.evaluate(script, [key, arg["amount"]])
        await _dwell(arg)
        if arg.get("lose_answer"):
            raise TransientFailure("the refund's answer was lost on the way back")
        return {"refund_id": answer["refund_id"], "how": "submitted"}

    async def readback(page: Any, key: str) -> Readback:
        script = """async (key) => {
            const r = await fetch(`/refunds/${key}`);
            return {status: r.status, body: await r.json()};
        }"""
        seen = await page.evaluate(script, key)
        if seen["status"] == 401:
            raise SignedOut("billing asks for a sign-in before it answers")
        if seen["status"] == 404:
            return Readback(status="absent")
        if seen["status"] == 200:
            return Readback(
                status="applied",
                outcome={"refund_id": seen["body"]["refund_id"], "how": "readback"},
            )
        return Readback(status="unknown")

    return await step.write("refund", submit, readback, url=arg["url"])


@STEPS.step("dbos_flaky_visit", interval=FAST)
async def flaky_visit(step: BrowserStep[Any], url: str) -> int:
    """Open ``url``; the first attempt then fails as a page hiccup would (retried by DBOS)."""
    await step.page(url)
    if _attempt() == 1:
        raise TransientFailure("the page hiccuped")
    return _attempt()


@STEPS.step("dbos_visit", interval=FAST, max_attempts=40)
async def visit(step: BrowserStep[Any], arg: dict[str, Any]) -> str:
    """Open ``arg["url"]`` (one page of a walk), then dwell ``arg["pause"]`` seconds."""
    page = await step.page(arg["url"])
    await asyncio.sleep(float(arg.get("pause", 0)))
    title: str = await page.title()
    return title


@STEPS.step("dbos_read_page", interval=FAST, max_attempts=20)
async def read_page(step: BrowserStep[Any], arg: dict[str, Any]) -> dict[str, int]:
    """Read page ``arg["n"]`` of a walk (``arg["base"]`` with ``page=N``), then dwell
    ``arg["pause"]`` seconds. ``arg["title"]``: the title a signed-in page shows (another
    one is a sign-in page: the login is gone). Returns the page and the attempt."""
    sep = "&" if "?" in arg["base"] else "?"
    page = await step.page(f"{arg['base']}{sep}page={arg['n']}")
    if arg.get("title") and await page.title() != arg["title"]:
        raise SignedOut("the site shows its sign-in page")
    await asyncio.sleep(float(arg.get("pause", 0)))
    return {"n": int(arg["n"]), "attempt": _attempt()}


def _attempt() -> int:
    """This DBOS step's attempt, from 1."""
    status = DBOS.step_status
    assert status is not None and status.current_attempt is not None
    return status.current_attempt + 1


BY_NAME = {made.name: made for made in STEPS}


@DBOS.workflow()
async def browser_run(plan: dict[str, Any]) -> dict[str, Any]:
    """Run the plan's steps; return values, workers, facts, what was told, sign-ins."""
    session = WorkflowBrowser(plan["conversation"])
    values, workers, facts = [], [], []
    for name, arg in plan["steps"]:
        result = await session.step(BY_NAME[name], arg)
        values.append(result.value)
        workers.append(result.worker)
        facts.append(result.facts)
    return {
        "values": values,
        "workers": workers,
        "facts": facts,
        "told": session.told,
        "sign_ins": session.sign_ins,
    }
