"""``session-keeper mcp`` driven by two agent frameworks' own MCP clients, as an app would.

Pydantic AI (``MCPToolset`` over stdio, a ``FunctionModel``) and the OpenAI Agents SDK
(``agents.mcp.MCPServerStdio``, a scripted ``Model``) each start the real
``session-keeper mcp`` command, with a console for sign-ins, and run one chat through
turns (one agent run each): a page, a SIGKILL of Chromium between turns and the banner
the model gets next, a sign-in handed to a person through the link the model passes
on, the signed-in page, and the Guard refusing that page to a conversation without a
grant. The model is a plain function of what it was sent; every input it gets is
kept, and the person's password is in none of them.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from session_keeper.mcp import CONVERSATION_META, TURN_META
from session_keeper.testing import LocalSites

from .conftest import kill_chromium, with_login

pytestmark = [pytest.mark.chromium, pytest.mark.timeout(180)]

SITE = "billing.example"
#: The person's billing password: typed only into the live view, never sent to a model.
CANARY = "canary-Vq7x-only-the-person-knows"
#: The console's one-time sign-in link, as the tool's answer carries it.
LINK = re.compile(r"http://127\.0\.0\.1:\d+/login\?code=[\w%.~-]+")


@pytest.fixture(scope="module")
def canary_sites() -> Iterator[LocalSites]:
    """Local sites whose billing account ``alice`` has the canary password."""
    with LocalSites(billing_accounts={"alice": CANARY}) as running:
        yield running


def server_command(profile: Path, sites: LocalSites, chromium: str) -> tuple[str, list[str]]:
    """The ``session-keeper mcp`` command line an app configures: one stdio client for
    two conversations (``billing`` holds the billing grant, ``research`` none), and the
    console that browser_request_sign_in hands a person."""
    command = Path(sys.executable).with_name("session-keeper")
    assert command.exists(), f"{command} is not installed"
    return str(command), [
        "mcp", "--profile", str(profile), "--executable", chromium,
        # Every other name unresolved: Chromium's own lookups (accounts.google.com, the
        # password leak check after a sign-in) stay on this machine.
        "--host-resolver-rules", f"{sites.host_resolver_rules}, MAP * ~NOTFOUND",
        "--conversation", "billing", "--conversation", "research",
        "--grant", SITE, "--console", "127.0.0.1:0",
    ]  # fmt: skip


# -- the model: a function of the user's words and the tool results it was sent ----------


@dataclass
class Chat:
    """Who a run acts for: the conversation and its turn (sent in every call's ``_meta``)."""

    conversation: str
    turn: str

    def meta(self) -> dict[str, Any]:
        return {CONVERSATION_META: self.conversation, TURN_META: self.turn}


def decide(prompt: str, results: Sequence[str]) -> tuple[str, dict[str, Any]] | str:
    """The scripted model's next step: a tool call ``(name, arguments)``, or its reply.

    ``open URL`` navigates there (once more if the browser went away under the first
    call) and replies with what it was told; ``sign-in SITE URL`` asks for a person's
    sign-in there and replies with the link it was given, for the person.
    """
    verb, _, rest = prompt.partition(" ")
    if verb == "open":
        if not results or (len(results) == 1 and "went away during" in results[0]):
            return "browser_navigate", {"url": rest}
        return results[-1]
    assert verb == "sign-in", prompt
    site, url = rest.split()
    if not results:
        return "browser_request_sign_in", {"site": site, "url": url}
    link = LINK.search(results[-1])
    return f"Please sign in here: {link[0]}" if link else results[-1]


@dataclass
class Transcript:
    """Everything the model was sent, per turn: its whole input serialized, and the text
    of each tool result in it."""

    inputs: list[str] = field(default_factory=list)
    results: dict[str, list[str]] = field(default_factory=dict)

    def told(self, turn: str) -> str:
        return "\n".join(self.results.get(turn, []))


# -- the person: opens the link, signs in through the live view, presses Done ------------


async def _key(ws: ClientConnection, key: str, key_code: int, text: str = "") -> None:
    down = {"type": "key", "action": "keyDown", "key": key, "code": key, "keyCode": key_code}
    await ws.send(json.dumps({**down, "text": text}))
    await ws.send(json.dumps({**down, "action": "keyUp"}))


async def _frame_at(ws: ClientConnection, url: str) -> None:
    """Wait (30 s at most) for a frame of the page at ``url``: what the person sees."""
    came: list[str] = []
    try:
        async with asyncio.timeout(30):
            while True:
                msg = json.loads(await ws.recv())
                if msg.get("type") == "error":
                    raise AssertionError(f"the live view refused: {msg}")
                if msg.get("type") == "frame" and msg.get("url") == url:
                    return
                came.append(f"{msg.get('type')}:{msg.get('url')}")
    except TimeoutError:
        raise AssertionError(f"no frame of {url} in 30 s; came: {came[-10:]}") from None


async def person_signs_in(link: str, sites: LocalSites) -> str:
    """A person with the link: opens it, types into the conversation's tab through the
    live view (focus, username, password, Enter), presses Done; returns what Done said."""
    async with httpx.AsyncClient(follow_redirects=True, timeout=30) as person:
        live = await person.get(link)
        assert live.status_code == 200, live.text
        form = {
            name: m[1]
            for name in ("csrf", "exp", "sig")
            if (m := re.search(rf'name="{name}" value="([^"]+)"', live.text))
        }
        assert form.keys() == {"csrf", "exp", "sig"}, live.text
        where = urlsplit(str(live.url))
        ws_url = f"ws://{where.netloc}{where.path}/ws?{where.query}"
        cookies = "; ".join(f"{k}={v}" for k, v in person.cookies.items())
        async with connect(ws_url, additional_headers={"Cookie": cookies}) as ws:
            await _frame_at(ws, sites.url(SITE, "/login"))
            await _key(ws, "Tab", 9)  # the username field is the page's first
            await ws.send(json.dumps({"type": "paste", "text": "alice"}))
            await _key(ws, "Tab", 9)
            await ws.send(json.dumps({"type": "paste", "text": CANARY}))
            await _key(ws, "Enter", 13, "\r")
            await _frame_at(ws, sites.url(SITE, "/invoices"))
        done = await person.post(
            f"http://{where.netloc}{where.path}/done",
            data={**form, "site": SITE, "account": "alice"},
        )
        assert done.status_code == 200, done.text
        async with httpx.AsyncClient() as someone_else:
            again = await someone_else.get(link)
        assert again.status_code == 403, "the sign-in link opened twice"
        return done.text


# -- the chat both frameworks run -----------------------------------------------------


#: One turn: an agent run for a chat on a prompt, to the model's reply (per framework).
Run = Callable[[Chat, str], Awaitable[str]]


async def the_chat(run: Run, transcript: Transcript, sites: LocalSites, profile: Path) -> None:
    """Turns of ``billing`` and ``research`` through one server, and what each was told."""
    docs, invoices = sites.url("docs.example", "/"), sites.url(SITE, "/invoices")

    seen = await run(Chat("billing", "t1"), f"open {docs}")
    assert "Docs" in seen and "### Browser restart" not in transcript.told("t1")

    kill_chromium(profile)
    await run(Chat("billing", "t2"), f"open {docs}")
    assert "### Browser restart" in transcript.told("t2"), transcript.told("t2")

    reply = await run(Chat("billing", "t3"), f"sign-in {SITE} {sites.url(SITE, '/login')}")
    link = LINK.search(reply)
    assert link is not None, f"the model was given no link: {transcript.told('t3')}"
    # The words with the link reach the model too, whichever part of the result it is given.
    assert "Never ask them for the password" in transcript.told("t3"), transcript.told("t3")
    said = await person_signs_in(link[0], sites)
    assert f"login to {SITE} recorded for billing" in said

    await run(Chat("billing", "t4"), f"open {invoices}")
    assert "Invoices" in transcript.told("t4") and "INV-1001" in transcript.told("t4")

    mark = len(sites.requests(SITE))
    await run(Chat("research", "t5"), f"open {invoices}")
    assert "signed in by billing" in transcript.told("t5"), transcript.told("t5")
    assert with_login(sites, mark) == 0
    assert "### Browser restart" not in transcript.told("t3") + transcript.told("t4")

    assert transcript.inputs, "the model was never called"
    leaked = [i for i in transcript.inputs if CANARY in i]
    assert not leaked, f"the password reached the model: {leaked[0][:500]}"


# -- Pydantic AI ----------------------------------------------------------------------


@asynccontextmanager
async def pydantic_ai_chat(
    command: str, args: list[str], transcript: Transcript
) -> AsyncIterator[Run]:
    """A Pydantic AI agent on an ``MCPToolset`` over stdio, with a ``FunctionModel``."""
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.mcp import CallToolFunc, MCPToolset, ToolResult
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    turns: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        transcript.inputs.append(ModelMessagesTypeAdapter.dump_json(messages).decode())
        prompt, results = "", []
        for message in messages:  # this run's: each run starts a new history
            if not isinstance(message, ModelRequest):
                continue
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    prompt = part.content
                elif isinstance(part, ToolReturnPart):
                    results.append(part.model_response_str())
                elif isinstance(part, RetryPromptPart):
                    results.append(part.model_response())
        transcript.results[turns[-1]] = results
        step = decide(prompt, results)
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        return ModelResponse(parts=[ToolCallPart(*step)])

    async def as_the_chat(
        ctx: RunContext[Chat], call_tool: CallToolFunc, name: str, tool_args: dict[str, Any]
    ) -> ToolResult:
        return await call_tool(name, tool_args, metadata=ctx.deps.meta())

    toolset: MCPToolset[Chat] = MCPToolset(
        StdioTransport(command, args, keep_alive=False),
        process_tool_call=as_the_chat,
        init_timeout=60,
    )
    agent = Agent(FunctionModel(model), deps_type=Chat, toolsets=[toolset])

    async def run(chat: Chat, prompt: str) -> str:
        turns.append(chat.turn)
        return (await agent.run(prompt, deps=chat)).output

    async with toolset:  # one server (and browser) for every turn
        yield run


async def test_a_pydantic_ai_agent_is_told_of_a_restart_refused_by_the_guard_and_handed_a_sign_in(
    tmp_path: Path, canary_sites: LocalSites, chromium_path: str
) -> None:
    """Through Pydantic AI's MCPToolset the model is told of the restart, hands a person the
    sign-in link, sees the signed-in page, and is refused it in a conversation without a
    grant; the password never reaches the model."""
    profile = tmp_path / "profile"
    transcript = Transcript()
    command, args = server_command(profile, canary_sites, chromium_path)
    async with pydantic_ai_chat(command, args, transcript) as run:
        await the_chat(run, transcript, canary_sites, profile)


# -- the OpenAI Agents SDK ------------------------------------------------------------


@asynccontextmanager
async def openai_agents_chat(
    command: str, args: list[str], transcript: Transcript
) -> AsyncIterator[Run]:
    """An Agents SDK agent on ``agents.mcp.MCPServerStdio``, with a scripted ``Model``."""
    from agents import Agent, ModelSettings, RunConfig, Runner, Tool, Usage
    from agents.agent_output import AgentOutputSchemaBase
    from agents.handoffs import Handoff
    from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
    from agents.mcp import MCPServerStdio, MCPToolMetaContext
    from agents.models.interface import Model, ModelTracing
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )
    from openai.types.responses.response_prompt_param import ResponsePromptParam

    turns: list[str] = []

    class Scripted(Model):
        """``decide`` as an Agents SDK model (no network, no key)."""

        async def get_response(
            self,
            system_instructions: str | None,
            input: str | list[TResponseInputItem],
            model_settings: ModelSettings,
            tools: list[Tool],
            output_schema: AgentOutputSchemaBase | None,
            handoffs: list[Handoff[Any, Any]],
            tracing: ModelTracing,
            *,
            previous_response_id: str | None,
            conversation_id: str | None,
            prompt: ResponsePromptParam | None,
        ) -> ModelResponse:
            items = [{"role": "user", "content": input}] if isinstance(input, str) else input
            transcript.inputs.append(json.dumps([system_instructions, items], default=str))
            said, results = "", []
            for item in items:
                entry: dict[str, Any] = dict(item)
                if entry.get("role") == "user" and isinstance(entry.get("content"), str):
                    said = entry["content"]
                elif entry.get("type") == "function_call_output":
                    out = entry["output"]
                    parts = [out] if isinstance(out, str | dict) else out
                    results.append(
                        "\n".join(
                            p if isinstance(p, str) else str(p.get("text", "")) for p in parts
                        )
                    )
            transcript.results[turns[-1]] = results
            step = decide(said, results)
            n = len(results)
            if isinstance(step, str):
                text = ResponseOutputText(type="output_text", text=step, annotations=[])
                message = ResponseOutputMessage(
                    id=f"msg-{turns[-1]}-{n}", type="message", role="assistant",
                    status="completed", content=[text],
                )  # fmt: skip
                return ModelResponse(output=[message], usage=Usage(), response_id=None)
            call = ResponseFunctionToolCall(
                type="function_call", call_id=f"call-{turns[-1]}-{n}", name=step[0],
                arguments=json.dumps(step[1]),
            )  # fmt: skip
            return ModelResponse(output=[call], usage=Usage(), response_id=None)

        def stream_response(
            self,
            system_instructions: str | None,
            input: str | list[TResponseInputItem],
            model_settings: ModelSettings,
            tools: list[Tool],
            output_schema: AgentOutputSchemaBase | None,
            handoffs: list[Handoff[Any, Any]],
            tracing: ModelTracing,
            *,
            previous_response_id: str | None,
            conversation_id: str | None,
            prompt: ResponsePromptParam | None,
        ) -> AsyncIterator[TResponseStreamEvent]:
            raise NotImplementedError("the chat runs without streaming")

    def as_the_chat(context: MCPToolMetaContext) -> dict[str, Any]:
        chat = context.run_context.context
        assert isinstance(chat, Chat)
        return chat.meta()

    server = MCPServerStdio(
        params={"command": command, "args": args},
        client_session_timeout_seconds=60,
        tool_meta_resolver=as_the_chat,
    )
    agent = Agent[Chat](name="browser", model=Scripted(), mcp_servers=[server])
    # Tracing off: nothing is exported anywhere (the SDK's default sends traces to OpenAI).
    config = RunConfig(tracing_disabled=True)

    async def run(chat: Chat, prompt: str) -> str:
        turns.append(chat.turn)
        result = await Runner.run(agent, prompt, context=chat, run_config=config)
        return str(result.final_output)

    async with server:  # one server (and browser) for every turn
        yield run


async def test_an_agents_sdk_agent_is_told_of_a_restart_refused_by_the_guard_and_handed_a_sign_in(
    tmp_path: Path, canary_sites: LocalSites, chromium_path: str
) -> None:
    """Through the Agents SDK's MCPServerStdio the model is told of the restart, hands a
    person the sign-in link, sees the signed-in page, and is refused it in a conversation
    without a grant; the password never reaches the model."""
    profile = tmp_path / "profile"
    transcript = Transcript()
    command, args = server_command(profile, canary_sites, chromium_path)
    async with openai_agents_chat(command, args, transcript) as run:
        await the_chat(run, transcript, canary_sites, profile)
