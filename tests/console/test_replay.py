"""A conversation's replay: masked DOM frames of its pages, shown inertly in the console."""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import websockets
from playwright.async_api import async_playwright

from session_keeper import (
    Durability,
    Grant,
    IdleTimeouts,
    PlaywrightBackend,
    Replay,
    SessionKeeper,
)
from session_keeper.console import Console
from session_keeper.errors import InvalidArgument, InvalidArgumentType, NavigationBlocked
from session_keeper.security import AuditLog, Keyring
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, LocalSites, SiteResponse

pytestmark = [pytest.mark.chromium, pytest.mark.timeout(180)]

TYPED = "canary-typed-7d1e4a"
PASSWORD = "canary-password-93b0c2"
NOTE = "canary-note-51aa0f"
BIO = "canary-bio-0c44e9"
COOKIE = "canary-cookie-2f8e61"
TOKEN = "canary-token-6a1d2b"
CANARIES = (TYPED, PASSWORD, NOTE, BIO, COOKIE, TOKEN)

FORM = f"""<!doctype html><html><head><title>Profile</title>
<link rel="stylesheet" href="/style.css"><script src="/app.js"></script></head>
<body><h1>Your profile</h1><p id="lead">Replay sees this paragraph.</p>
<img src="/pixel.png" alt="pixel"><a href="/next?token={TOKEN}">next page</a>
<form action="/save?token={TOKEN}" method="post">
<label>Name <input id="name" name="name" type="text"></label>
<label>Password <input id="password" name="password" type="password"></label>
<input type="hidden" name="csrf" value="{TOKEN}">
<textarea id="note"></textarea>
<select id="plan"><option value="free">Free</option><option value="pro" selected>Pro</option>
</select><label><input type="checkbox" id="agree" checked> I agree</label>
<div id="bio" contenteditable="true"></div>
<button id="done" type="button" onclick="document.getElementById('lead').textContent =
'Saved, thank you.'">Done</button>
</form></body></html>"""


# The page counts the copies made of its document (what a snapshot starts with).
COUNT_COPIES = """window.copies = 0;
const clone = Node.prototype.cloneNode;
Node.prototype.cloneNode = function (deep) {
  if (this === document.documentElement) window.copies += 1;
  return clone.call(this, deep);
};"""


def _forms(request: Any) -> SiteResponse:
    if request.path == "/":
        cookie = (("Set-Cookie", f"sid={COOKIE}; Path=/"),)
        return SiteResponse(status=200, headers=cookie, body=FORM)
    if request.path == "/style.css":
        return SiteResponse(
            status=200, headers=(("Content-Type", "text/css"),), body="h1 { color: rgb(1, 2, 3); }"
        )
    if request.path == "/app.js":
        return SiteResponse(
            status=200, headers=(("Content-Type", "text/javascript"),), body=COUNT_COPIES
        )
    return SiteResponse(status=404, headers=(), body="no such page")


@asynccontextmanager
async def _keeper(
    tmp_path: Path, sites: LocalSites, chromium: str, **replay: Any
) -> AsyncIterator[tuple[SessionKeeper[Any], SqliteStore, FakeClock]]:
    clock = FakeClock()
    keyring = Keyring({"k1": bytes(range(1, 33))})
    backend = PlaywrightBackend(
        tmp_path / "profile",
        executable_path=chromium,
        host_resolver_rules=sites.host_resolver_rules,
    )
    async with SqliteStore(tmp_path / "keeper.db") as store:
        keeper = SessionKeeper(
            backend,
            clock=clock,
            grants=[Grant("forms", "forms.example")],
            idle_timeouts=IdleTimeouts(browser=timedelta(days=30)),
            durability=Durability(
                store=store, keyring=keyring, audit=AuditLog(store, keyring, clock=clock)
            ),
            replay=Replay(directory=tmp_path / "replay", **replay) if replay else None,
        )
        try:
            async with keeper:
                yield keeper, store, clock
        finally:
            await backend.aclose()


def _stored_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


