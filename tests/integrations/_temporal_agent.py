"""A pydantic-ai agent run durably on Temporal, whose tool is a keeper browser step.

The agent carries pydantic-ai's ``TemporalDurability`` capability (what replaced the
``TemporalAgent`` wrapper): its model requests are activities on the shared queue. Its
one tool, ``read_page``, runs in the workflow (``metadata={"temporal": False}``) and
calls :meth:`WorkflowBrowser.step`, so the page is read on the worker holding the
browser and a failover is told to the model in the tool's answer.

The model is deterministic (``FunctionModel``, no network): it reads pages 0..PAGES-1,
one tool call per request, then answers with what it was told, counted from its own
message history: the pages it read and how many tool answers said the browser restarted.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from session_keeper.facts import TurnFacts
    from session_keeper.integrations.temporal import WorkflowBrowser

PAGES = 8
#: How a restart reads in the tool's answer (``TurnFacts.to_prompt``).
RESTARTED = "Browser restarted"


def auditor(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The deterministic model: the next page to read, else what it read and was told."""
    answers = [
        p for m in messages for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)
    ]
    if len(answers) < PAGES:
        return ModelResponse(parts=[ToolCallPart("read_page", {"n": len(answers)})])
    told = sum(RESTARTED in str(p.content) for p in answers)
    read = [int(str(p.content).rsplit("page ", 1)[1].split(":")[0]) for p in answers]
    return ModelResponse(parts=[TextPart(json.dumps({"read": read, "told": told}))])


agent = Agent(
    FunctionModel(auditor),
    name="page_auditor",
    deps_type=dict,
    capabilities=[
        TemporalDurability(activity_config={"start_to_close_timeout": timedelta(seconds=10)})
    ],
)


@agent.tool(metadata={"temporal": False})
async def read_page(ctx: RunContext[dict[str, Any]], n: int) -> str:
    """Read page ``n`` of the guide in this conversation's browser."""
    browser: WorkflowBrowser = workflow.instance().browser
    result = await browser.step("read_page", {**ctx.deps, "n": n})
    told = [TurnFacts.from_dict(result.facts).to_prompt()] if result.told else []
    return "\n".join([*told, f"page {n}: {result.value}"])


@workflow.defn
class AgentAudit(PydanticAIWorkflow):
    """``plan``: ``{"conversation", "queue", "base", "pause"}``; returns the model's answer
    and what the session decided."""

    __pydantic_ai_agents__ = (agent,)

    @workflow.run
    async def run(self, plan: dict[str, Any]) -> dict[str, Any]:
        """Run the agent; its browser steps go to the worker holding the browser."""
        self.browser = WorkflowBrowser(
            plan["conversation"],
            queue=plan["queue"],
            heartbeat_timeout=timedelta(seconds=3),
            worker_timeout=timedelta(seconds=4),
        )
        deps = {"base": plan["base"], "pause": plan["pause"]}
        result = await agent.run("Read the guide, page by page.", deps=deps)
        return {
            "answer": json.loads(result.output),
            "failovers": self.browser.failovers,
            "told": len(self.browser.told),
        }
