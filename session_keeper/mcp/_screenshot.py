"""``browser_take_screenshot``, as Playwright MCP takes it: PNG, JPEG or WebP, of the
viewport, the full page or one element, in CSS or device pixels, saved in the output
directory when there is one, and attached for the model scaled to fit what a model takes
in (at most 1568 pixels a side and 1.15 megapixels: Playwright MCP's cap) — the saved
file keeps every pixel.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from typing import Any, Literal

from PIL import Image

from session_keeper.mcp._page import ToolFailure
from session_keeper.mcp._tools import (
    ToolContext,
    ToolOutput,
    _bool,
    _filename,
    _str,
    page_if_changed,
)

#: The longest side and the most pixels of an image attached for the model.
MAX_SIDE = 1568
MAX_PIXELS = 1.15 * 1024 * 1024

Kind = Literal["png", "jpeg", "webp"]
_EXTENSIONS: dict[str, Kind] = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".webp": "webp"}


def _kind(args: Mapping[str, Any], filename: str | None) -> Kind:
    inferred: Kind = "png"
    if filename is not None:
        dot = filename.rfind(".")
        inferred = _EXTENSIONS.get(filename[dot:].lower(), "png") if dot >= 0 else "png"
    kind = args.get("type", inferred)
    if kind not in ("png", "jpeg", "webp"):
        raise ToolFailure("argument 'type' must be 'png', 'jpeg' or 'webp'")
    return kind  # type: ignore[no-any-return]


def _encode(image: Image.Image, kind: Kind, *, lossless: bool) -> bytes:
    out = io.BytesIO()
    if kind == "png":
        image.save(out, format="PNG")
    elif kind == "jpeg":
        image.convert("RGB").save(out, format="JPEG", quality=80)
    else:
        image.save(out, format="WEBP", lossless=lossless, quality=80)
    return out.getvalue()


def as_webp(png: bytes) -> bytes:
    """A PNG screenshot as lossless WebP (the browser takes only PNG and JPEG)."""
    with Image.open(io.BytesIO(png)) as image:
        return _encode(image, "webp", lossless=True)


def fit_for_model(data: bytes, kind: Kind) -> tuple[bytes, tuple[int, int] | None]:
    """``data`` scaled down to :data:`MAX_SIDE` / :data:`MAX_PIXELS` (the same format),
    and the size it was scaled to (``None``: it fit already, ``data`` as it is)."""
    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
        shrink = min(MAX_SIDE / width, MAX_SIDE / height, math.sqrt(MAX_PIXELS / (width * height)))
        if shrink >= 1:
            return data, None
        size = (max(1, int(width * shrink)), max(1, int(height * shrink)))
        scaled = image.resize(size, Image.Resampling.LANCZOS)
        return _encode(scaled, kind, lossless=kind == "webp"), size


async def screenshot(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    filename, target = _filename(args), _str(args, "target")
    kind = _kind(args, filename)
    taken: Literal["png", "jpeg"] = "jpeg" if kind == "jpeg" else "png"
    full = _bool(args, "fullPage")
    scale = args.get("scale", "css")
    if scale not in ("css", "device"):
        raise ToolFailure("argument 'scale' must be 'css' or 'device'")
    if full and target is not None:
        raise ToolFailure("fullPage cannot be used with element screenshots.")
    # The code shows what differs from Playwright's defaults, as the call was made.
    shot: dict[str, object] = {"type": kind, **({"scale": scale} if scale == "device" else {})}
    if target is not None:
        element = await ctx.page.element(target)
        timeout = ctx.page.action_timeout_ms
        image = await element.screenshot(image=taken, scale=scale, timeout_ms=timeout)
        label, prefix = _str(args, "element") or "element", "element"
        ctx.page.act(target, "screenshot", options=shot)
    else:
        image = await (await ctx.page.tab()).screenshot(full_page=full, image=taken, scale=scale)
        label, prefix = ("full page" if full else "viewport"), "page"
        ctx.page.act(None, "screenshot", options={**shot, **({"full_page": True} if full else {})})
    if kind == "webp":
        image = as_webp(image)
    state = await ctx.page.state()
    data: dict[str, Any] = {"url": state.url, "title": state.title, "type": kind}
    data["bytes"] = len(image)
    if filename is not None or ctx.outputs.path is not None:
        # Saved as Playwright MCP saves it: in the output directory, linked in the result.
        path = ctx.outputs.save(filename, image, prefix=prefix, ext=kind)
        data["file"] = str(path)
        result = f"- [Screenshot of {label}]({path})"
    else:
        result = f"Took a {kind} screenshot of the {label}."
    shown: tuple[bytes, str] | None = None
    if filename is None and ctx.image_responses != "omit":
        # The model sees the image (scaled to what it takes in) unless it asked for a
        # file, or the client takes no images.
        fitted, scaled = fit_for_model(image, kind)
        if scaled is not None:
            data["shown_size"] = list(scaled)
        shown = (fitted, f"image/{kind}")
    page = page_if_changed(ctx, state)
    return ToolOutput(text=f"### Result\n{result}{page}", data=data, image=shown)
