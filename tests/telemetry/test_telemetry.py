"""OpenTelemetry spans, metrics and structured log fields on the fake world (FakeBackend,
FakeClock, a real SqliteStore), and the library without a provider or without the API."""

from __future__ import annotations

import json
import logging
import secrets
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from session_keeper import Durability, Grant, IdleTimeouts, SessionKeeper, Telemetry
from session_keeper._telemetry import instruments_for
from session_keeper._util.redact import forget_secrets, remember_secrets
from session_keeper.errors import InvalidArgumentType, TransientFailure
from session_keeper.integrations.sync import SyncKeeper
from session_keeper.jobs import JobLoop
from session_keeper.pool import KeeperPool
from session_keeper.stores import SqliteStore
from session_keeper.testing import (
    FakeBackend,
    FakeClock,
    FakePage,
    TemporaryPostgres,
    job_loop_testing,
)

from ..jobs.conftest import SITE, FakeCatalogue, contract, identity, target
from .conftest import Otel, attributes

REPO = Path(__file__).resolve().parents[2]


def keeper_with(
    backend: FakeBackend, telemetry: Telemetry | None, **kw: object
) -> SessionKeeper[FakePage]:
    """A keeper on ``backend`` where billing owns billing.example, reporting to ``telemetry``."""
    return SessionKeeper(
        backend,
        clock=FakeClock(),
        grants=[Grant("billing", "billing.example")],
        telemetry=telemetry,
        **kw,  # type: ignore[arg-type]
    )


@asynccontextmanager
async def job_keeper(
    backend: FakeBackend,
    store: SqliteStore,
    clock: FakeClock,
    telemetry: Telemetry | None,
    *,
    cookie: str = "v",
) -> AsyncIterator[SessionKeeper[FakePage]]:
    """An open keeper where ``job:audit`` reads SITE, signed in there (its login recorded)."""
    keeper = SessionKeeper(
        backend,
        clock=clock,
        durability=Durability(store=store),
        grants=[Grant("job:audit", SITE, actions={"read"})],
        idle_timeouts=IdleTimeouts(browser=timedelta(hours=1)),
        telemetry=telemetry,
    )
    async with keeper:
        await keeper.ensure("job:audit")
        await backend.sign_in(SITE, name="catalogue_session", value=cookie)
        await keeper.record_login("job:audit", SITE, account="reader")
        yield keeper


async def test_a_restart_is_a_turn_span_naming_what_was_lost_and_is_counted(otel: Otel) -> None:
    """The turn after a crash: its ensure span says restarted, generation 2, the lost login
    (by site) and kinds; the restart and the loss are metric points; no canary anywhere."""
    cookie = "canary-cookie-" + secrets.token_hex(6)
    backend = FakeBackend()
    async with keeper_with(backend, otel.telemetry) as keeper:
        await keeper.ensure("billing")
        await backend.sign_in("billing.example", name="billing_session", value=cookie)
        await keeper.record_login("billing", "billing.example", account="alice")
        await backend.crash()
        facts = await keeper.ensure("billing")
    assert facts.restarted
    first, turn = otel.spans("session_keeper.ensure")
    assert attributes(first)["session_keeper.restarted"] is False
    assert attributes(turn)["session_keeper.conversation"] == "billing"
    assert attributes(turn)["session_keeper.restarted"] is True
    assert attributes(turn)["session_keeper.generation"] == 2
    assert attributes(turn)["session_keeper.previous_generation"] == 1
    assert attributes(turn)["session_keeper.lost.count"] == len(facts.lost)
    assert list(attributes(turn)["session_keeper.lost.kinds"]) == sorted(
        {x.kind for x in facts.lost}
    )
    assert list(attributes(turn)["session_keeper.lost.logins"]) == ["billing.example"]
    (login,) = otel.spans("session_keeper.record_login")
    assert attributes(login)["server.address"] == "billing.example"
    assert list(attributes(login)["session_keeper.login.cookies"]) == ["billing_session"]
    assert otel.points("session_keeper.browser.restarts") == [({}, 1)]
    losses = dict((tuple(sorted(a.items())), v) for a, v in otel.points("session_keeper.losses"))
    login_loss = (("session_keeper.loss.cause", "gone"), ("session_keeper.loss.kind", "login"))
    assert losses[login_loss] == 1
    assert otel.canaries(cookie=cookie) == []
    assert b"billing_session" in otel.dump()  # the scan reads real data: the cookie's name