async def test_the_console_replays_a_conversation_with_every_typed_value_masked(
    tmp_path: Path, chromium_path: str, caplog: pytest.LogCaptureFixture, artifacts: Path
) -> None:
    """Typed text, a password, a textarea, a choice and a contenteditable are masked in the
    page: the console's replay, opened in Chromium, shows the page's text, no canary in the
    replayed DOM, the frame files, the store or the logs, and the frame makes no request."""
    caplog.set_level(logging.DEBUG, logger="session_keeper")
    with LocalSites(extra_sites={"forms.example": _forms}) as sites:
        async with _keeper(tmp_path, sites, chromium_path, max_frames=50) as (
            keeper,
            store,
            clock,
        ):
            await keeper.ensure("forms")
            tab = await keeper.tab("forms", sites.url("forms.example", "/"))
            clock.advance(1)
            keeper.decide("forms", "forms.example", "read")
            for act in (
                tab.fill("#name", TYPED),
                tab.type("#password", PASSWORD),
                tab.fill("#note", NOTE),
                tab.select("#plan", "free"),
                tab.locator("#bio").fill(BIO),
                tab.click("#done"),
            ):
                clock.advance(1)
                await act
            clock.advance(1)
            with pytest.raises(NavigationBlocked):
                await tab.goto("file:///etc/passwd")
            await keeper.persist()
            assert keeper.replay is not None
            frames = await keeper.replay.frames("forms")
            assert [f.act for f in frames] == ["goto", "fill", "type", "fill", "select", "fill",
                                               "click"]  # fmt: skip
            assert frames[0].url == "http://forms.example/" and frames[0].title == "Profile"
            last = frames[-1]

            async with Console(keeper, bind="127.0.0.1:0", user="ops") as console:
                sites.clear_requests()
                async with async_playwright() as pw:
                    browser = await pw.chromium.launch(
                        executable_path=chromium_path,
                        args=[f"--host-resolver-rules={sites.host_resolver_rules}"],
                    )
                    page = await browser.new_page()
                    requested: list[str] = []
                    page.on("request", lambda r: requested.append(r.url))
                    await page.goto(console.login_link("dana"))
                    await page.goto(f"{console.url}/replay/forms")
                    await page.screenshot(path=artifacts / "replay.png", full_page=True)
                    timeline = await page.locator("#timeline").inner_text()
                    assert "frame: click" in timeline
                    assert "audit: decision" in timeline  # the grant that admitted it
                    assert "refused by the Guard" in timeline  # the refused navigation
                    assert timeline.index("audit: decision") < timeline.index("frame: fill")
                    assert timeline.index("frame: click") < timeline.index("refused by")
                    requested.clear()
                    await page.click(f"a[href='/replay/forms/frames/{last.seq}']")
                    await page.wait_for_load_state("load")
                    replayed = page.frame_locator("#replayed")
                    text = await replayed.locator("body").inner_text()
                    assert "Your profile" in text and "Saved, thank you." in text
                    assert await page.get_attribute("#replayed", "sandbox") == ""
                    await page.screenshot(path=artifacts / "replay-frame.png", full_page=True)
                    # A recorded link is shown, not followed (it would leave for the site).
                    link = replayed.locator("a", has_text="next page")
                    assert await link.evaluate("a => getComputedStyle(a).pointerEvents") == "none"
                    dom = await page.request.get(
                        f"{console.url}/replay/forms/frames/{last.seq}/dom"
                    )
                    csp = dom.headers["content-security-policy"]
                    assert "default-src 'none'" in csp and "sandbox" in csp
                    body = await dom.text()
                    assert "Your profile" in body and "\u2022" in body
                    assert "<script" not in body and "onclick" not in body
                    assert " selected" not in body and " checked" not in body
                    # The stylesheet came inlined from the page, not from the site.
                    assert "rgb(1, 2, 3)" in body
                    for url in requested:
                        assert urlsplit(url).netloc == urlsplit(console.url).netloc, url
                    await browser.close()
                assert sites.requests("forms.example") == []
            stored = _stored_bytes(tmp_path / "replay")
            events = json.dumps([e.to_dict() for e in await store.events(limit=10_000)],
                                default=str)  # fmt: skip
            logs = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records)
            for canary in CANARIES:
                assert canary not in body, canary
                assert canary.encode() not in stored, canary
                assert canary not in events, canary
                assert canary not in logs, canary


