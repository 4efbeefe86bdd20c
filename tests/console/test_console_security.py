"""The console's doors: loopback binds, one-time links, CSRF, signed live links, canaries.

A real uvicorn server on loopback, a real SQLite store and an in-memory browser; each
test talks HTTP to it as a browser (or an attacker's page) would.
"""

from __future__ import annotations

import re
import socket
from datetime import timedelta
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import httpx
import pytest
from mcp.client.client import Client

from demos.guard_attacks import search_canaries
from session_keeper import SessionKeeper
from session_keeper.console import Console
from session_keeper.errors import InvalidArgument, SignedOut
from session_keeper.jobs import Accepted, JobContract, StepContext
from session_keeper.mcp import KeeperMCP
from session_keeper.security import verify_audit
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage

from ..mcp.conftest import call, structured, text
from ._world import COOKIE_VALUE, FINGERPRINT_KEY, KEY, World, sign_in


def test_a_non_loopback_bind_is_refused_without_the_explicit_flag(tmp_path: Path) -> None:
    """Binding 0.0.0.0 or a LAN address raises unless allow_remote=True is passed."""
    keeper = SessionKeeper(FakeBackend(), clock=FakeClock())
    for bind in ("0.0.0.0:8765", "192.168.1.5:8765", "example.com:80", "[::]:8765"):
        with pytest.raises(InvalidArgument, match="loopback"):
            Console(keeper, bind=bind)
    assert Console(keeper, bind="0.0.0.0:0", allow_remote=True).host == "0.0.0.0"
    for bind in ("127.0.0.1:0", "localhost:0", "[::1]:0"):
        Console(keeper, bind=bind)
    with pytest.raises(InvalidArgument):
        Console(keeper, bind="127.0.0.1")