async def test_the_callers_active_span_is_the_parent_of_the_keepers(otel: Otel) -> None:
    """A span the caller has active (a graph node, an MCP request) parents ensure and decide."""
    tracer = otel.tracer_provider.get_tracer("the-agent")
    async with keeper_with(FakeBackend(), otel.telemetry) as keeper:
        with tracer.start_as_current_span("agent.node") as node:
            await keeper.ensure("billing")
            keeper.decide("billing", "billing.example", "read")
    parent = node.get_span_context()
    for name in ("session_keeper.ensure", "session_keeper.decide"):
        (span,) = otel.spans(name)
        assert span.parent is not None, name
        assert (span.parent.trace_id, span.parent.span_id) == (parent.trace_id, parent.span_id)


async def test_a_quiet_turn_outside_a_trace_has_no_span_and_a_turn_with_news_does(
    otel: Otel,
) -> None:
    """On a live browser with no caller span, a turn with nothing to tell records no span
    (it would cost more than the turn); one that starts a browser does, and so does a
    first turn, timed from its start; in a caller's trace every turn has one."""
    backend = FakeBackend()
    tracer = otel.tracer_provider.get_tracer("the-agent")
    async with keeper_with(backend, otel.telemetry) as keeper:
        await keeper.ensure("billing")  # the first: browser started, first turn
        for _ in range(3):
            await keeper.ensure("billing")
        quiet = len(otel.spans("session_keeper.ensure"))
        await backend.crash()
        before = time.time_ns()
        await keeper.ensure("billing")
        await keeper.ensure("docs")  # a first turn on a live browser: news
        with tracer.start_as_current_span("agent.node"):
            await keeper.ensure("billing")
    assert quiet == 1
    _, relaunch, first, traced = otel.spans("session_keeper.ensure")
    assert attributes(relaunch)["session_keeper.generation"] == 2
    assert attributes(first)["session_keeper.first_turn"] is True
    assert first.start_time is not None and first.end_time is not None
    assert before <= first.start_time <= first.end_time
    assert attributes(traced)["session_keeper.restarted"] is False
    assert traced.parent is not None


async def test_without_a_provider_nothing_is_recorded_and_turns_work(otel: Otel) -> None:
    """No global provider: the instruments are off and a crash and restart work as ever;
    a provider given but disabled receives nothing."""
    assert not instruments_for(None).tracing and not instruments_for(None).metering
    off = Telemetry(
        tracer_provider=otel.telemetry.tracer_provider,
        meter_provider=otel.telemetry.meter_provider,
        enabled=False,
    )
    for telemetry in (None, off):
        backend = FakeBackend()
        async with keeper_with(backend, telemetry) as keeper:
            await keeper.ensure("billing")
            await backend.crash()
            assert (await keeper.ensure("billing")).generation == 2
    assert otel.spans() == []
    assert otel.points("session_keeper.browser.restarts") == []


def test_telemetry_must_be_a_telemetry() -> None:
    """A keeper given anything but a Telemetry refuses it before anything is built."""
    with pytest.raises(InvalidArgumentType):
        SessionKeeper(FakeBackend(), telemetry="otlp")  # type: ignore[arg-type]


