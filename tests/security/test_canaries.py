"""Canary cookies and passwords never reach a store file, a dump, a log, an event or an error."""

from __future__ import annotations

import logging
import os
import secrets
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from demos.guard_attacks import search_canaries
from session_keeper import Durability, Grant, LoginSettings, PlaywrightBackend, SessionKeeper
from session_keeper._security.vault import LoginVault
from session_keeper._util.redact import forget_secrets, remember_secrets, scrubbing_logger
from session_keeper.errors import SessionKeeperError, TransientFailure
from session_keeper.jobs import Accepted, JobContract, JobLoop, StepContext
from session_keeper.security import AuditLog, Keyring, verify_audit
from session_keeper.stores import PostgresStore, SqliteStore, Store
from session_keeper.testing import (
    FakeBackend,
    FakeClock,
    FakePage,
    LocalSites,
    TemporaryPostgres,
    job_loop_testing,
)
from session_keeper.testing._postgres import find_pg_bin


@pytest.fixture
def pg(pg_server: TemporaryPostgres) -> TemporaryPostgres:
    """The session's throwaway PostgreSQL (a database of its own is made per test)."""
    return pg_server


def read_files(directory: Path, pattern: str) -> bytes:
    """The bytes of every file matching ``pattern`` (a database and its WAL)."""
    return b"".join(p.read_bytes() for p in sorted(directory.glob(pattern)) if p.is_file())


def pg_dump(pg: TemporaryPostgres, database: str) -> bytes:
    """A plain-SQL dump of ``database``, as an operator would take a backup."""
    return subprocess.run(
        [
            str(find_pg_bin() / "pg_dump"),
            "-h",
            "127.0.0.1",
            "-p",
            str(pg.port),
            "-U",
            "postgres",
            "-d",
            database,
        ],
        capture_output=True,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PG")},
    ).stdout


async def exercise(store: Store, cookie: str, password: str) -> list[str]:
    """Sign in with a canary cookie, decide, audit, vault, crash, err; return error messages."""
    keyring = Keyring.generate()
    backend = FakeBackend()
    keeper = SessionKeeper(
        backend,
        clock=FakeClock(),
        durability=Durability(store=store),
        grants=[Grant("billing", "billing.example")],
        login_settings=LoginSettings(fingerprint_key=secrets.token_bytes(32)),
    )
    audit = AuditLog(store, keyring)
    vault = LoginVault(store, keyring, restore_sites=["billing.example"])
    errors: list[str] = []
    async with keeper:
        await keeper.ensure("billing")
        await backend.sign_in("billing.example", name="billing_session", value=cookie)
        record = await keeper.record_login("billing", "billing.example", account="alice")
        await audit.record(
            "login_recorded",
            {
                "site": record.site,
                "owner": record.owner,
                "cookies": [c.name for c in record.cookies],
            },
        )
        # A password only ever reaches the store sealed.
        await audit.record("credential_sealed", {"sealed": keyring.seal(password, purpose="pw")})
        assert backend.current is not None
        await vault.save(backend.current, "billing.example")
        decision = keeper.decide("research", "billing.example", "write")
        await audit.record("decision", {"outcome": decision.outcome, "reason": decision.reason})
        await backend.crash()
        turn = await keeper.ensure("billing")
        assert [str(x) for x in turn.lost_logins] == ["login:billing.example"]
        assert backend.current is not None
        await vault.restore(backend.current)
        for attempt in (
            lambda: keeper.record_login("billing", "todo.example"),
            lambda: vault.restore(backend.current, ["billing.example"]),
        ):
            try:
                await attempt()
            except SessionKeeperError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
        try:
            Keyring([("k1", bytes(32))]).open(keyring.seal(password, purpose="pw"), purpose="pw")
        except SessionKeeperError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        await keeper.persist()
    assert await verify_audit(store, keyring) == 3
    return errors


def all_logs(caplog: pytest.LogCaptureFixture) -> bytes:
    """Every captured record: message, arguments and extras."""
    return "\n".join(f"{r.getMessage()} {r.__dict__!r}" for r in caplog.records).encode()


