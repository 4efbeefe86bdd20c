"""One process of a LangGraph thread over a SqliteStore: the test runs it twice.

``start``: a signed-in turn, the browser dies, the next turn interrupts for a sign-in,
the sign-in page is opened; the process ends there. ``resume``: a new process resumes
that turn (it interrupts again), a person signs in, the turn completes; then one more
turn. Each prints one JSON object per line: what the graph was told.
"""

from __future__ import annotations

import asyncio
import json
import operator
import sys
from pathlib import Path
from typing import Annotated, Any

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper.integrations.langgraph import BrowserState, BrowserTurn, browser_node
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakePage

KEY = bytes(range(32))
SITE = "billing.example"
CONFIG: Any = {"configurable": {"thread_id": "billing"}}


class State(BrowserState, total=False):
    visited: Annotated[list[str], operator.add]


async def visit(state: State, turn: BrowserTurn[FakePage]) -> dict[str, Any]:
    tab = await turn.tab(f"https://{SITE}/invoices")
    return {"visited": [tab.url]}


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


async def main(step: str, where: Path) -> None:
    backend = FakeBackend()
    async with (
        SqliteStore(where / "keeper.db") as store,
        AsyncSqliteSaver.from_conn_string(str(where / "graph.db")) as saver,
        SessionKeeper(
            backend,
            durability=Durability(store=store),
            login_settings=LoginSettings(fingerprint_key=KEY),
            grants=[Grant("billing", SITE)],
        ) as keeper,
    ):
        builder = StateGraph(State)
        builder.add_node("work", browser_node(keeper, visit, sites=[SITE]))
        builder.add_edge(START, "work")
        builder.add_edge("work", END)
        graph = builder.compile(checkpointer=saver)

        async def signs_in() -> None:
            await backend.sign_in(SITE)
            await keeper.record_login("billing", SITE, account="alice")

        if step == "start":
            await keeper.ensure("billing")
            await signs_in()
            await graph.ainvoke({}, CONFIG)
            session = backend.current
            assert session is not None
            await session.kill()  # the login goes with the browser
            paused = await graph.ainvoke({}, CONFIG)
            say(interrupt=paused["__interrupt__"][0].value["facts"])
            # The person opens the sign-in page, then this process ends before they sign in.
            await keeper.tab("billing", f"https://{SITE}/login")
        else:
            paused = await graph.ainvoke(Command(resume="done"), CONFIG)
            say(interrupt=paused["__interrupt__"][0].value["facts"])
            await signs_in()
            done = await graph.ainvoke(Command(resume="signed in"), CONFIG)
            say(browser=done["browser"], told=done["browser_told"])
            later = await graph.ainvoke({}, CONFIG)
            say(browser=later["browser"], told=later["browser_told"])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