def run_python(code: str) -> str:
    """Run ``code`` in a fresh interpreter from the repository; return its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_package_works_without_opentelemetry_installed() -> None:
    """With every ``opentelemetry`` import refused, session_keeper imports and a turn, a
    restart and a decision run; nothing of opentelemetry is loaded."""
    out = run_python(
        """
        import asyncio, sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ImportError("blocked: " + name)
                return None

        sys.meta_path.insert(0, Block())
        for name in [n for n in sys.modules if n.startswith("opentelemetry")]:
            del sys.modules[name]

        from session_keeper import Grant, SessionKeeper, Telemetry
        from session_keeper.testing import FakeBackend, FakeClock

        async def main():
            backend = FakeBackend()
            keeper = SessionKeeper(
                backend, clock=FakeClock(), grants=[Grant("a", "billing.example")],
                telemetry=Telemetry(),
            )
            async with keeper:
                await keeper.ensure("a")
                await backend.crash()
                facts = await keeper.ensure("a")
                keeper.decide("a", "billing.example")
            print("generation", facts.generation)

        asyncio.run(main())
        print("loaded", sorted(n for n in sys.modules if n.startswith("opentelemetry")))
        """
    )
    assert out.split("\n")[:2] == ["generation 2", "loaded []"]


def test_the_global_providers_get_turn_and_store_transaction_spans(tmp_path: Path) -> None:
    """With the SDK set as the global provider (as Logfire or auto-instrumentation do), a
    keeper without Telemetry reports there, and SqliteStore commits are client spans
    (``db.system.name`` sqlite) inside the turn that made them."""
    out = run_python(
        f"""
        import asyncio, json
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)

        from session_keeper import Durability, SessionKeeper
        from session_keeper.stores import SqliteStore
        from session_keeper.testing import FakeBackend, FakeClock

        async def main():
            async with SqliteStore({str(tmp_path / "k.db")!r}) as store:
                keeper = SessionKeeper(
                    FakeBackend(), clock=FakeClock(), durability=Durability(store=store)
                )
                async with keeper:
                    await keeper.ensure("a")

        asyncio.run(main())
        print(json.dumps([
            {{"name": s.name, "id": s.context.span_id,
              "parent": s.parent.span_id if s.parent else None,
              "kind": s.kind.name, "attributes": dict(s.attributes)}}
            for s in exporter.get_finished_spans()
        ]))
        """
    )
    spans = json.loads(out)
    (turn,) = [s for s in spans if s["name"] == "session_keeper.ensure"]
    stores = [s for s in spans if s["name"].startswith("session_keeper.store ")]
    assert stores and all(s["attributes"]["db.system.name"] == "sqlite" for s in stores)
    assert all(s["kind"] == "CLIENT" and s["attributes"]["db.operation.name"] for s in stores)
    inside = [s for s in stores if s["parent"] == turn["id"]]
    assert any(s["attributes"]["session_keeper.store.write"] for s in inside)


async def test_a_job_step_that_is_retried_is_two_step_spans_and_two_latency_points(
    otel: Otel, tmp_path: Path
) -> None:
    """A transient failure quoting the cookie, then success: the run span ends done; the
    step spans say attempt 0 retry (transient) and attempt 1 committed; the latency
    histogram has a point per outcome; no canary in any span, event or point."""
    cookie = "canary-cookie-" + secrets.token_hex(6)
    backend = FakeBackend()
    async with (
        SqliteStore(str(tmp_path / "jobs.db"), clock=FakeClock()) as store,
        job_keeper(backend, store, FakeClock(), otel.telemetry, cookie=cookie) as keeper,
    ):
        loop = JobLoop(keeper, store, "w1")  # the keeper's telemetry by default

        async def no_wait(seconds: float) -> None:
            del seconds

        job_loop_testing(loop, sleep=no_wait)
        await loop.submit(contract())
        failure = TransientFailure(f"502; request had Cookie: catalogue_session={cookie}")
        catalogue = FakeCatalogue(raise_next=[failure], pages=1)
        out = await loop.run("audit", catalogue.step, target=target, expect_identity=identity)
    assert out.state == "done"
    (run,) = otel.spans("session_keeper.job.run")
    assert attributes(run)["session_keeper.job.outcome"] == "done"
    assert attributes(run)["session_keeper.job.lease_owner"] == "w1"
    steps = otel.spans("session_keeper.job.step")
    seen = [
        {k: v for k, v in (s.attributes or {}).items() if k != "session_keeper.generation"}
        for s in steps
    ]
    assert seen == [
        {
            "session_keeper.job.id": "audit",
            "session_keeper.job.step": "page-1",
            "session_keeper.job.attempt": 0,
            "session_keeper.job.revision": seen[0]["session_keeper.job.revision"],
            "session_keeper.job.outcome": "retry",
            "session_keeper.job.failure_class": "transient",
        },
        {
            "session_keeper.job.id": "audit",
            "session_keeper.job.step": "page-1",
            "session_keeper.job.attempt": 1,
            "session_keeper.job.revision": seen[1]["session_keeper.job.revision"],
            "session_keeper.job.outcome": "committed",
        },
    ]
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in steps)
    outcomes = sorted(
        (a["session_keeper.job.outcome"], v[0])
        for a, v in otel.points("session_keeper.job.step.duration")
    )
    assert outcomes == [("committed", 1), ("retry", 1)]
    assert otel.canaries(cookie=cookie) == []
    assert b"catalogue_session" in otel.dump()  # the scan reads real data: the name


async def test_every_library_log_record_carries_its_structured_fields(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Records written during a turn carry the conversation; the restart's record its
    generations; a stored event's record its job, step, attempt and revision — under the
    span attributes' names (``session_keeper.*``)."""
    caplog.set_level(logging.INFO, logger="session_keeper")
    backend = FakeBackend()
    async with SqliteStore(str(tmp_path / "logs.db"), clock=FakeClock()) as store:
        keeper = SessionKeeper(
            backend,
            clock=FakeClock(),
            durability=Durability(store=store),
            grants=[Grant("job:audit", SITE, actions={"read"})],
        )
        async with keeper:
            await keeper.ensure("job:audit")
            await backend.sign_in(SITE)
            await keeper.record_login("job:audit", SITE, account="reader")
            loop = JobLoop(keeper, store, "w1")
            await loop.submit(contract())
            catalogue = FakeCatalogue(pages=1)
            await loop.run("audit", catalogue.step, target=target, expect_identity=identity)
            await backend.crash()
            await keeper.ensure("job:audit")
    records = [r for r in caplog.records if r.name.startswith("session_keeper")]
    fields = [
        {k: v for k, v in r.__dict__.items() if k.startswith("session_keeper.")} for r in records
    ]
    restarted = next(
        f for r, f in zip(records, fields, strict=True) if r.getMessage() == "browser restarted"
    )
    assert restarted["session_keeper.generation"] == 2
    assert restarted["session_keeper.previous_generation"] == 1
    assert restarted["session_keeper.conversation"] == "job:audit"  # the turn's, from context
    login = next(
        f for r, f in zip(records, fields, strict=True) if r.getMessage() == "login recorded"
    )
    assert login["session_keeper.site"] == SITE
    committed = next(f for f in fields if f.get("session_keeper.event") == "page_committed")
    assert committed["session_keeper.job.id"] == "audit"
    assert committed["session_keeper.job.step"] == "page-1"
    assert committed["session_keeper.job.attempt"] == 0
    assert committed["session_keeper.job.revision"] >= 1
    assert committed["session_keeper.job.lease_owner"] == "w1"