async def test_sqlite_file_logs_events_and_errors_hold_no_canary(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The SQLite file (and WAL), every log record, event and error message: zero canary hits."""
    caplog.set_level(logging.DEBUG, logger="session_keeper")
    cookie, password = "canary-cookie-" + secrets.token_hex(6), "canary-pw-" + secrets.token_hex(6)
    db = tmp_path / "keeper.db"
    async with SqliteStore(str(db), clock=FakeClock()) as store:
        errors = await exercise(store, cookie, password)
        events = await store.events(limit=10_000)
    assert len(errors) == 2  # the scan below would be hollow without messages to scan
    places = {
        "sqlite": read_files(tmp_path, "keeper.db*"),
        "events": repr([e.to_dict() for e in events]).encode(),
        "logs": all_logs(caplog),
        "errors": "\n".join(errors).encode(),
    }
    assert search_canaries({"cookie": cookie, "password": password}, places) == []
    assert b"billing_session" in places["sqlite"]  # names are kept: the scan reads the data


@pytest.mark.postgres
async def test_postgres_dump_holds_no_canary(
    pg: TemporaryPostgres, caplog: pytest.LogCaptureFixture
) -> None:
    """pg_dump of the PostgreSQL store, its logs, events and errors: zero canary hits."""
    caplog.set_level(logging.DEBUG, logger="session_keeper")
    cookie, password = "canary-cookie-" + secrets.token_hex(6), "canary-pw-" + secrets.token_hex(6)
    dsn = pg.create_database("sk_canary")
    async with PostgresStore(dsn, clock=FakeClock()) as store:
        errors = await exercise(store, cookie, password)
        events = await store.events(limit=10_000)
    dump = pg_dump(pg, "sk_canary")
    assert b"billing_session" in dump and b"sk1." in dump  # the dump holds the data
    places = {
        "pg_dump": dump,
        "events": repr([e.to_dict() for e in events]).encode(),
        "logs": all_logs(caplog),
        "errors": "\n".join(errors).encode(),
    }
    assert search_canaries({"cookie": cookie, "password": password}, places) == []


def test_canary_search_finds_raw_hex_and_base64_forms() -> None:
    """The canary scan is not blind: it finds a value written raw, hex- or base64-encoded."""
    import base64

    value = "canary-" + secrets.token_hex(4)
    places = {
        "raw": f"xx{value}xx".encode(),
        "hex": value.encode().hex().encode(),
        "b64": base64.b64encode(value.encode()),
        "clean": b"nothing here",
    }
    assert search_canaries({"c": value}, places) == ["c in raw", "c in hex", "c in b64"]


def quoting_step(
    backend: FakeBackend, cookie: str, rotated: str
) -> Callable[[StepContext[FakePage]], Awaitable[Accepted]]:
    """A step whose failures quote cookie values, as pages and servers do.

    Attempt 1: a server echoing its Cookie header (transient, retried). Attempt 2: the
    site rotates its session cookie mid-step, and a script error quotes the new value
    URL-encoded. Attempt 3 onward: a page script error quoting ``document.cookie``
    (unclassified, so the job fails with it as the stop reason).
    """
    calls = 0

    async def step(ctx: StepContext[FakePage]) -> Accepted:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TransientFailure(
                f"502 from upstream; request had Cookie: billing_session={cookie}"
            )
        if calls == 2:
            await backend.sign_in("billing.example", name="billing_session", value=rotated)
            raise TransientFailure(f"token mismatch: got {quote(rotated, safe='')}")
        raise RuntimeError(
            f"Uncaught TypeError: cannot parse 'billing_session={rotated}; theme=dark'"
        )

    return step


async def test_a_cookie_value_quoted_in_a_step_error_never_reaches_store_events_reason_or_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Step errors quoting live cookies: no canary in the file, events, stop reason or logs."""
    caplog.set_level(logging.DEBUG, logger="session_keeper")
    cookie = "canary-cookie-" + secrets.token_hex(6)
    rotated = "canary/rotated=" + secrets.token_hex(6)  # needs URL-encoding
    clock, backend = FakeClock(), FakeBackend()
    db = tmp_path / "jobs.db"
    async with SqliteStore(db, clock=clock) as store:
        keeper = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            grants=[Grant("job:q", "billing.example")],
        )
        async with keeper:
            await keeper.ensure("job:q")
            await backend.sign_in("billing.example", name="billing_session", value=cookie)
            await keeper.record_login("job:q", "billing.example")

            async def no_wait(seconds: float) -> None:
                clock.advance(seconds)

            loop = JobLoop(keeper, store, "w1")
            job_loop_testing(loop, sleep=no_wait)
            await loop.submit(
                JobContract(job_id="q", site="billing.example", start_cursor="p1", max_attempts=10)
            )
            outcome = await loop.run(
                "q",
                quoting_step(backend, cookie, rotated),
                target=lambda c: "https://billing.example/invoices",
            )
        events = await store.events(limit=10_000)
        job = await store.load_job("q")
    assert outcome.state == "failed" and outcome.reason is not None
    failures = [e for e in events if e.kind == "step_failed"]
    # The scan below would be hollow without the errors it scans.
    assert len(failures) >= 3 and "[redacted]" in outcome.reason
    assert all("[redacted]" in str(e.data["error"]) for e in failures)
    places = {
        "sqlite": read_files(tmp_path, "jobs.db*"),
        "events": repr([e.to_dict() for e in events]).encode(),
        "stop_reason": f"{outcome.reason} {job.checkpoint.pause_reason}".encode(),
        "logs": all_logs(caplog),
    }
    canaries = {"cookie": cookie, "rotated": rotated, "rotated-encoded": quote(rotated, safe="")}
    assert search_canaries(canaries, places) == []