async def test_every_page_refuses_a_request_without_a_session(world: World) -> None:
    """No cookie, no bearer token: every page and the API answer 401 and show no data."""
    for path in ("/", "/browsers", "/conversations", "/logins", "/borrows", "/jobs", "/events"):
        r = await world.client.get(path)
        assert r.status_code == 401, path
        assert "billing.example" not in r.text
    r = await world.client.get("/api/state")
    assert r.status_code == 401
    r = await world.client.get("/api/state", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
    r = await world.client.get(
        "/api/state", headers={"Authorization": f"Bearer {world.console.auth.token}"}
    )
    assert r.status_code == 200
    assert r.json()["logins"][0]["site"] == "billing.example"


async def test_a_one_time_link_signs_in_once(world: World) -> None:
    """The link sets an HttpOnly SameSite=Strict cookie; opened again it is refused."""
    link = world.console.login_link("dana").removeprefix(world.console.url)
    first = await world.client.get(link)
    assert first.status_code == 303
    cookie = first.headers["set-cookie"]
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
    assert (await world.client.get("/jobs")).status_code == 200
    async with httpx.AsyncClient(base_url=world.console.url) as other:
        again = await other.get(link)
        assert again.status_code == 403
        assert (await other.get("/jobs")).status_code == 401


async def test_two_consoles_on_one_host_keep_one_persons_sessions_apart(world: World) -> None:
    """Two consoles on 127.0.0.1 (two ports), one browser signing in to both: cookies
    ignore ports, yet each console keeps its own session and neither signs the other out."""
    second = Console(world.keeper, bind="127.0.0.1:0", user="ops")
    async with second, httpx.AsyncClient() as browser:
        for console in (world.console, second):
            assert (await browser.get(console.login_link("dana"))).status_code == 303
        for console in (world.console, second):
            assert (await browser.get(f"{console.url}/jobs")).status_code == 200
        # Signing out of one leaves the other signed in.
        page = await browser.get(f"{second.url}/borrows")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf is not None
        out = await browser.post(f"{second.url}/logout", data={"csrf": csrf.group(1)})
        assert out.status_code == 303
        assert (await browser.get(f"{second.url}/jobs")).status_code == 401
        assert (await browser.get(f"{world.console.url}/jobs")).status_code == 200


async def test_a_post_without_the_csrf_token_changes_nothing(world: World) -> None:
    """Missing or wrong CSRF token: 403 and the borrow request is still pending."""
    csrf = await sign_in(world)
    req = world.keeper.request_borrow("research", "billing.example", "write", reason="refund")
    path = f"/borrows/{req.id}/answer"
    form = {"decision": "approve", "uses": "1", "expires_minutes": "5"}
    assert (await world.client.post(path, data=form)).status_code == 403
    assert (await world.client.post(path, data={**form, "csrf": "x" * 43})).status_code == 403
    assert [r.id for r in world.keeper.borrow_requests()] == [req.id]
    assert not world.keeper.holds_grant("research", "billing.example", "write")
    ok = await world.client.post(path, data={**form, "csrf": csrf})
    assert ok.status_code == 303
    assert world.keeper.borrow_requests() == ()


async def test_a_cross_origin_post_is_refused_even_with_the_token(world: World) -> None:
    """A form posted from another origin (Origin header) is refused before it acts."""
    csrf = await sign_in(world)
    req = world.keeper.request_borrow("research", "billing.example", "write")
    r = await world.client.post(
        f"/borrows/{req.id}/answer",
        data={"decision": "approve", "csrf": csrf},
        headers={"Origin": "http://evil.example"},
    )
    assert r.status_code == 403
    assert [r.id for r in world.keeper.borrow_requests()] == [req.id]


async def test_a_foreign_host_name_is_refused(world: World) -> None:
    """DNS rebinding: a request whose Host is not a loopback name gets 421, even signed in."""
    await sign_in(world)
    r = await world.client.get("/jobs", headers={"Host": "evil.example"})
    assert r.status_code == 421
    assert "billing" not in r.text


async def test_approval_uses_the_persons_choices_and_names_them_in_the_audit_chain(
    world: World,
) -> None:
    """Uses and expiry come from the form; the grant and the audit entry name the approver."""
    csrf = await sign_in(world, "dana")
    req = world.keeper.request_borrow("research", "billing.example", "write")
    r = await world.client.post(
        f"/borrows/{req.id}/answer",
        data={"decision": "approve", "uses": "3", "expires_minutes": "20", "csrf": csrf},
    )
    assert r.status_code == 303
    grant = next(g for g in world.keeper.grants() if g.conversation == "research")
    assert grant.uses == 3 and grant.approved_by == "dana"
    assert grant.expires_at == world.keeper.clock.now() + timedelta(minutes=20)
    await world.keeper.persist()
    await verify_audit(world.store, world.keyring, expected_head=world.audit.head)
    entries = [e.data for e in await world.store.events(kind="audit")]
    approved = [e for e in entries if e["type"] == "borrow_approved"]
    assert approved and approved[-1]["body"]["approved_by"] == "dana"  # type: ignore[index]


async def test_bad_approval_input_is_refused_and_changes_nothing(world: World) -> None:
    """Zero uses, a negative expiry or a non-number: 400, the request stays pending."""
    csrf = await sign_in(world)
    req = world.keeper.request_borrow("research", "billing.example", "write")
    for uses, minutes in (("0", "5"), ("1", "-5"), ("many", "5")):
        r = await world.client.post(
            f"/borrows/{req.id}/answer",
            data={"decision": "approve", "uses": uses, "expires_minutes": minutes, "csrf": csrf},
        )
        assert r.status_code == 400, (uses, minutes)
    assert [r.id for r in world.keeper.borrow_requests()] == [req.id]


async def test_the_live_view_opens_only_from_a_link_signed_for_its_conversation(
    world: World,
) -> None:
    """Another conversation's signature, a changed expiry or an expired link: 403."""
    await sign_in(world)
    good = world.console.live_path("billing")
    assert (await world.client.get(good)).status_code == 200
    other = world.console.live_path("research")
    query = urlsplit(other).query
    assert (await world.client.get(f"/live/billing?{query}")).status_code == 403
    exp = re.search(r"exp=(\d+)", good)
    assert exp is not None
    tampered = good.replace(f"exp={exp.group(1)}", f"exp={int(exp.group(1)) + 3600}")
    assert (await world.client.get(tampered)).status_code == 403
    expired = world.console.live_path("billing", expires_in=timedelta(seconds=-1))
    assert (await world.client.get(expired)).status_code == 403
    assert (await world.client.get("/live/billing")).status_code == 403


async def test_a_takeover_is_written_to_the_audit_chain_with_the_person(world: World) -> None:
    """begin_takeover/end_takeover(by=...) append takeover_begun/_ended naming the person."""
    world.keeper.begin_takeover("billing", expires_in=timedelta(minutes=5), by="dana")
    assert "billing" in world.keeper.takeovers()
    world.keeper.end_takeover("billing", by="dana")
    await world.keeper.persist()
    await verify_audit(world.store, world.keyring, expected_head=world.audit.head)
    kinds = [(e.data["type"], e.data["body"]) for e in await world.store.events(kind="audit")]
    begun = [b for t, b in kinds if t == "takeover_begun"]
    ended = [b for t, b in kinds if t == "takeover_ended"]
    assert begun and begun[-1]["by"] == "dana" and begun[-1]["conversation"] == "billing"  # type: ignore[index]
    assert ended and ended[-1]["by"] == "dana"  # type: ignore[index]


async def test_no_page_or_api_response_shows_a_cookie_value_or_a_key(world: World) -> None:
    """Canary: the login cookie's value, the keyring key and the fingerprint key appear in
    no page, no API response and no refusal (raw, hex or base64)."""
    csrf = await sign_in(world)
    await world.store.submit_job(
        JobContract(job_id="j1", site="billing.example", extra={"conversation": "billing"})
    )
    req = world.keeper.request_borrow("research", "billing.example", "write", reason="refund")
    places: dict[str, bytes] = {}
    paths = [
        "/",
        "/browsers",
        "/conversations",
        "/logins",
        "/borrows",
        "/jobs",
        "/events",
        "/api/state",
        world.console.live_path("billing"),
        "/static/live.js",
        "/static/console.css",
        "/nope",
    ]
    for path in paths:
        r = await world.client.get(path)
        places[path] = r.content + repr(dict(r.headers)).encode()
    r = await world.client.post(
        f"/borrows/{req.id}/answer", data={"decision": "approve", "uses": "1", "csrf": csrf}
    )
    places["answer"] = r.content + repr(dict(r.headers)).encode()
    page = await world.client.get("/borrows")
    places["after"] = page.content
    assert "billing.example" in page.text  # the pages did show the login's rows
    assert "session fp:" in (await world.client.get("/logins")).text
    canaries = {
        "cookie value": COOKIE_VALUE,
        "keyring key": KEY.hex(),
        "fingerprint key": FINGERPRINT_KEY.hex(),
    }
    assert search_canaries(canaries, places) == []
    assert not any(KEY in data or FINGERPRINT_KEY in data for data in places.values())
    # URLs are shown without their query string (a token can ride in one).
    assert "next=" not in (await world.client.get("/conversations")).text


async def test_done_without_a_new_sign_in_records_nothing_and_says_why(world: World) -> None:
    """'I'm done' before the person signed in: no login recorded, the reason is shown."""
    csrf = await sign_in(world)
    await world.keeper.ensure("research")
    await world.keeper.tab("research", "https://docs.example/")
    live = world.console.live_path("research")
    exp = re.search(r"exp=(\d+)", live)
    sig = re.search(r"sig=([0-9a-f]+)", live)
    assert exp is not None and sig is not None
    before = world.keeper.logins()
    r = await world.client.post(
        "/live/research/done",
        data={"csrf": csrf, "exp": exp.group(1), "sig": sig.group(1), "site": "docs.example"},
    )
    assert r.status_code == 303 and r.headers["location"].startswith("/live/research?")
    page = await world.client.get(r.headers["location"])
    assert "not recorded" in page.text
    assert world.keeper.logins() == before
    # Another conversation's signature cannot record a login as research.
    other = world.console.live_path("billing")
    osig = re.search(r"sig=([0-9a-f]+)", other)
    assert osig is not None
    r = await world.client.post(
        "/live/research/done",
        data={"csrf": csrf, "exp": exp.group(1), "sig": osig.group(1), "site": "docs.example"},
    )
    assert r.status_code == 403


async def test_a_person_signs_in_on_a_sign_in_page_and_done_moves_the_tab_there(
    world: World,
) -> None:
    """A hand-off link asking for an address opens a sign-in page of the conversation
    there, none of its pages (its tab stays where it was); Done records the login, closes
    the sign-in page, moves the tab to the page the sign-in ended on, and the view after
    it opens no new sign-in page."""
    keeper = world.keeper
    await keeper.ensure("research")
    await keeper.tab("research", "https://docs.example/")
    link = world.console.sign_in_link("research", url="https://docs.example/login")
    async with httpx.AsyncClient(base_url=world.console.url, follow_redirects=True) as person:
        live = await person.get(link.removeprefix(world.console.url))
        assert live.status_code == 200
        (page,) = keeper.unguarded_sign_in_pages("research")
        assert page.url == "https://docs.example/login"
        assert keeper.unguarded_popups("research") == ()
        assert keeper.current_url("research") == "https://docs.example/"
        page.moved_to("https://docs.example/home")  # the person signed in there
        await world.backend.sign_in("docs.example")
        form = dict(re.findall(r'name="(csrf|exp|sig)" value="([^"]+)"', live.text))
        done = await person.post(
            "/live/research/done", data={**form, "site": "docs.example", "account": "dana"}
        )
        assert done.status_code == 200 and "login to docs.example recorded" in done.text
        assert 'id="signed-in"' in done.text and 'id="screen"' not in done.text
    assert [r.site for r in keeper.logins() if r.owner == "research"] == ["docs.example"]
    assert keeper.unguarded_sign_in_pages("research") == ()
    assert keeper.current_url("research") == "https://docs.example/home"


def test_a_sign_in_link_opens_only_a_web_address(world: World) -> None:
    """A sign-in link asking for a page off the web is refused, and nothing is remembered."""
    for url in ("javascript:alert(1)", "file:///etc/passwd", "chrome://settings"):
        with pytest.raises(InvalidArgument, match="http or https"):
            world.console.sign_in_link("research", url=url)


async def _paused_job(world: World) -> str:
    """A job acting as billing that paused because the site showed its sign-in page."""
    await world.store.submit_job(
        JobContract(job_id="j-pause", site="billing.example", extra={"conversation": "billing"})
    )

    async def step(ctx: StepContext[FakePage]) -> Accepted:
        raise SignedOut("the billing sign-in page is shown")

    out = await world.loop.run("j-pause", step)
    assert out.state == "awaiting_human"
    return "j-pause"


async def test_resume_from_the_console_waits_for_a_new_login_and_names_the_person(
    world: World,
) -> None:
    """The resume button refuses while no login was recorded since the pause (job stays
    paused); after a sign-in it moves the job to ready, decided_by the console user."""
    csrf = await sign_in(world, "dana")
    job_id = await _paused_job(world)
    jobs = await world.client.get("/jobs")
    assert f'id="job-{job_id}"' in jobs.text and "open live view" in jobs.text
    r = await world.client.post(f"/jobs/{job_id}/resume", data={"csrf": csrf, "action": "resume"})
    assert r.status_code == 400
    assert (await world.store.load_job(job_id)).checkpoint.state == "awaiting_human"
    await world.backend.sign_in("billing.example")
    await world.keeper.record_login("billing", "billing.example")
    r = await world.client.post(f"/jobs/{job_id}/resume", data={"csrf": csrf, "action": "resume"})
    assert r.status_code == 303
    assert (await world.store.load_job(job_id)).checkpoint.state == "ready"
    resumed = await world.store.events(job_id=job_id, kind="human_resumed")
    assert resumed[-1].data["decided_by"] == "dana"


async def test_a_store_only_console_shows_other_keepers_read_only(world: World) -> None:
    """Console(store=...) without a keeper lists what keepers saved, offers no approve,
    resume or live view, and refuses an approval POST."""
    await world.keeper.persist()
    req = world.keeper.request_borrow("research", "billing.example", "write")
    await world.keeper.persist()
    console = Console(store=world.store, bind="127.0.0.1:0", user="viewer")
    async with console, httpx.AsyncClient(base_url=console.url) as client:
        r = await client.get(console.login_link().removeprefix(console.url))
        assert r.status_code == 303
        logins = await client.get("/logins")
        assert "billing.example" in logins.text and "(sealed)" in logins.text
        assert "another process (store)" in (await client.get("/browsers")).text
        borrows = await client.get("/borrows")
        assert req.id in borrows.text and 'value="approve"' not in borrows.text
        csrf = re.search(r'name="csrf" value="([^"]+)"', borrows.text)
        assert csrf is not None
        r = await client.post(
            f"/borrows/{req.id}/answer", data={"decision": "approve", "csrf": csrf.group(1)}
        )
        assert r.status_code == 409
    assert [b.id for b in world.keeper.borrow_requests()] == [req.id]


async def test_a_taken_address_raises_oserror_instead_of_exiting_the_application(
    tmp_path: Path,
) -> None:
    """Starting on a port in use raises OSError to the caller (uvicorn would sys.exit)."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        async with SqliteStore(tmp_path / "s.db") as store:
            console = Console(store=store, bind=f"127.0.0.1:{taken.getsockname()[1]}")
            with pytest.raises(OSError, match="in use"):
                await console.start()
            await console.stop()
    finally:
        taken.close()


async def test_a_sign_in_link_opens_only_its_conversations_live_view(world: World) -> None:
    """A hand-off link lands on the conversation's live view, once; its session is refused
    every other page (approvals, jobs, the API, another conversation's live view), so a
    link passed through an agent grants nothing but that tab."""
    link = world.console.sign_in_link("research", user="dana").removeprefix(world.console.url)
    async with httpx.AsyncClient(base_url=world.console.url) as person:
        landed = await person.get(link)
        assert landed.status_code == 303
        live = landed.headers["location"]
        assert live.startswith("/live/research?")
        assert (await person.get(live)).status_code == 200
        for path in ("/", "/jobs", "/borrows", "/logins", "/events", "/api/state"):
            assert (await person.get(path)).status_code == 403, path
        assert (await person.get(world.console.live_path("billing"))).status_code == 403
        answer = await person.post("/borrows/x/answer", data={"approve": "1"})
        assert answer.status_code == 403
    async with httpx.AsyncClient(base_url=world.console.url) as again:
        assert (await again.get(link)).status_code == 403  # spent


async def test_the_models_record_login_never_closes_a_consoles_sign_in_page(world: World) -> None:
    """A headed server with a console (``window_sign_in`` and ``sign_in`` both given): the
    console owns the sign-in pages, so the model's browser_record_login records the login
    and leaves the person's page open for the console's Done."""
    keeper = cast("SessionKeeper[Any]", world.keeper)  # the fake's pages serve these tools
    server = KeeperMCP(keeper, sign_in=world.console, window_sign_in=True).server
    await world.keeper.sign_in_tab("billing", "http://billing.example/login")
    await world.backend.sign_in("billing.example")
    async with Client(server) as client:
        recorded = await call(
            client, "browser_record_login", {"site": "billing.example"}, conversation="billing"
        )
    assert not recorded.is_error, text(recorded)
    assert "tab_moved" not in structured(recorded)
    assert len(world.keeper.unguarded_sign_in_pages("billing")) == 1