async def test_a_conversation_keeps_at_most_max_frames_and_none_older_than_max_age(
    tmp_path: Path, chromium_path: str
) -> None:
    """The oldest frames go past ``max_frames``; after ``max_age`` on the keeper's clock a
    conversation's frames are gone (its next act, and the sweep for one that is idle)."""
    with LocalSites(extra_sites={"forms.example": _forms}) as sites:
        async with _keeper(tmp_path, sites, chromium_path, max_frames=3,
                           max_age=timedelta(hours=1)) as (keeper, _, clock):  # fmt: skip
            await keeper.ensure("forms")
            tab = await keeper.tab("forms", sites.url("forms.example", "/"))
            for i in range(4):
                await tab.fill("#name", f"x{i}")
            recorder = keeper.replay
            assert recorder is not None
            assert [f.seq for f in await recorder.frames("forms")] == [3, 4, 5]
            assert len(list((tmp_path / "replay").rglob("*.html"))) == 3
            clock.advance(timedelta(minutes=61))
            await tab.click("#done")
            assert [f.seq for f in await recorder.frames("forms")] == [6]
            await keeper.ensure("other")
            other = await keeper.tab("other", sites.url("forms.example", "/"))
            await other.click("#done")
            clock.advance(timedelta(minutes=61))
            await keeper.sweep()
            assert list((tmp_path / "replay").rglob("*.html")) == []


async def test_a_person_s_live_view_input_is_recorded_with_their_name(
    tmp_path: Path, chromium_path: str
) -> None:
    """A click through the console's live view leaves a frame named ``live:click`` by the
    person, as the agent's own acts do."""
    with LocalSites(extra_sites={"forms.example": _forms}) as sites:
        async with _keeper(tmp_path, sites, chromium_path, max_frames=50) as (keeper, _, _):
            await keeper.ensure("forms")
            await keeper.tab("forms", sites.url("forms.example", "/"))
            page = await keeper.unguarded_page("forms")
            box = await page.locator("#done").bounding_box()
            assert box is not None
            x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
            recorder = keeper.replay
            assert recorder is not None
            async with (
                Console(keeper, bind="127.0.0.1:0", user="ops") as console,
                console_client(console) as cookie,
            ):
                path = console.live_path("forms").replace("?", "/ws?", 1)
                ws_url = console.url.replace("http", "ws", 1) + path
                headers = {"Cookie": cookie, "Origin": console.url}
                async with websockets.connect(ws_url, additional_headers=headers) as ws:
                    for action in ("mousePressed", "mouseReleased"):
                        click = {"type": "mouse", "action": action, "x": x, "y": y,
                                 "button": "left", "clickCount": 1}  # fmt: skip
                        await ws.send(json.dumps(click))
                    # Input is handled in order: the answer to a malformed message comes
                    # after the click before it was handled (and its frame written).
                    await ws.send(json.dumps({"type": "nonsense"}))
                    while json.loads(await ws.recv()).get("type") != "error":
                        pass
            live = [f for f in await recorder.frames("forms") if f.act == "live:click"]
            assert live[0].by == "dana"
            dom = await recorder.dom("forms", live[0].seq)
            assert dom is not None and "Saved, thank you." in dom


@asynccontextmanager
async def console_client(console: Console) -> AsyncIterator[str]:
    """A signed-in session's cookie header for ``console`` (a one-time link redeemed)."""
    import httpx

    async with httpx.AsyncClient(base_url=console.url) as client:
        r = await client.get(console.login_link("dana").removeprefix(console.url))
        assert r.status_code == 303
        cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
        yield cookie


