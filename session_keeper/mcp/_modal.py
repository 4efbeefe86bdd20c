"""Dialogs and file choosers: a page's *modal state*, as Playwright MCP handles it.

A page that opens a JavaScript dialog or a file chooser stops until someone answers.
No tool call waits for that: :func:`run_tool` races the tool against the page's modal
state, and when one appears first it answers at once with a ``### Modal state``
section naming the tool that answers it (the interrupted action goes on once it is
answered). While a page waits, the tools that would need its script are refused with
Playwright MCP's words; reading tools and the keeper's own still run.

Uploads and drops give the page bytes read from the server's upload directories only
(see :mod:`session_keeper.mcp._uploads`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from session_keeper._keeper.tabs.page_watch import ModalState
from session_keeper.mcp._page import ToolFailure
from session_keeper.mcp._tools import (
    ToolContext,
    ToolOutput,
    ToolSpec,
    _target,
    _with_snapshot,
    page_if_changed,
)

_CLEARED_BY = {"dialog": "browser_handle_dialog", "fileChooser": "browser_file_upload"}


def modal_lines(states: list[ModalState]) -> str:
    """Playwright MCP's ``### Modal state`` section."""
    if not states:
        return "### Modal state\n- There is no modal state present"
    lines = [f"- [{s.description}]: can be handled by {_CLEARED_BY[s.kind]}" for s in states]
    return "### Modal state\n" + "\n".join(lines)


def _modal_data(states: list[ModalState]) -> list[dict[str, Any]]:
    return [
        {"kind": s.kind, "description": s.description, "handled_by": _CLEARED_BY[s.kind]}
        for s in states
    ]


async def _waiting(ctx: ToolContext, states: list[ModalState]) -> ToolOutput:
    tab = await ctx.page.tab()
    # Only the URL: the title needs the page's script, which the dialog holds.
    return ToolOutput(
        text=f"### Page\n- Page URL: {tab.url}\n{modal_lines(states)}",
        data={"url": tab.url, "modal_state": _modal_data(states)},
    )


def _forget(task: asyncio.Future[Any]) -> None:
    # Nobody may ever ask for what an interrupted action came to.
    if not task.cancelled():
        task.exception()


async def race(ctx: ToolContext, action: asyncio.Future[ToolOutput]) -> ToolOutput:
    """``action``'s output, or, when the page waits on a dialog or chooser first, the
    modal state (``action`` goes on, kept as the page's interrupted action)."""
    watch = await ctx.page.watch()
    changed: asyncio.Future[Any] = asyncio.ensure_future(watch.modal_changed.wait())
    try:
        await asyncio.wait((action, changed), return_when=asyncio.FIRST_COMPLETED)
    finally:
        changed.cancel()
    if action.done():
        return action.result()
    action.add_done_callback(_forget)
    ctx.page.interrupted = action
    return await _waiting(ctx, watch.modal_states())


async def run_tool(spec: ToolSpec, ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    """Run ``spec`` for one call, minding the page's modal state (see the module)."""
    if spec.under_modal == "free":
        return await spec.run(ctx, args)
    watch = await ctx.page.watch()
    states = watch.modal_states()
    if spec.under_modal == "clears":
        if not any(s.kind == spec.clears for s in states):
            raise ToolFailure(
                f'Error: The tool "{spec.name}" can only be used when there is related '
                f"modal state present.\n{modal_lines(states)}",
                {"error": "no_modal_state", "modal_state": _modal_data(states)},
            )
    elif states:
        raise ToolFailure(
            f'Error: Tool "{spec.name}" does not handle the modal state.\n{modal_lines(states)}',
            {"error": "modal_state", "modal_state": _modal_data(states)},
        )
    watch.modal_changed.clear()
    return await race(ctx, asyncio.ensure_future(spec.run(ctx, args)))


async def _resume(ctx: ToolContext) -> ToolOutput:
    """After an answer: let the interrupted action finish (or meet the next dialog)."""
    watch = await ctx.page.watch()
    left = watch.modal_states()
    if left:
        return await _waiting(ctx, left)
    action, ctx.page.interrupted = ctx.page.interrupted, None
    if action is not None and not action.done():
        watch.modal_changed.clear()
        shielded = asyncio.ensure_future(
            asyncio.wait_for(asyncio.shield(action), ctx.page.action_timeout_ms / 1000)
        )
        with contextlib.suppress(TimeoutError):  # still going: the snapshot shows where
            await race(ctx, shielded)
        if ctx.page.interrupted is shielded:
            ctx.page.interrupted = action  # a second dialog interrupted it again
            return await _waiting(ctx, watch.modal_states())
    elif action is not None:
        with contextlib.suppress(Exception):
            action.result()  # its output was for a call already answered
    return await _with_snapshot(ctx, complete=True)


async def handle_dialog(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    accept = args.get("accept")
    if not isinstance(accept, bool):
        raise ToolFailure("argument 'accept' must be a boolean")
    prompt = args.get("promptText")
    if prompt is not None and not isinstance(prompt, str):
        raise ToolFailure("argument 'promptText' must be a string")
    watch = await ctx.page.watch()
    await watch.answer_dialog(accept=accept, prompt_text=prompt)
    return await _resume(ctx)


def _paths(args: Mapping[str, Any]) -> list[str] | None:
    paths = args.get("paths")
    if paths is None:
        return None
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        raise ToolFailure("argument 'paths' must be a list of absolute file paths")
    return list(paths)


async def file_upload(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    paths = _paths(args)
    # Checked and read before the chooser is touched: a refused path changes nothing.
    files = None if paths is None else ctx.uploads.read(paths)
    watch = await ctx.page.watch()
    await watch.choose_files(files)
    return await _resume(ctx)


async def drop(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    paths = _paths(args)
    data = args.get("data")
    if data is not None and (
        not isinstance(data, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items())
    ):
        raise ToolFailure("argument 'data' must map MIME types to strings")
    if not paths and not data:
        raise ToolFailure('At least one of "paths" or "data" must be provided.')
    files = ctx.uploads.read(paths) if paths else None
    element = await ctx.page.element(_target(args))
    await element.drop(
        files=files, data=dict(data) if data else None, timeout_ms=ctx.page.action_timeout_ms
    )
    return await _with_snapshot(ctx, complete=True)


def _media(args: Mapping[str, Any]) -> dict[str, str]:
    choices = {
        "colorScheme": ("color_scheme", ("light", "dark")),
        "reducedMotion": ("reduced_motion", ("reduce", "no-preference")),
        "forcedColors": ("forced_colors", ("active", "none")),
        "contrast": ("contrast", ("more", "no-preference")),
        "media": ("media", ("screen", "print")),
    }
    unknown = sorted(set(args) - set(choices))
    if unknown:
        raise ToolFailure(f"unknown argument(s): {', '.join(unknown)}")
    features: dict[str, str] = {}
    for name, (python, allowed) in choices.items():
        if name not in args:
            continue  # omitted: left as it is
        value = args[name]
        if value is not None and value not in allowed:
            raise ToolFailure(f"argument {name!r} must be one of {', '.join(allowed)} or null")
        features[python] = "null" if value is None else value
    if not features:
        raise ToolFailure("Error: Specify at least one media feature to emulate.")
    return features


async def emulate_media(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    features = _media(args)
    watch = await ctx.page.watch()
    await watch.emulate_media(**features)
    state = await ctx.page.state()
    shown = ", ".join(f"{k}={v}" for k, v in features.items())
    return ToolOutput(
        text=f"### Result\nEmulating {shown}{page_if_changed(ctx, state)}",
        data={"url": state.url, "title": state.title, "emulated": features},
    )
