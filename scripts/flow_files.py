"""Walk three flows through the package and name each of its files they run, in order.

The flows of docs/architecture.md ("Three flows"): (a) a restart told by ``ensure()``,
its rows saved; (b) a guarded MCP ``browser_navigate`` that the Guard refuses, from the
tool call to its result; (c) the job loop's commit of one checked page. Each flow runs
for real (FakeBackend and SQLite for (a) and (c); Chromium, the Guard and the local test
sites for (b)) under a profile hook on every thread, which records each file of
``session_keeper`` that a call enters while the flow runs (what runs beside it on the
event loop included), and each call from a lower layer to a higher one
(``pyproject.toml``'s layers contracts, the engine's rooms included; a generator or
coroutine resumed is no call). The harness's own files (``session_keeper.testing``) are
not counted.

Run: ``python scripts/flow_files.py`` (``--flow a`` for one).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import sys
import tempfile
import threading
import tomllib
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "session_keeper"


def _layers() -> list[tuple[str, int]]:
    """(dotted prefix, rank) of every layer named in pyproject.toml; higher is above."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    ranks: list[tuple[str, int]] = []
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["type"] != "layers":
            continue
        containers = contract.get("containers", [""])
        layers = contract["layers"]
        for container in containers:
            for i, layer in enumerate(layers):
                for name in layer.split("|"):
                    full = f"{container}.{name.strip()}" if container else name.strip()
                    ranks.append((full, len(layers) - i))
    return ranks


LAYERS = _layers()


def layer_of(module: str) -> tuple[tuple[str, int], ...]:
    """The (layer, rank) pairs ``module`` stands in: its package layer, then its room."""
    return tuple(
        (name, rank) for name, rank in LAYERS if module == name or module.startswith(name + ".")
    )


def climbs(caller: str, callee: str) -> bool:
    """Whether a call from ``caller`` to ``callee`` goes up a layer of one contract."""
    for name, rank in layer_of(caller):
        container = name.rsplit(".", 1)[0] if name.count(".") > 1 else ""
        for other, other_rank in layer_of(callee):
            other_container = other.rsplit(".", 1)[0] if other.count(".") > 1 else ""
            if container == other_container and other_rank > rank:
                return True
    return False


def _module(filename: str) -> str | None:
    path = Path(filename)
    if not path.is_relative_to(PACKAGE):
        return None
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    module = ".".join(parts)
    return None if module.startswith("session_keeper.testing") else module


#: Generators, coroutines and async generators: entered again on each resumption.
_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


class Walk:
    """The files a flow entered, in order, and the calls that went up a layer."""

    def __init__(self) -> None:
        self.files: list[str] = []
        self.up: list[tuple[str, str, str]] = []
        self.recording = False
        self._lock = threading.Lock()

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.recording or event != "call":
            return
        callee = _module(frame.f_code.co_filename)
        if callee is None:
            return
        caller_frame = frame.f_back
        caller = _module(caller_frame.f_code.co_filename) if caller_frame else None
        if frame.f_code.co_flags & _RESUMABLE:
            caller = None  # a generator or coroutine runs for whoever resumes it: no call
        path = str(Path(frame.f_code.co_filename).relative_to(ROOT))
        with self._lock:
            if path not in self.files:
                self.files.append(path)
            if caller is not None and climbs(caller, callee):
                step = (caller, callee, frame.f_code.co_qualname)
                if step not in self.up:
                    self.up.append(step)

    @contextmanager
    def recorded(self) -> Iterator[None]:
        self.recording = True
        try:
            yield
        finally:
            self.recording = False

    def report(self, title: str) -> None:
        folders = sorted({str(Path(f).parent) for f in self.files})
        print(f"## {title}: {len(self.files)} files in {len(folders)} folders")
        for i, f in enumerate(self.files, 1):
            print(f"{i:3}. {f}")
        print("calls up a layer:", "none" if not self.up else "")
        for caller, callee, name in self.up:
            print(f"     {caller} -> {callee} ({name})")
        print()


async def restart_told(walk: Walk, tmp: Path) -> None:
    """(a) A crashed browser; the conversation's next ensure() is told, its rows saved."""
    from session_keeper import Durability, Grant, SessionKeeper
    from session_keeper.stores import SqliteStore
    from session_keeper.testing import FakeBackend

    backend = FakeBackend()
    store = SqliteStore(tmp / "a.db")
    durability = Durability(store=store)
    grants = [Grant("billing", "billing.example")]
    async with store, SessionKeeper(backend, grants=grants, durability=durability) as keeper:
        await keeper.ensure("billing", turn="t1")
        await keeper.unguarded_page("billing", "https://billing.example/login")
        await backend.sign_in("billing.example")
        await keeper.record_login("billing", "billing.example")
        await keeper.persist()
        await backend.crash()
        with walk.recorded():
            facts = await keeper.ensure("billing", turn="t2")
        assert facts.restarted and facts.lost, facts


