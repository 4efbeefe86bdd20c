"""Playwright MCP's element and keyboard tools, with its argument names, on real Chromium.

Each tool acts only in the conversation's own tab; the page is built on ``about:blank``
by ``browser_evaluate`` and read back the same way, so what a tool did is what the page
itself saw (its event listeners), not what the tool reported.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from session_keeper.testing import LocalSites

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import call, structured, text
from .test_mcp_turns import served

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.timeout(180),
]

_FORM = """() => {
  document.title = 'Tools';
  document.body.innerHTML = `
    <label>Name <input id=name></label>
    <label><input type=checkbox id=agree> Agree</label>
    <label><input type=radio name=plan id=basic> Basic</label>
    <label><input type=radio name=plan id=pro> Pro</label>
    <label>Colour <select id=colour><option value=r>Red</option><option value=b>Blue</option>
      </select></label>
    <button id=hoverme>Hover me</button>
    <button id=twice>Twice</button>
    <div id=src draggable=true role=button>Drag source</div>
    <div id=dst role=button>Drop here</div>
    <p id=log>none</p>`;
  window.seen = [];
  const note = (what) => { window.seen.push(what); };
  hoverme.onmouseenter = () => note('hover');
  twice.ondblclick = () => note('dblclick');
  twice.oncontextmenu = (e) => { e.preventDefault(); note('right'); };
  document.addEventListener('keydown', (e) => note('key:' + e.key));
  dst.ondragover = (e) => e.preventDefault();
  dst.ondrop = (e) => { e.preventDefault(); note('drop'); };
  return 'built';
}"""


def _ref(snapshot: str, name: str) -> str:
    # A ref may carry its frame's prefix (f1e3) once the page has navigated.
    m = re.search(rf'"{re.escape(name)}"[^\n]*\[ref=((?:f\d+)?e\d+)\]', snapshot)
    assert m is not None, f"{name!r} not in snapshot:\n{snapshot}"
    return m.group(1)


async def _page(client: Any) -> str:
    await call(client, "browser_navigate", {"url": "about:blank"}, conversation="t")
    built = await call(client, "browser_evaluate", {"function": _FORM}, conversation="t")
    assert not built.is_error and structured(built)["result"] == "built", text(built)
    return str(structured(await call(client, "browser_snapshot", conversation="t"))["snapshot"])


async def _seen(client: Any) -> Any:
    state = """() => ({seen: window.seen, name: document.querySelector('#name').value,
      agree: document.querySelector('#agree').checked,
      pro: document.querySelector('#pro').checked,
      colour: document.querySelector('#colour').value})"""
    result = await call(client, "browser_evaluate", {"function": state}, conversation="t")
    assert not result.is_error, text(result)
    return structured(result)["result"]


async def test_playwright_mcps_element_tools_act_in_the_conversations_page(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """fill_form, select_option, hover, click (double, right), press_key and drag do to the
    page what Playwright MCP's do, with its argument names."""
    async with served(playwright_backend) as (_keeper, client):
        snap = await _page(client)
        filled = await call(client, "browser_fill_form", {"fields": [
            {"name": "Name", "type": "textbox", "target": _ref(snap, "Name"), "value": "Ada"},
            {"name": "Agree", "type": "checkbox", "target": _ref(snap, "Agree"), "value": "true"},
            {"name": "Pro", "type": "radio", "target": _ref(snap, "Pro"), "value": "true"},
        ]}, conversation="t")  # fmt: skip
        assert not filled.is_error, text(filled)
        chosen = await call(
            client, "browser_select_option",
            {"element": "Colour", "target": _ref(snap, "Colour"), "values": ["Blue"]},
            conversation="t",
        )  # fmt: skip
        assert not chosen.is_error, text(chosen)
        for name, arguments in (
            ("browser_hover", {"target": _ref(snap, "Hover me")}),
            ("browser_click", {"target": _ref(snap, "Twice"), "doubleClick": True}),
            ("browser_click", {"target": _ref(snap, "Twice"), "button": "right"}),
            ("browser_press_key", {"key": "ArrowLeft"}),
        ):
            result = await call(client, name, arguments, conversation="t")
            assert not result.is_error, (name, text(result))
        state = await _seen(client)
        assert state["name"] == "Ada" and state["agree"] is True and state["pro"] is True
        assert state["colour"] == "b"
        assert state["seen"][:4] == ["hover", "dblclick", "right", "key:ArrowLeft"]


async def test_drag_and_resize_act_in_the_conversations_page(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """browser_drag drops one element on another; browser_resize sets the viewport the
    page measures."""
    async with served(playwright_backend) as (_keeper, client):
        snap = await _page(client)
        src, dst = _ref(snap, "Drag source"), _ref(snap, "Drop here")
        dragged = await call(
            client, "browser_drag", {"startTarget": src, "endTarget": dst}, conversation="t"
        )
        assert not dragged.is_error, text(dragged)
        assert "drop" in (await _seen(client))["seen"]
        resized = await call(client, "browser_resize", {"width": 640, "height": 480},
                             conversation="t")  # fmt: skip
        assert not resized.is_error, text(resized)
        size = await call(
            client, "browser_evaluate",
            {"function": "() => [innerWidth, innerHeight]"}, conversation="t",
        )  # fmt: skip
        assert structured(size)["result"] == [640, 480]


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("browser_click", {"target": "e1", "button": "side"}, "button"),
        ("browser_click", {"target": "e1", "modifiers": ["Hyper"]}, "modifiers"),
        ("browser_fill_form", {"fields": [{"target": "e1", "type": "date", "value": "x"}]},
         "type"),
        ("browser_select_option", {"target": "e1", "values": []}, "values"),
        ("browser_resize", {"width": 0, "height": 480}, "width"),
        ("browser_resize", {"width": "wide", "height": 480}, "width"),
        ("browser_evaluate", {}, "function"),
        ("browser_press_key", {}, "key"),
        ("browser_drag", {"startTarget": "e1"}, "endTarget"),
    ],
)  # fmt: skip
async def test_bad_tool_arguments_are_refused_before_the_page_is_touched(
    playwright_backend: BackendFactory,
    sites: LocalSites,
    name: str,
    arguments: dict[str, Any],
    says: str,
) -> None:
    """A malformed argument is an error naming it, and nothing happens in the page."""
    async with served(playwright_backend) as (_keeper, client):
        await _page(client)
        result = await call(client, name, arguments, conversation="t")
        assert result.is_error and says in text(result), text(result)
        assert (await _seen(client))["seen"] == []


async def test_a_page_that_did_not_come_with_success_says_its_http_status(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """As Playwright MCP: a page whose document came with a non-2xx status shows
    "- HTTP status: 404 Not Found" under ### Page (and http_status in structuredContent,
    which is all some clients give the model); a page that loaded fine shows none."""
    async with served(playwright_backend) as (_keeper, client):
        missing = await call(
            client, "browser_navigate", {"url": sites.url("docs.example", "/nope")},
            conversation="t",
        )  # fmt: skip
        assert not missing.is_error, text(missing)
        assert "- Page Title: Not found\n- HTTP status: 404 Not Found\n" in text(missing)
        shown = await call(client, "browser_snapshot", conversation="t")
        assert "- HTTP status: 404 Not Found" in text(shown)
        assert structured(missing)["http_status"] == structured(shown)["http_status"] == 404
        fine = await call(
            client, "browser_navigate", {"url": sites.url("docs.example", "/")}, conversation="t"
        )
        assert "- Page Title: Docs\n" in text(fine) and "HTTP status" not in text(fine)
        assert "http_status" not in structured(fine)
