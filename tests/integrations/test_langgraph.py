"""LangGraph: compiled graphs on a durable checkpointer keep every restart fact, told once."""

from __future__ import annotations

import asyncio
import json
import operator
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, RetryPolicy

from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper.facts import TurnFacts
from session_keeper.integrations.langgraph import BrowserState, BrowserTurn, browser_node
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage

ROOT = Path(__file__).resolve().parents[2]
KEY = bytes(range(32))
INVOICES = "https://billing.example/invoices"


class State(BrowserState, total=False):
    visited: Annotated[list[str], operator.add]


def keeper_on(backend: FakeBackend, store: SqliteStore) -> SessionKeeper[FakePage]:
    return SessionKeeper(
        backend,
        clock=FakeClock(),
        durability=Durability(store=store),
        login_settings=LoginSettings(fingerprint_key=KEY),
        grants=[Grant("billing", "billing.example")],
    )


def one_node_graph(node: Any, saver: AsyncSqliteSaver, **kwargs: Any) -> CompiledStateGraph[Any]:
    builder = StateGraph(State)
    builder.add_node("work", node, **kwargs)
    builder.add_edge(START, "work")
    builder.add_edge("work", END)
    return builder.compile(checkpointer=saver)


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


async def visit(state: State, turn: BrowserTurn[FakePage]) -> dict[str, Any]:
    tab = await turn.tab(INVOICES if turn.conversation == "billing" else "https://docs.example/")
    return {"visited": [tab.url]}


async def human_signs_in(keeper: SessionKeeper[FakePage], backend: FakeBackend) -> None:
    await keeper.ensure("billing")
    await backend.sign_in("billing.example")
    await keeper.record_login("billing", "billing.example", account="alice")


async def test_a_lost_login_interrupts_for_a_human_and_resume_re_verifies_before_acting(
    tmp_path: Path,
) -> None:
    """Lost login → interrupt(sign_in); a resume without a sign-in interrupts again; after
    the sign-in the step runs, and the turn's facts reach the state once."""
    backend = FakeBackend()
    async with (
        SqliteStore(tmp_path / "k.db") as store,
        AsyncSqliteSaver.from_conn_string(str(tmp_path / "graph.db")) as saver,
    ):
        keeper = keeper_on(backend, store)
        async with keeper:
            await human_signs_in(keeper, backend)
            graph = one_node_graph(browser_node(keeper, visit, sites=["billing.example"]), saver)
            first = await graph.ainvoke({}, config("billing"))
            assert first["visited"] == [INVOICES] and first.get("browser_told", []) == []
            session = backend.current
            assert session is not None
            await session.kill()  # the login goes with the browser

            paused = await graph.ainvoke({}, config("billing"))
            (ask,) = paused["__interrupt__"]
            assert ask.value["type"] == "sign_in" and ask.value["site"] == "billing.example"
            told = TurnFacts.from_dict(ask.value["facts"])
            assert told.restarted and "login:billing.example" in map(str, told.lost)

            # Resumed, but nobody signed in: re-verified, asked again, nothing done.
            again = await graph.ainvoke(Command(resume="done"), config("billing"))
            assert again["__interrupt__"] and again["visited"] == [INVOICES]

            await human_signs_in(keeper, backend)
            done = await graph.ainvoke(Command(resume="signed in"), config("billing"))
            assert "__interrupt__" not in done
            assert done["visited"] == [INVOICES, INVOICES]
            assert [TurnFacts.from_dict(f) for f in done["browser_told"]] == [told]

            later = await graph.ainvoke({}, config("billing"))
            assert not TurnFacts.from_dict(later["browser"]).restarted
            assert len(later["browser_told"]) == 1
            assert backend.launches == 2


async def test_a_retried_node_sees_the_same_facts_and_they_are_told_once(tmp_path: Path) -> None:
    """A RetryPolicy re-execution after a failure sees the restart the failed attempt saw."""
    backend = FakeBackend()
    seen: list[TurnFacts] = []

    async def flaky(state: State, turn: BrowserTurn[FakePage]) -> dict[str, Any]:
        seen.append(turn.facts)
        if len(seen) == 2:  # the first attempt after the crash fails
            raise ConnectionError("the site hiccuped")
        return await visit(state, turn)

    async with (
        SqliteStore(tmp_path / "k.db") as store,
        AsyncSqliteSaver.from_conn_string(str(tmp_path / "graph.db")) as saver,
        keeper_on(backend, store) as keeper,
    ):
        retry = RetryPolicy(max_attempts=3, initial_interval=0.001, jitter=False)
        graph = one_node_graph(browser_node(keeper, flaky), saver, retry_policy=retry)
        await graph.ainvoke({}, config("billing"))
        session = backend.current
        assert session is not None
        await session.kill()
        out = await graph.ainvoke({}, config("billing"))
        assert len(seen) == 3
        assert seen[1] == seen[2] and seen[2].restarted
        assert [str(x) for x in seen[2].lost] == ["tab:billing"]
        assert [TurnFacts.from_dict(f) for f in out["browser_told"]] == [seen[2]]