async def refused_navigation(walk: Walk, tmp: Path) -> None:
    """(b) An MCP browser_navigate to another conversation's signed-in site, refused."""
    from mcp.client.client import Client

    from session_keeper import Grant, Guard, PlaywrightBackend, SessionKeeper, find_chromium
    from session_keeper.mcp import CONVERSATION_META, KeeperMCP
    from session_keeper.testing import LocalSites

    def meta(conversation: str) -> Any:
        return {CONVERSATION_META: conversation}

    with LocalSites() as sites:
        backend = PlaywrightBackend(
            tmp / "profile",
            executable_path=find_chromium(),
            host_resolver_rules=sites.host_resolver_rules,
        )
        keeper = SessionKeeper(backend, grants=[Grant("billing", "billing.example")])
        Guard(keeper)
        app = KeeperMCP(keeper)
        try:
            async with keeper, Client(app.server) as client:
                login = sites.url("billing.example", "/login")
                await client.call_tool("browser_navigate", {"url": login}, meta=meta("billing"))
                page = await keeper.unguarded_page("billing")
                await page.fill("input[name=username]", "alice")
                await page.fill("input[name=password]", "correct horse")
                await page.click("button[type=submit]")
                await page.wait_for_url("**/invoices**")
                await keeper.record_login("billing", "billing.example", account="alice")
                docs = sites.url("docs.example", "/")
                await client.call_tool("browser_navigate", {"url": docs}, meta=meta("research"))
                target = {"url": sites.url("billing.example", "/invoices")}
                with walk.recorded():
                    refused = await client.call_tool(
                        "browser_navigate", target, meta=meta("research")
                    )
                assert refused.is_error, refused
        finally:
            await backend.aclose()


async def job_commit(walk: Walk, tmp: Path) -> None:
    """(c) The job loop's commit of one checked page: its artifact stored, the page
    committed fenced with its checkpoint and event (the first page warms every path up;
    the second is walked)."""
    from session_keeper import Durability, Grant, SessionKeeper
    from session_keeper.jobs import Accepted, JobContract, JobLoop, StepContext
    from session_keeper.jobs._run import JobRun
    from session_keeper.stores import SqliteStore
    from session_keeper.testing import FakeBackend, FakePage, drain_keeper_writes

    site = "catalogue.example"

    def number(cursor: str | None) -> str:
        return (cursor or "page-1").removeprefix("page-")

    def target(cursor: str | None) -> str:
        return f"https://{site}/items?page={number(cursor)}"

    def identity(cursor: str | None) -> str:
        return f"catalogue page {number(cursor)}"

    async def step(ctx: StepContext[FakePage]) -> Accepted:
        n = number(ctx.cursor)
        records = [{"source_record_id": f"R{n}-{i}", "name": f"item {i}"} for i in range(3)]
        following = "page-2" if n == "1" else None
        return ctx.accept(records, following, page_identity=identity(ctx.cursor))

    backend = FakeBackend()
    store = SqliteStore(tmp / "c.db")
    grants = [Grant("job:audit", site, actions={"read"})]
    async with (
        store,
        SessionKeeper(backend, grants=grants, durability=Durability(store=store)) as keeper,
    ):
        await keeper.ensure("job:audit")
        await backend.sign_in(site)
        await keeper.record_login("job:audit", site, account="reader")
        loop = JobLoop(keeper, store, "w1", lease_ttl=timedelta(seconds=30))
        await loop.submit(
            JobContract(
                job_id="audit",
                site=site,
                allowed_origins=(f"https://{site}",),
                required_fields=("name",),
                start_cursor="page-1",
            )
        )
        commit = JobRun.commit
        pages: list[str] = []

        async def followed(self: JobRun[Any], job: Any, accepted: Accepted) -> Any:
            pages.append(job.checkpoint.next_cursor)
            if len(pages) != 2:
                return await commit(self, job, accepted)
            await drain_keeper_writes(keeper)  # the keeper's own save of the turn, done first
            with walk.recorded():
                return await commit(self, job, accepted)

        JobRun.commit = followed  # type: ignore[method-assign]
        try:
            await loop.run("audit", step, target=target, expect_identity=identity)
        finally:
            JobRun.commit = commit  # type: ignore[method-assign]
        assert pages == ["page-1", "page-2"], pages


FLOWS: dict[str, tuple[str, Callable[[Walk, Path], Any]]] = {
    "a": ("(a) a restart told by ensure()", restart_told),
    "b": ("(b) a guarded MCP browser_navigate, refused", refused_navigation),
    "c": ("(c) a job commit in the job loop", job_commit),
}


@asynccontextmanager
async def _tmp() -> AsyncIterator[Path]:
    with tempfile.TemporaryDirectory(prefix="flow-files-") as d:
        yield Path(d)


async def main(names: list[str]) -> None:
    for name in names:
        title, flow = FLOWS[name]
        walk = Walk()
        threading.setprofile(walk.hook)
        sys.setprofile(walk.hook)
        try:
            async with _tmp() as tmp:
                await flow(walk, tmp)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
        walk.report(title)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--flow", choices=sorted(FLOWS), action="append")
    asyncio.run(main(parser.parse_args().flow or sorted(FLOWS)))