async def test_a_conversation_keeps_its_newest_frames_within_max_bytes(
    tmp_path: Path, chromium_path: str
) -> None:
    """Past ``max_bytes`` the oldest frames go: what is kept fits, and is the newest."""
    with LocalSites(extra_sites={"forms.example": _forms}) as sites:
        async with _keeper(tmp_path, sites, chromium_path, max_frames=100, max_bytes=3000,
                           max_frame_bytes=3000) as (keeper, _, _):  # fmt: skip
            await keeper.ensure("forms")
            tab = await keeper.tab("forms", sites.url("forms.example", "/"))
            for i in range(6):
                await tab.fill("#name", f"x{i}")
            assert keeper.replay is not None
            kept = await keeper.replay.frames("forms")
    assert 0 < len(kept) < 7 and sum(f.size for f in kept) <= 3000
    assert [f.seq for f in kept] == list(range(8 - len(kept), 8))
    assert sum(p.stat().st_size for p in (tmp_path / "replay").rglob("*.html")) <= 3000


async def test_a_frame_that_cannot_be_written_does_not_fail_the_act(
    tmp_path: Path, chromium_path: str
) -> None:
    """The replay directory is unusable (a file stands there): the acts succeed, unrecorded."""
    (tmp_path / "replay").write_text("not a directory")
    with LocalSites(extra_sites={"forms.example": _forms}) as sites:
        async with _keeper(tmp_path, sites, chromium_path, max_frames=5) as (keeper, _, _):
            await keeper.ensure("forms")
            tab = await keeper.tab("forms", sites.url("forms.example", "/"))
            await tab.fill("#name", "x")
            await tab.click("#done")
            assert await tab.text() != ""
            assert keeper.replay is not None
            assert await keeper.replay.frames("forms") == ()


async def test_replay_frames_and_their_directories_are_private_to_the_keepers_user(
    tmp_path: Path, chromium_path: str
) -> None:
    """Under the usual umask 022, a real recording writes its frames 0600 in 0700 directories."""
    previous = os.umask(0o022)
    try:
        with LocalSites(extra_sites={"forms.example": _forms}) as sites:
            async with _keeper(tmp_path, sites, chromium_path, max_frames=10) as (keeper, _, _):
                await keeper.ensure("forms")
                tab = await keeper.tab("forms", sites.url("forms.example", "/"))
                await tab.fill("#name", "x")
                assert keeper.replay is not None
                assert len(await keeper.replay.frames("forms")) == 2
    finally:
        os.umask(previous)
    root = tmp_path / "replay"
    files = [p for p in root.rglob("*") if p.is_file()]
    dirs = [root, *(p for p in root.rglob("*") if p.is_dir())]
    assert {p.suffix for p in files} == {".html", ".json"} and len(dirs) == 2
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {"0o600"}
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in dirs} == {"0o700"}


@pytest.mark.parametrize("recording", [False, True], ids=["off", "on"])
async def test_only_a_keeper_recording_copies_the_page_after_its_acts(
    tmp_path: Path, chromium_path: str, recording: bool
) -> None:
    """Off (the default), a navigation, a fill and a click make no copy of the page's
    document and write nothing; on, each of them does (the page counts the copies)."""
    bounds = {"max_frames": 10} if recording else {}
    with LocalSites(extra_sites={"forms.example": _forms}) as sites:
        async with _keeper(tmp_path, sites, chromium_path, **bounds) as (keeper, _, _):
            assert (keeper.replay is not None) is recording
            await keeper.ensure("forms")
            tab = await keeper.tab("forms", sites.url("forms.example", "/"))
            await tab.fill("#name", "x")
            await tab.click("#done")
            assert await tab.evaluate("window.copies") == (3 if recording else 0)
    assert (tmp_path / "replay").exists() is recording


def test_recording_is_off_by_default_and_its_settings_are_checked() -> None:
    """Without ``Replay`` a keeper has no recorder; a bad bound is refused when the
    settings are made, a bad ``replay=`` when the keeper is."""
    assert SessionKeeper(FakeBackend()).replay is None
    with pytest.raises(InvalidArgument):
        Replay(directory="/tmp/x", max_frames=0)
    with pytest.raises(InvalidArgument):
        Replay(directory="/tmp/x", max_bytes=1000, max_frame_bytes=2000)
    with pytest.raises(InvalidArgumentType):
        Replay(directory="/tmp/x", max_age=3600)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentType):
        SessionKeeper(FakeBackend(), replay="on")  # type: ignore[arg-type]
