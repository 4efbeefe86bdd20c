"""browser_take_screenshot as Playwright MCP takes it: WebP besides PNG and JPEG, and the
image attached for the model scaled to what a model takes in, the saved file whole."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from PIL import Image

from session_keeper import PlaywrightBackend, SessionKeeper
from session_keeper.errors import InvalidArgument
from session_keeper.mcp import KeeperMCP
from session_keeper.mcp._screenshot import MAX_PIXELS, MAX_SIDE
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


def _shown(result: Any) -> tuple[str, Image.Image]:
    """The attached image's MIME type, and the image."""
    (image,) = [c for c in result.content if isinstance(c, types.ImageContent)]
    return image.mime_type, Image.open(io.BytesIO(base64.b64decode(image.data)))


async def _blank_page_running(client: Any, script: str) -> None:
    await call(client, "browser_navigate", {"url": "about:blank"}, conversation="t")
    made = await call(
        client, "browser_evaluate", {"function": f"() => {{ {script} }}"}, conversation="t"
    )
    assert not made.is_error, text(made)


async def _sized_page(client: Any, width: int, height: int) -> None:
    style = f"margin:0;width:{width}px;height:{height}px;background:red"
    await _blank_page_running(client, f"document.body.style.cssText = {style!r};")


async def test_a_webp_screenshot_is_saved_and_shown_as_webp(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """type="webp" (or a .webp filename) gives a WebP image, attached and saved."""
    out = tmp_path / "out"
    async with served(playwright_backend, output_dir=out) as (_keeper, client):
        await _sized_page(client, 300, 200)
        shot = await call(client, "browser_take_screenshot", {"type": "webp"}, conversation="t")
        assert not shot.is_error, text(shot)
        mime, image = _shown(shot)
        assert mime == "image/webp" and image.format == "WEBP"
        (saved,) = out.glob("page-*.webp")
        assert saved.read_bytes()[8:12] == b"WEBP"
        named = await call(
            client, "browser_take_screenshot", {"filename": "s.webp"}, conversation="t"
        )
        assert not named.is_error and (out / "s.webp").read_bytes()[8:12] == b"WEBP"
        bad = await call(client, "browser_take_screenshot", {"type": "gif"}, conversation="t")
        assert bad.is_error and "'png', 'jpeg' or 'webp'" in text(bad)


async def test_image_responses_omit_attaches_no_image_and_still_saves_the_shot(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """image_responses="omit" (Playwright MCP's --image-responses omit): a screenshot's
    result is text only, the file is saved and linked; without an output directory the
    result says what was taken. The default still attaches it."""
    out = tmp_path / "out"
    async with served(playwright_backend, output_dir=out, image_responses="omit") as (_k, client):
        await _sized_page(client, 300, 200)
        shot = await call(client, "browser_take_screenshot", {}, conversation="t")
        assert not shot.is_error, text(shot)
        assert [c.type for c in shot.content] == ["text"]
        (saved,) = out.glob("page-*.png")
        assert str(saved) in text(shot) and structured(shot)["file"] == str(saved)
    async with served(playwright_backend, image_responses="omit") as (_k, client):
        await _sized_page(client, 300, 200)
        shot = await call(client, "browser_take_screenshot", {}, conversation="t")
        assert [c.type for c in shot.content] == ["text"]
        assert "Took a png screenshot of the viewport." in text(shot)
    async with served(playwright_backend) as (_k, client):
        await _sized_page(client, 300, 200)
        shot = await call(client, "browser_take_screenshot", {}, conversation="t")
        assert _shown(shot)[0] == "image/png"


async def test_a_large_screenshot_is_shown_scaled_to_what_a_model_takes_in_and_saved_whole(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """A 2000x2000 full page is attached at 1098x1098 (1.15 megapixels, Playwright MCP's
    cap) in its own format, the file keeps 2000x2000; a viewport shot that fits is
    attached as taken."""
    out = tmp_path / "out"
    async with served(playwright_backend, output_dir=out) as (_keeper, client):
        await _sized_page(client, 2000, 2000)
        for kind in ("png", "jpeg"):
            shot = await call(
                client, "browser_take_screenshot", {"fullPage": True, "type": kind},
                conversation="t",
            )  # fmt: skip
            assert not shot.is_error, text(shot)
            mime, image = _shown(shot)
            assert mime == f"image/{kind}" and image.size == (1098, 1098)
            assert max(image.size) <= MAX_SIDE and image.width * image.height <= MAX_PIXELS
            assert structured(shot)["shown_size"] == [1098, 1098]
            with Image.open(structured(shot)["file"]) as saved:
                assert saved.size == (2000, 2000)
        small = await call(client, "browser_take_screenshot", conversation="t")
        _mime, image = _shown(small)
        assert image.size == (1280, 720) and "shown_size" not in structured(small)


async def test_a_device_scale_screenshot_has_a_pixel_per_device_pixel(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """On a 400x300 viewport at device scale factor 2, scale "css" (the default) gives
    400x300 and scale "device" 800x600 (a 50x20 element: 100x40), and the code says so."""

    def make() -> Any:
        return playwright_backend(viewport=(400, 300), device_scale_factor=2)

    async with served(make) as (_keeper, client):
        button = "<button style='width:50px;height:20px;border:0;padding:0'>b</button>"
        await _blank_page_running(client, f"document.body.innerHTML = {button!r};")
        css = await call(client, "browser_take_screenshot", {"scale": "css"}, conversation="t")
        assert _shown(css)[1].size == (400, 300), text(css)
        device = await call(
            client, "browser_take_screenshot", {"scale": "device"}, conversation="t"
        )
        assert _shown(device)[1].size == (800, 600), text(device)
        assert "scale: 'device'" in text(device)
        assert "scale" not in text(css).split("### Ran Playwright code")[-1]
        snap = await call(client, "browser_snapshot", conversation="t")
        ref = text(snap).split("[ref=")[1].split("]")[0]
        element = await call(
            client, "browser_take_screenshot",
            {"scale": "device", "target": ref, "element": "the body"}, conversation="t",
        )  # fmt: skip
        assert _shown(element)[1].size == (100, 40), text(element)
        bad = await call(client, "browser_take_screenshot", {"scale": "x"}, conversation="t")
        assert bad.is_error and "'css' or 'device'" in text(bad)


def test_image_responses_other_than_allow_or_omit_is_refused(tmp_path: Path) -> None:
    """KeeperMCP(image_responses=) is "allow" or "omit"; anything else is InvalidArgument."""
    keeper = SessionKeeper(PlaywrightBackend(tmp_path))  # never started
    with pytest.raises(InvalidArgument, match="'allow' or 'omit'"):
        KeeperMCP(keeper, image_responses="auto")


def test_a_device_scale_factor_out_of_range_is_refused(tmp_path: Path) -> None:
    """PlaywrightBackend refuses a device scale factor of 0, below or above 10, or a bool."""
    for bad in (0, -1, 11, True):
        with pytest.raises(InvalidArgument, match="device_scale_factor"):
            PlaywrightBackend(tmp_path, device_scale_factor=bad)
