"""A pydantic-ai agent run durably on DBOS, whose tools are keeper browser steps.

The agent carries pydantic-ai's ``DBOSDurability`` capability (what replaced the
``DBOSAgent`` wrapper): inside a DBOS workflow each model request is a DBOS step, and its
function tools run in the workflow's own code. The tools, ``read_page`` and ``refund``,
call :meth:`WorkflowBrowser.step` with the test steps of ``_dbos_steps.py``: the page is
read (the refund made) in a DBOS step on the process's ``BrowserWorker``, a recovery is
told to the model in the tool's answer, and a lost login waits for a person on
``DBOS.recv`` between the model's requests (a tool is workflow code, not a step, so the
wait is allowed there; DBOS forbids ``recv`` inside a step).

The model is deterministic (``FunctionModel``, no network): it reads pages
``0..PAGES-1``, asking for the refund after page ``REFUND_AT - 1``, one tool call per
request, then answers with what it was told, counted from its own message history: the
pages it read, the refund's answer and how many tool answers said the browser restarted.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from dbos import DBOS
from pydantic_ai import Agent, RunContext
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from session_keeper.facts import TurnFacts
from session_keeper.integrations.dbos import StepResult, WorkflowBrowser
from tests.integrations._dbos_steps import refund as refund_step
from tests.integrations._dbos_steps import visit

PAGES = 6
#: The model asks for the refund once it read this many pages.
REFUND_AT = 3
#: How a restart reads in a tool's answer (``TurnFacts.to_prompt``).
RESTARTED = "Browser restarted"


def auditor(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The deterministic model: the next tool call, else what it read and was told."""
    answers = [
        p for m in messages for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)
    ]
    done = len(answers)
    if done == REFUND_AT:
        return ModelResponse(parts=[ToolCallPart("refund", {"amount": "4.75"})])
    if done <= PAGES:
        return ModelResponse(parts=[ToolCallPart("read_page", {"n": done - (done > REFUND_AT)})])
    told = sum(RESTARTED in str(p.content) for p in answers)
    pages = [str(p.content) for p in answers if p.tool_name == "read_page"]
    read = [int(text.rsplit("page ", 1)[1].split(":")[0]) for text in pages]
    (refunded,) = [str(p.content).splitlines()[-1] for p in answers if p.tool_name == "refund"]
    return ModelResponse(
        parts=[TextPart(json.dumps({"read": read, "refund": refunded, "told": told}))]
    )


@dataclasses.dataclass(kw_only=True)
class AuditDeps:
    """What the tools use: the workflow's browser, the pages and billing's invoices."""

    browser: WorkflowBrowser
    base: str
    pause: float
    invoices_url: str
    #: The worker of every browser step, in order (a recovered run repeats the
    #: recorded ones: DBOS returns the steps completed before the death).
    workers: list[str] = dataclasses.field(default_factory=list)


agent = Agent(
    FunctionModel(auditor),
    name="dbos_page_auditor",
    deps_type=AuditDeps,
    capabilities=[DBOSDurability()],
)


def told(result: StepResult) -> list[str]:
    """The step's facts for the model, when it has news (a restart, a loss)."""
    return [TurnFacts.from_dict(result.facts).to_prompt()] if result.told else []


@agent.tool
async def read_page(ctx: RunContext[AuditDeps], n: int) -> str:
    """Read page ``n`` of the guide in this conversation's browser."""
    arg = {"url": f"{ctx.deps.base}&page={n}", "pause": ctx.deps.pause}
    result = await ctx.deps.browser.step(visit, arg)
    ctx.deps.workers.append(result.worker)
    return "\n".join([*told(result), f"page {n}: {result.value}"])


@agent.tool
async def refund(ctx: RunContext[AuditDeps], amount: str) -> str:
    """Refund ``amount`` through billing, once (the step reads back before any resubmit)."""
    # The step dwells after billing answered: a window in which its process can die
    # with the refund made but the step not recorded.
    arg = {"url": ctx.deps.invoices_url, "amount": amount, "pause_after": 1.0}
    result = await ctx.deps.browser.step(refund_step, arg)
    ctx.deps.workers.append(result.worker)
    return "\n".join(
        [*told(result), f"refund {result.value['refund_id']} by {result.value['how']}"]
    )


@DBOS.workflow()
async def agent_run(plan: dict[str, Any]) -> dict[str, Any]:
    """``plan``: ``{"conversation", "base", "pause", "invoices_url"}``; returns the model's
    answer and what the workflow's browser session decided."""
    browser = WorkflowBrowser(plan["conversation"])
    deps = AuditDeps(
        browser=browser, base=plan["base"], pause=plan["pause"], invoices_url=plan["invoices_url"]
    )
    result = await agent.run("Read the guide page by page, then refund 4.75.", deps=deps)
    return {
        "answer": json.loads(result.output),
        "told": browser.told,
        "sign_ins": browser.sign_ins,
        "workers": deps.workers,
    }
