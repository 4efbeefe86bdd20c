"""Playwright MCP's network and file tools: the conversation's own requests, redacted and
with the Guard's verdict; uploads and drops only from the server's upload directories."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from session_keeper.testing import LocalSites

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import call, sign_in_billing, structured, text
from .test_mcp_page_events import build, page_value, ref_of, serving
from .test_mcp_turns import served

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.timeout(240),
]

_CANARIES = ("CANARYCOOKIE", "CANARYQUERY", "CANARYAUTH", "CANARYKEY")


def _all_said(*results: object) -> str:
    """Every word a result gave the client: its text and its structuredContent."""
    return "\n".join(text(r) + json.dumps(structured(r)) for r in results)  # type: ignore[arg-type]


async def test_network_requests_are_the_conversations_own_redacted_with_the_guards_verdict(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """browser_network_requests / browser_network_request list only the calling
    conversation's requests, say which the Guard refused and by which rule, and never
    show a cookie value, an Authorization header or a query-string token."""
    async with serving(playwright_backend) as (_keeper, client):
        await sign_in_billing(client, sites, conversation="billing")
        docs = sites.url("docs.example", "/")
        await call(client, "browser_navigate", {"url": docs}, conversation="t")
        fetched = await call(client, "browser_evaluate", {"function": """async () => {
            document.cookie = 'sid=CANARYCOOKIE; path=/';
            const r = await fetch('/api/x?token=CANARYQUERY&page=2', {headers: {
                Authorization: 'Bearer CANARYAUTH', 'X-Api-Key': 'CANARYKEY'}});
            return (await r.text()).length; }"""}, conversation="t")  # fmt: skip
        assert not fetched.is_error, text(fetched)
        blocked = await call(client, "browser_navigate",
                             {"url": sites.url("billing.example", "/invoices")},
                             conversation="t")  # fmt: skip
        assert blocked.is_error and structured(blocked)["block"]["rule"] == "grant"
        await call(client, "browser_navigate",
                   {"url": sites.url("docs.example", "/other-conversations-page")},
                   conversation="other")  # fmt: skip

        listed = await call(client, "browser_network_requests", {"static": True},
                            conversation="t")  # fmt: skip
        assert not listed.is_error, text(listed)
        rows = structured(listed)["requests"]
        assert "other-conversations-page" not in _all_said(listed)
        api = next(r for r in rows if "/api/x" in r["url"])
        assert api["url"].endswith("/api/x?token=<redacted>&page=<redacted>")
        refused = next(r for r in rows if r["url"].endswith("/invoices"))
        assert refused["blocked"]["rule"] == "grant"
        assert refused["blocked"]["site"] == "billing.example"
        assert "refused by the Guard, rule grant" in text(listed)

        details = [
            await call(
                client, "browser_network_request", {"index": api["index"], **part}, conversation="t"
            )
            for part in (
                {},
                {"part": "request-headers"},
                {"part": "request-body"},
                {"part": "response-headers"},
                {"part": "response-body"},
            )
        ]
        assert not any(d.is_error for d in details), [text(d) for d in details]
        assert "authorization: <redacted>" in text(details[1])
        assert "cookie: <redacted>" in text(details[1])
        assert "### Response body\n<!doctype html>" in text(details[4])  # the page read it
        said = _all_said(listed, *details)
        for canary in _CANARIES:
            assert canary not in said, canary
        guard_said = await call(client, "browser_network_request", {"index": refused["index"]},
                                conversation="t")  # fmt: skip
        assert "guard:     refused, rule grant" in text(guard_said)

        quiet = await call(client, "browser_network_requests", {"static": False},
                           conversation="t")  # fmt: skip
        assert "static request" in text(quiet)  # the docs page's own document is hidden
        assert any(r["url"].endswith("/invoices") for r in structured(quiet)["requests"])
        for bad in ({"index": 0}, {"index": 10_000}, {"index": 1, "part": "body"}):
            assert (await call(client, "browser_network_request", bad, conversation="t")).is_error
        bad_filter = await call(client, "browser_network_requests", {"static": True,
                                "filter": "("}, conversation="t")  # fmt: skip
        assert bad_filter.is_error and "regular expression" in text(bad_filter)


_PICKER = "<input type=file id=f multiple aria-label='Pick files'><button id=d>Drop zone</button>"
_PICKER_JS = """
  const read = (files) => Promise.all([...files].map(async x => x.name + ':' + await x.text()));
  f.onchange = async () => { window.got = await read(f.files); };
  d.ondragover = (e) => e.preventDefault();
  d.ondrop = async (e) => { e.preventDefault();
    window.dropped = {text: e.dataTransfer.getData('text/plain'),
                      files: await read(e.dataTransfer.files)}; }"""


def _upload_tree(tmp_path: Path) -> tuple[Path, Path]:
    """An upload directory with a.txt and a symlink out of it to a secret beside it."""
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    (uploads / "a.txt").write_text("alpha")
    (tmp_path / "secret.txt").write_text("SECRET")
    os.symlink(tmp_path / "secret.txt", uploads / "link.txt")
    return uploads, tmp_path / "secret.txt"


async def test_uploads_come_only_from_the_upload_directories(
    playwright_backend: BackendFactory, tmp_path: Path
) -> None:
    """A file chooser is a modal state that browser_file_upload answers; a path that
    leaves the upload directory (a symlink, ``..``, a relative name) is refused with
    UploadRefused and the page receives nothing; browser_drop obeys the same rule."""
    uploads, _secret = _upload_tree(tmp_path)
    escapes = [str(uploads / "link.txt"), f"{uploads}/../secret.txt", "a.txt"]
    async with serving(playwright_backend, upload_dirs=[uploads]) as (_keeper, client):
        snap = await build(client, _PICKER, _PICKER_JS)
        opened = await call(client, "browser_click", {"target": ref_of(snap, "Pick files")},
                            conversation="t")  # fmt: skip
        assert "- [File chooser]: can be handled by browser_file_upload" in text(opened)
        for path in escapes:
            refused = await call(client, "browser_file_upload", {"paths": [path]},
                                 conversation="t")  # fmt: skip
            assert refused.is_error and "UploadRefused" in text(refused), path
            assert "SECRET" not in _all_said(refused)
        still = await call(client, "browser_snapshot", conversation="t")
        assert "does not handle the modal state" in text(still)  # the chooser still waits
        uploaded = await call(client, "browser_file_upload", {"paths": [str(uploads / "a.txt")]},
                              conversation="t")  # fmt: skip
        assert not uploaded.is_error, text(uploaded)
        assert await page_value(client, "window.got") == ["a.txt:alpha"]

        drop_zone = ref_of(snap, "Drop zone")
        for path in escapes[:2]:
            refused = await call(client, "browser_drop", {"target": drop_zone, "paths": [path]},
                                 conversation="t")  # fmt: skip
            assert refused.is_error and "UploadRefused" in text(refused), path
        assert await page_value(client, "window.dropped || null") is None
        both = {"target": drop_zone, "paths": [str(uploads / "a.txt")],
                "data": {"text/plain": "hello"}}  # fmt: skip
        dropped = await call(client, "browser_drop", both, conversation="t")
        assert not dropped.is_error, text(dropped)
        assert await page_value(client, "window.dropped") == {
            "text": "hello",
            "files": ["a.txt:alpha"],
        }
        nothing = await call(client, "browser_drop", {"target": drop_zone}, conversation="t")
        assert nothing.is_error and "At least one of" in text(nothing)


async def test_uploads_are_off_without_an_upload_directory(
    playwright_backend: BackendFactory, tmp_path: Path
) -> None:
    """With no upload directory every upload is refused with a message naming
    --upload-dir; cancelling the chooser (no paths) still answers it."""
    uploads, _secret = _upload_tree(tmp_path)
    async with serving(playwright_backend) as (_keeper, client):
        snap = await build(client, _PICKER, _PICKER_JS)
        await call(client, "browser_click", {"target": ref_of(snap, "Pick files")},
                   conversation="t")  # fmt: skip
        refused = await call(client, "browser_file_upload", {"paths": [str(uploads / "a.txt")]},
                             conversation="t")  # fmt: skip
        assert refused.is_error and "--upload-dir" in text(refused)
        cancelled = await call(client, "browser_file_upload", {}, conversation="t")
        assert not cancelled.is_error, text(cancelled)
        assert await page_value(client, "window.got || null") is None


async def test_a_filename_saves_a_read_tools_result_in_the_output_directory_only(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """browser_console_messages, browser_network_requests, browser_network_request,
    browser_find and browser_evaluate save their result under a filename in the output
    directory and link it, as Playwright MCP does; with no output directory a filename is
    refused."""
    out = tmp_path / "out"
    async with served(playwright_backend, output_dir=out) as (_keeper, client):
        docs = sites.url("docs.example", "/")
        await call(client, "browser_navigate", {"url": docs}, conversation="t")
        logged = await call(
            client, "browser_evaluate",
            {"function": "async () => { console.error('kept-in-file'); await fetch('/api/x'); }"},
            conversation="t",
        )  # fmt: skip
        assert not logged.is_error, text(logged)
        calls: list[tuple[str, dict[str, Any], str, str]] = [
            ("browser_console_messages", {"filename": "c.log"}, "kept-in-file", "Console"),
            ("browser_network_requests", {"filename": "n.log"}, "/api/x", "Network"),
            ("browser_network_request", {"index": 1, "filename": "r.log"}, "[GET]", "Request"),
            ("browser_find", {"text": "Docs", "filename": "f.txt"}, "Docs", "Find"),
            (
                "browser_evaluate",
                {"function": "() => 'evaluated-in-file'", "filename": "e.json"},
                "evaluated-in-file",
                "Evaluation result",
            ),
        ]
        for tool, arguments, expected, title in calls:
            saved = await call(client, tool, arguments, conversation="t")
            assert not saved.is_error, text(saved)
            name = str(arguments["filename"])
            assert f"### Result\n- [{title}](" in text(saved) and name in text(saved)
            assert expected in (out / name).read_text(encoding="utf-8"), tool
            assert expected not in text(saved).split("### Result", 1)[1].split("\n### ")[0]
    async with served(playwright_backend) as (_keeper, client):
        await call(client, "browser_navigate", {"url": sites.url("docs.example", "/")},
                   conversation="t")  # fmt: skip
        refused = await call(
            client, "browser_console_messages", {"filename": "c.log"}, conversation="t"
        )
        assert refused.is_error and "--output-dir" in text(refused)
