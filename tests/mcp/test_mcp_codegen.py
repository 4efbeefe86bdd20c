"""Playwright MCP's ``### Ran Playwright code`` section (TypeScript, or Python) and its
stale-ref answer."""

from __future__ import annotations

import pytest

from session_keeper.mcp import KeeperMCP
from session_keeper.testing import LocalSites

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import call, structured, text
from .test_mcp_tools import _FORM, _page, _ref, _seen
from .test_mcp_turns import served

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.timeout(180),
]


def _code(result_text: str) -> str:
    """The body of the result's code section ('' when it has none)."""
    for fence in ("js", "python"):
        head = f"### Ran Playwright code\n```{fence}\n"
        if head in result_text:
            return result_text.split(head, 1)[1].split("\n```", 1)[0]
    return ""


async def test_each_page_tool_answers_with_the_typescript_playwright_mcp_writes(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """By default the code is TypeScript, line for line as Playwright MCP writes it (the
    element as Playwright's own locator, an options object one key per line)."""
    async with served(playwright_backend) as (_keeper, client):
        url = sites.url("docs.example", "/")
        went = await call(client, "browser_navigate", {"url": url}, conversation="t")
        assert "### Ran Playwright code\n```js\n" in text(went)
        assert _code(text(went)) == f"await page.goto('{url}');"
        snap = await _page(client)
        typed = await call(
            client, "browser_type", {"element": "Name", "target": _ref(snap, "Name"),
                                     "text": "Hi!", "submit": True},
            conversation="t",
        )  # fmt: skip
        assert _code(text(typed)) == (
            "await page.getByRole('textbox', { name: 'Name' }).fill('Hi!');\n"
            "await page.getByRole('textbox', { name: 'Name' }).press('Enter');"
        )
        right = await call(
            client, "browser_click",
            {"element": "Twice", "target": _ref(snap, "Twice"), "button": "right"},
            conversation="t",
        )  # fmt: skip
        assert _code(text(right)) == (
            "await page.getByRole('button', { name: 'Twice' }).click({\n  button: 'right'\n});"
        )
        held = await call(
            client, "browser_click",
            {"element": "Twice", "target": _ref(snap, "Twice"), "modifiers": ["Shift", "Control"]},
            conversation="t",
        )  # fmt: skip
        # As Playwright's code generator: Control is the portable ControlOrMeta, Shift last.
        assert _code(text(held)) == (
            "await page.getByRole('button', { name: 'Twice' }).click({\n"
            "  modifiers: ['ControlOrMeta', 'Shift']\n});"
        )
        resized = await call(
            client, "browser_resize", {"width": 390, "height": 780}, conversation="t"
        )
        assert _code(text(resized)) == "await page.setViewportSize({ width: 390, height: 780 });"
        waited = await call(client, "browser_wait_for", {"time": 1}, conversation="t")
        assert _code(text(waited)) == "await new Promise(f => setTimeout(f, 1 * 1000));"
        for checked, method in (("true", "check"), ("false", "uncheck")):
            filled = await call(client, "browser_fill_form", {"fields": [
                {"name": "Agree", "type": "checkbox", "target": _ref(snap, "Agree"),
                 "value": checked},
            ]}, conversation="t")  # fmt: skip
            assert _code(text(filled)) == (
                f"await page.getByRole('checkbox', {{ name: 'Agree' }}).{method}();"
            )
            assert (await _seen(client))["agree"] is (checked == "true")
        # An expression is shown as the arrow function that returns it; a function as given.
        for given, shown, value in [
            ("(1+1)", "() => ((1+1))", 2),
            ("[1,2].map(x => x*2)", "() => ([1,2].map(x => x*2))", [2, 4]),
            ("async () => 42", "async () => 42", 42),
            ("x => 7", "x => 7", 7),
            ("function foo() { return 1; }", "function foo() { return 1; }", 1),
        ]:
            done = await call(client, "browser_evaluate", {"function": given}, conversation="t")
            assert structured(done)["result"] == value, text(done)
            assert _code(text(done)) == f"await page.evaluate('{shown}');"


async def test_each_page_tool_answers_with_the_python_code_it_ran(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """With codegen "python" a result carries the Playwright (Python, sync) code that its
    tool ran, with the element as Playwright's own locator, after its Result section; the
    code does what the tool did (the page's own listeners saw it)."""
    async with served(playwright_backend, codegen="python") as (_keeper, client):
        url = sites.url("docs.example", "/")
        went = await call(client, "browser_navigate", {"url": url}, conversation="t")
        assert _code(text(went)) == f'page.goto("{url}")'
        snap = await _page(client)
        typed = await call(
            client, "browser_type", {"element": "Name", "target": _ref(snap, "Name"),
                                     "text": 'Ada "Lovelace"', "submit": True},
            conversation="t",
        )  # fmt: skip
        assert _code(text(typed)) == (
            'page.get_by_role("textbox", name="Name").fill("Ada \\"Lovelace\\"")\n'
            'page.get_by_role("textbox", name="Name").press("Enter")'
        )
        clicked = await call(
            client, "browser_click",
            {"element": "Twice", "target": _ref(snap, "Twice"), "doubleClick": True},
            conversation="t",
        )  # fmt: skip
        assert _code(text(clicked)) == 'page.get_by_role("button", name="Twice").dblclick()'
        assert "dblclick" in (await _seen(client))["seen"]
        evaluated = await call(
            client, "browser_evaluate", {"function": "() => 1 + 1"}, conversation="t"
        )
        words = text(evaluated)
        assert words.index("### Result") < words.index("### Ran Playwright code")
        # As Playwright MCP: the page is as the click's result showed it, so no ### Page.
        assert "### Page" not in words
        assert _code(words) == 'page.evaluate("() => 1 + 1")'


async def test_a_stale_ref_is_refused_at_once_in_playwright_mcps_words(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A ref from a snapshot of a page that has since changed answers "Ref eN not found in
    the current page snapshot" instead of waiting for an element that will not come; the
    page is not touched."""
    async with served(playwright_backend) as (_keeper, client):
        snap = await _page(client)
        stale = _ref(snap, "Twice")
        await call(client, "browser_evaluate", {"function": _FORM}, conversation="t")
        clicked = await call(
            client, "browser_click", {"element": "Twice", "target": stale}, conversation="t"
        )
        assert clicked.is_error
        assert text(clicked) == (
            f"### Error\nRef {stale} not found in the current page snapshot. "
            "Try capturing new snapshot."
        )
        assert (await _seen(client))["seen"] == []
        assert structured(clicked)["message"].startswith(f"Ref {stale} not found")


async def test_codegen_none_leaves_the_code_out(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """KeeperMCP(codegen="none") (``--codegen none``) answers without a code section."""
    async with served(playwright_backend, codegen="none") as (_keeper, client):
        went = await call(
            client, "browser_navigate", {"url": sites.url("docs.example", "/")}, conversation="t"
        )
        assert not went.is_error and "### Ran Playwright code" not in text(went)
    with pytest.raises(ValueError, match="codegen"):
        KeeperMCP(_keeper, codegen="java")