def test_an_exception_reaches_a_span_as_its_type_and_redacted_text_only(otel: Otel) -> None:
    """A failure quoting a live cookie value and a URL's token: the span keeps
    ``error.type`` and the redacted text; no exception event carries the raw message."""
    cookie, token = "canary-cookie-" + secrets.token_hex(6), "canary-token-" + secrets.token_hex(6)
    owner = Otel  # any weakly referenced object may own secrets
    remember_secrets(owner, [cookie])
    try:
        with pytest.raises(RuntimeError), instruments_for(otel.telemetry).span("session_keeper.x"):
            raise RuntimeError(f"echo sid={cookie} from https://a.example/cb?code={token}")
    finally:
        forget_secrets(owner)
    (span,) = otel.spans("session_keeper.x")
    assert attributes(span)["error.type"] == "RuntimeError"
    assert span.status.description is not None and "[redacted]" in span.status.description
    assert "https://a.example/cb" in span.status.description
    assert otel.canaries(cookie=cookie, token=token) == []


@pytest.mark.postgres
def test_postgres_transactions_are_client_spans_named_postgresql(
    pg_server: TemporaryPostgres,
) -> None:
    """PostgresStore's operations are client spans with ``db.system.name`` postgresql."""
    dsn = pg_server.create_database("sk_otel")
    out = run_python(
        f"""
        import asyncio, json
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)

        from session_keeper.jobs import JobContract
        from session_keeper.stores import PostgresStore

        async def main():
            async with PostgresStore({dsn!r}) as store:
                await store.submit_job(JobContract(job_id="j", start_cursor="a"))

        asyncio.run(main())
        print(json.dumps([dict(s.attributes) for s in exporter.get_finished_spans()]))
        """
    )
    spans = json.loads(out)
    (submitted,) = [s for s in spans if s.get("db.operation.name") == "submit_job"]
    assert submitted["db.system.name"] == "postgresql"
    assert submitted["session_keeper.store.write"] is True


async def test_a_human_pause_records_its_age_when_a_person_resumes_it(
    otel: Otel, tmp_path: Path
) -> None:
    """A crash takes the job's login (a pause); five minutes later a person signs in and
    resumes: the human-pause-age histogram has one point of 300 s, and the step that
    paused says so as its outcome."""
    clock = FakeClock()
    backend = FakeBackend()
    async with (
        SqliteStore(str(tmp_path / "pause.db"), clock=clock) as store,
        job_keeper(backend, store, clock, otel.telemetry) as keeper,
    ):
        loop = JobLoop(keeper, store, "w1")
        catalogue = FakeCatalogue(pages=2)

        async def crash_after_first() -> None:
            if catalogue.calls == 1:
                await backend.crash()

        job_loop_testing(loop, fault_hooks={"after_commit": crash_after_first})
        await loop.submit(contract())
        out = await loop.run("audit", catalogue.step, target=target, expect_identity=identity)
        assert out.state == "awaiting_human"
        clock.advance(timedelta(minutes=5))
        await keeper.ensure("job:audit")
        await backend.sign_in(SITE)
        await keeper.record_login("job:audit", SITE, account="reader")
        assert (await loop.resume("audit", decided_by="ann")).state == "ready"
    assert otel.points("session_keeper.job.human_pause.age") == [({}, (1, 300.0))]
    outcomes = [
        attributes(s)["session_keeper.job.outcome"] for s in otel.spans("session_keeper.job.step")
    ]
    assert outcomes == ["committed", "awaiting_human"]


