"""A person types into a live view and closes it while their keys are still arriving —
N times over one keeper and console. Run as a program: the test reads its stderr.

Each close lands while the console is still forwarding the typed keys and streaming the
frames they cause, the moment the console guide's program met by chance.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

from playwright.async_api import Browser, Page, async_playwright

from session_keeper import Grant, PlaywrightBackend, SessionKeeper, find_chromium
from session_keeper.console import Console
from session_keeper.testing import LocalSites

SITE = "billing.example"


async def click_where_drawn(person: Page, real: Page, selector: str) -> None:
    """Click the field in the streamed image where the real page draws it."""
    box = await real.locator(selector).bounding_box()
    shown = await person.locator("#screen").bounding_box()
    width = float(await person.get_attribute("#screen", "data-device-width") or 1)
    assert box is not None and shown is not None
    scale = shown["width"] / width
    await person.mouse.click(
        shown["x"] + (box["x"] + box["width"] / 2) * scale,
        shown["y"] + (box["y"] + box["height"] / 2) * scale,
    )
    await real.wait_for_function("s => document.activeElement.matches(s)", arg=selector)


async def a_visit(browser: Browser, link: str, keeper: SessionKeeper[Page]) -> None:
    """Open the link, type into the streamed sign-in form, close at once."""
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    person = await context.new_page()
    await person.goto(link)
    await person.wait_for_selector("#screen:not([data-frames='0'])")
    (real,) = keeper.unguarded_sign_in_pages("billing")  # the page the view streams
    await click_where_drawn(person, real, "input[name=username]")
    await person.keyboard.type("alice" * 8)
    await context.close()  # the person closes the tab: the live view's socket goes


async def main(times: int) -> None:
    chromium = find_chromium()
    with LocalSites() as sites, tempfile.TemporaryDirectory() as tmp:
        backend = PlaywrightBackend(
            f"{tmp}/profile",
            executable_path=chromium,
            host_resolver_rules=sites.host_resolver_rules,
        )
        async with (
            SessionKeeper(backend, grants=[Grant("billing", SITE)]) as keeper,
            Console(keeper, bind="127.0.0.1:0") as console,
            async_playwright() as pw,
        ):
            browser = await pw.chromium.launch(executable_path=chromium)
            await keeper.ensure("billing")
            form = sites.url(SITE, "/login")
            for _ in range(times):
                await a_visit(
                    browser, console.sign_in_link("billing", user="dana", url=form), keeper
                )
            await browser.close()
    print(f"{times} live views closed", flush=True)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