class _Owner:
    """Something that holds secrets (a keeper, in the library)."""


def test_log_records_quoting_a_live_cookie_are_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    """A session_keeper log record (message, args, extras, traceback) never shows a live cookie."""
    caplog.set_level(logging.DEBUG, logger="session_keeper")
    cookie = "canary-cookie-" + secrets.token_hex(6)
    owner = _Owner()
    remember_secrets(owner, [cookie])
    log = scrubbing_logger("session_keeper.jobs")
    try:
        raise RuntimeError(f"page said {cookie}")
    except RuntimeError:
        log.warning(
            "step failed: %s", f"Cookie: s={cookie}", extra={"detail": cookie}, exc_info=True
        )
    forget_secrets(owner)
    text = all_logs(caplog) + "\n".join(caplog.text.splitlines()).encode()
    assert b"[redacted]" in text and "page said" in caplog.text
    assert search_canaries({"cookie": cookie}, {"logs": text}) == []


@pytest.mark.chromium
async def test_a_chromium_page_error_quoting_document_cookie_is_stored_scrubbed(
    tmp_path: Path,
    sites: LocalSites,
    playwright_backend: Callable[..., PlaywrightBackend],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A real page's script error quoting document.cookie: no canary in store, events or logs."""
    caplog.set_level(logging.DEBUG, logger="session_keeper")
    cookie = "canary-csrf-" + secrets.token_hex(6)
    clock = FakeClock()
    db = tmp_path / "jobs.db"
    async with SqliteStore(db, clock=clock) as store:
        keeper = SessionKeeper(
            playwright_backend(), clock=clock, durability=Durability(store=store)
        )
        async with keeper:
            await keeper.ensure("job:page")
            page = await keeper.unguarded_page("job:page", sites.url("billing.example", "/login"))
            # The site's own script sets a readable cookie (a CSRF token, say).
            await page.evaluate(f"document.cookie = 'csrf_token={cookie}; path=/'")

            async def step(ctx: StepContext[Any]) -> Accepted:
                await ctx.page.evaluate(
                    "() => { throw new TypeError('cannot parse ' + document.cookie) }"
                )
                raise AssertionError("the page script was meant to throw")

            async def no_wait(seconds: float) -> None:
                clock.advance(seconds)

            loop = JobLoop(keeper, store, "w1")
            job_loop_testing(loop, sleep=no_wait)
            await loop.submit(JobContract(job_id="page", start_cursor="p1", max_attempts=10))
            outcome = await loop.run(
                "page", step, target=lambda c: sites.url("billing.example", "/login")
            )
        events = await store.events(limit=10_000)
    assert outcome.state == "failed" and outcome.reason is not None
    assert "cannot parse" in outcome.reason and "[redacted]" in outcome.reason
    places = {
        "sqlite": read_files(tmp_path, "jobs.db*"),
        "events": repr([e.to_dict() for e in events]).encode(),
        "stop_reason": outcome.reason.encode(),
        "logs": all_logs(caplog),
    }
    assert search_canaries({"cookie": cookie}, places) == []