async def test_a_job_lease_lost_mid_step_is_counted_as_a_job_lease_loss(
    otel: Otel, tmp_path: Path
) -> None:
    """A step stalls past its lease and another worker claims (and lets go of) the job:
    the run takes the lease back and finishes, and ``session_keeper.lease_losses`` has
    one point of kind ``job``."""
    clock = FakeClock()
    backend = FakeBackend()
    async with (
        SqliteStore(str(tmp_path / "jobs.db"), clock=clock) as store,
        job_keeper(backend, store, clock, otel.telemetry) as keeper,
    ):
        loop = JobLoop(keeper, store, "w1", lease_ttl=timedelta(seconds=30))
        await loop.submit(contract())
        catalogue = FakeCatalogue(pages=2)
        stalled: list[bool] = []

        async def stalling(ctx: Any) -> Any:
            if not stalled:
                stalled.append(True)
                clock.advance(timedelta(seconds=31))  # past the 30 s lease: w2 takes it
                await store.release(await store.claim("audit", "w2", timedelta(seconds=30)))
            return await catalogue.step(ctx)

        out = await loop.run("audit", stalling, target=target, expect_identity=identity)
    assert out.lease_lost and out.state == "done"
    assert otel.points("session_keeper.lease_losses") == [({"session_keeper.lease.kind": "job"}, 1)]


async def test_a_pool_fenced_after_losing_its_profile_lease_counts_a_profile_lease_loss(
    otel: Otel, tmp_path: Path
) -> None:
    """Pool A stalls past its profile lease and pool B takes the profile: A's next renewal
    fences it, and ``session_keeper.lease_losses`` has one point of kind ``profile``."""
    clock = FakeClock()
    ttl = timedelta(seconds=30)
    async with SqliteStore(tmp_path / "pool.db", clock=clock) as store:
        a = KeeperPool(
            {"p0": FakeBackend(clock=clock)},
            store=store,
            owner="pool-a",
            lease_ttl=ttl,
            clock=clock,
            telemetry=otel.telemetry,
        )
        b = KeeperPool(
            {"p0": FakeBackend(clock=clock)},
            store=store,
            owner="pool-b",
            lease_ttl=ttl,
            clock=clock,
        )
        async with a:
            await a.ensure("a")
            clock.advance(ttl)
            async with b:
                await b.ensure("a")  # p0's lease expired: pool-b holds it now
                await a.renew()
            assert a.stats().fenced == 1
    assert otel.points("session_keeper.lease_losses") == [
        ({"session_keeper.lease.kind": "profile"}, 1)
    ]


def test_a_sync_callers_active_span_parents_the_keepers_spans(otel: Otel) -> None:
    """Through SyncKeeper (the keeper on a loop thread of its own), the calling thread's
    active span still parents every turn's span, a quiet turn's included."""
    tracer = otel.tracer_provider.get_tracer("the-agent")
    make = lambda: keeper_with(FakeBackend(), otel.telemetry)  # noqa: E731
    with SyncKeeper(make) as keeper, tracer.start_as_current_span("agent.node") as node:
        keeper.ensure("billing")
        keeper.ensure("billing")
    parent = node.get_span_context()
    turns = otel.spans("session_keeper.ensure")
    assert len(turns) == 2
    assert all(s.parent is not None and s.parent.span_id == parent.span_id for s in turns)


def test_a_global_provider_set_after_the_first_turns_is_heard_within_a_second() -> None:
    """No provider at the first turns (the keeper stops asking for a moment: asking costs
    a turn dearly); the application sets one; a turn after ``REASK_S`` is traced."""
    out = run_python(
        """
        import asyncio, time
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from session_keeper import SessionKeeper
        from session_keeper._telemetry.instruments import REASK_S
        from session_keeper.testing import FakeBackend, FakeClock

        async def main():
            backend = FakeBackend()
            async with SessionKeeper(backend, clock=FakeClock()) as keeper:
                await keeper.ensure("a")
                exporter = InMemorySpanExporter()
                provider = TracerProvider()
                provider.add_span_processor(SimpleSpanProcessor(exporter))
                trace.set_tracer_provider(provider)
                time.sleep(REASK_S + 0.1)
                await keeper.ensure("b")  # a first turn: news, so a span
            print("spans", [s.name for s in exporter.get_finished_spans()])

        asyncio.run(main())
        """
    )
    assert out.strip() == "spans ['session_keeper.ensure']"