async def test_two_threads_across_one_crash_lose_nothing_hear_nothing_twice_one_relaunch(
    tmp_path: Path,
) -> None:
    """Two threads, one browser crash, a run that fails and is re-run from the checkpoint."""
    backend = FakeBackend()
    failed_once: set[str] = set()

    async def step(state: State, turn: BrowserTurn[FakePage]) -> dict[str, Any]:
        if turn.facts.restarted and turn.conversation not in failed_once:
            failed_once.add(turn.conversation)
            raise RuntimeError("worker died mid-step")  # no RetryPolicy: the run fails
        return await visit(state, turn)

    async with (
        SqliteStore(tmp_path / "k.db") as store,
        AsyncSqliteSaver.from_conn_string(str(tmp_path / "graph.db")) as saver,
        keeper_on(backend, store) as keeper,
    ):
        await human_signs_in(keeper, backend)
        graph = one_node_graph(browser_node(keeper, step), saver)
        threads = ("billing", "research")
        await asyncio.gather(*(graph.ainvoke({}, config(t)) for t in threads))
        session = backend.current
        assert session is not None
        await session.kill()
        billing, research = await asyncio.gather(
            *(graph.ainvoke({}, config(t)) for t in threads), return_exceptions=True
        )
        assert isinstance(research, RuntimeError)
        # billing lost its own login: asked for a sign-in first, then fails mid-step.
        assert isinstance(billing, dict) and billing["__interrupt__"]
        await human_signs_in(keeper, backend)
        try:
            await graph.ainvoke(Command(resume="signed in"), config("billing"))
        except RuntimeError:
            pass
        else:
            raise AssertionError("the resumed billing step should have failed once")
        # Re-run each failed task from its checkpoint (input None = continue).
        outs = await asyncio.gather(*(graph.ainvoke(None, config(t)) for t in threads))
        finals = await asyncio.gather(*(graph.ainvoke({}, config(t)) for t in threads))
        assert backend.launches == 2  # one relaunch for both threads
        for thread, out, final in zip(threads, outs, finals, strict=True):
            (told,) = [TurnFacts.from_dict(f) for f in out["browser_told"]]
            assert told.restarted and f"tab:{thread}" in map(str, told.lost)
            if thread == "billing":
                assert "login:billing.example" in map(str, told.lost)
            assert len(final["browser_told"]) == 1  # not told again
            assert not TurnFacts.from_dict(final["browser"]).restarted


def _process(step: str, where: Path) -> list[dict[str, Any]]:
    """Run one process of the thread (``_graph_process.py``); what it printed."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).parent / "_graph_process.py"), step, str(where)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_turn_re_executed_in_a_new_process_is_told_exactly_what_its_interrupt_carried(
    tmp_path: Path,
) -> None:
    """A turn interrupts in one process and is resumed in another: every re-execution
    there is told exactly the interrupt's facts; the new process's own launch is the
    next turn's news, told once."""
    (first,) = _process("start", tmp_path)
    asked = TurnFacts.from_dict(first["interrupt"])
    assert asked.restarted and (asked.previous_generation, asked.generation) == (1, 2)
    assert "login:billing.example" in map(str, asked.lost)

    again, done, later = _process("resume", tmp_path)
    assert TurnFacts.from_dict(again["interrupt"]) == asked  # the second process's first run
    assert TurnFacts.from_dict(done["browser"]) == asked  # the run that completed the turn
    assert [TurnFacts.from_dict(f) for f in done["told"]] == [asked]
    launch = TurnFacts.from_dict(later["browser"])
    assert launch.restarted and (launch.previous_generation, launch.generation) == (2, 3)
    assert [str(x) for x in launch.lost] == ["tab:billing"]  # the sign-in page it had open
    assert [TurnFacts.from_dict(f) for f in later["told"]] == [asked, launch]
