"""The MCP tools that act on elements and the keyboard, as Playwright MCP names them.

Each acts only through the conversation's :class:`~session_keeper.ConversationTab` and
its :class:`~session_keeper.TabLocator` (so every request it causes passes the Guard),
and answers with the page and its snapshot, as ``browser_click`` does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, cast

from session_keeper._keeper.tabs.conversation_tab import KeyModifier, MouseButton
from session_keeper.mcp._codegen import call
from session_keeper.mcp._outputs import link
from session_keeper.mcp._page import ToolFailure
from session_keeper.mcp._secrets import redact_text, typed_value
from session_keeper.mcp._tools import (
    ToolContext,
    ToolOutput,
    _bool,
    _filename,
    _literal,
    _str,
    _target,
    _with_snapshot,
    page_if_changed,
)

#: The longest evaluate() result given back to the model (characters of JSON).
EVALUATE_RESULT_LIMIT = 20_000

_FIELD_TYPES = ("textbox", "checkbox", "radio", "combobox", "slider")

# What starts a function's source: ``function``, ``(a, b) =>``, ``a =>``, maybe ``async``.
_FUNCTION_SOURCE = re.compile(r"^\s*(async\s*)?(function\b|\([^()]*\)\s*=>|[A-Za-z_$][\w$]*\s*=>)")


def _as_function(source: str) -> str:
    """``source`` as the code shows it: a function as given, an expression as the arrow
    function Playwright MCP writes for it (``(1+1)`` is ``() => ((1+1))``)."""
    return source if _FUNCTION_SOURCE.match(source) else f"() => ({source})"


def _strings(args: Mapping[str, Any], name: str) -> list[str]:
    value = args.get(name)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ToolFailure(f"argument {name!r} must be a non-empty list of strings")
    return list(value)


def _code_modifiers(modifiers: list[str]) -> list[str]:
    """Modifiers as Playwright's code generator writes them: Control and Meta become the
    portable ``ControlOrMeta`` (one per key held), in the order Alt, Control, Meta, Shift."""
    held = set(modifiers)
    control = bool(held & {"Control", "ControlOrMeta"})
    keys = [("Alt", "Alt" in held), ("ControlOrMeta", control)]
    keys += [("ControlOrMeta", "Meta" in held), ("Shift", "Shift" in held)]
    return [name for name, on in keys if on]


async def click(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    button = args.get("button", "left")
    if button not in ("left", "right", "middle"):
        raise ToolFailure("argument 'button' must be 'left', 'right' or 'middle'")
    modifiers = args.get("modifiers", [])
    allowed = ("Alt", "Control", "ControlOrMeta", "Meta", "Shift")
    if not isinstance(modifiers, list) or any(m not in allowed for m in modifiers):
        raise ToolFailure(f"argument 'modifiers' must be a list of {', '.join(allowed)}")
    ref = _target(args)
    element = await ctx.page.element(ref)
    double = _bool(args, "doubleClick")
    options: dict[str, object] = {"button": button} if button != "left" else {}
    if modifiers:
        options["modifiers"] = _code_modifiers(modifiers)
    # Noted before it runs, as Playwright MCP does: a click a dialog holds up is still
    # shown in the answer that names the dialog.
    ctx.page.act(ref, "dblclick" if double else "click", options=options)
    await element.click(
        timeout_ms=ctx.page.action_timeout_ms,
        button=cast("MouseButton", button),
        modifiers=cast("list[KeyModifier]", modifiers),
        double=double,
    )
    return await _with_snapshot(ctx, complete=True)


async def press_key(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    key = _str(args, "key", required=True)
    assert key is not None
    tab = await ctx.page.tab()
    await tab.press(key)
    ctx.page.ran(call(ctx.page.language, "page.keyboard", "press", key))
    # As Playwright MCP: Enter (a submit) is waited out and shows the page after it;
    # another key shows no snapshot.
    enter = key == "Enter"
    return await _with_snapshot(ctx, complete=enter, snapshot=enter)


async def hover(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    ref = _target(args)
    element = await ctx.page.element(ref)
    await element.hover(timeout_ms=ctx.page.action_timeout_ms)
    ctx.page.act(ref, "hover")
    return await _with_snapshot(ctx)


async def select_option(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    values = _strings(args, "values")
    ref = _target(args)
    element = await ctx.page.element(ref)
    # Playwright matches each string against an option's value and its text.
    await element.select(*values, timeout_ms=ctx.page.action_timeout_ms)
    ctx.page.act(ref, "select_option", values[0] if len(values) == 1 else values)
    return await _with_snapshot(ctx)


async def fill_form(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    fields = args.get("fields")
    if not isinstance(fields, list) or not fields:
        raise ToolFailure("argument 'fields' must be a non-empty list of fields")
    checked: list[tuple[Mapping[str, Any], str, str]] = []
    for field in fields:
        if not isinstance(field, Mapping):
            raise ToolFailure("each field is an object with target, name, type and value")
        kind, value = field.get("type"), field.get("value")
        if kind not in _FIELD_TYPES or not isinstance(value, str):
            raise ToolFailure(
                f"a field's type is one of {', '.join(_FIELD_TYPES)} and its value a string"
            )
        checked.append((field, kind, value))
    # Every field is checked before the first is filled: a bad one changes nothing.
    for field, kind, value in checked:
        ref = _target(field)
        element = await ctx.page.element(ref)
        if kind in ("textbox", "slider"):
            await element.fill(
                typed_value(ctx.secrets, value), timeout_ms=ctx.page.action_timeout_ms
            )
            ctx.page.act(ref, "fill", _literal(ctx, value))
        elif kind == "checkbox":
            on = value.lower() == "true"
            await element.set_checked(on, timeout_ms=ctx.page.action_timeout_ms)
            # The code Playwright MCP writes for it: check() or uncheck().
            ctx.page.act(ref, "check" if on else "uncheck")
        elif kind == "radio":
            await element.check(timeout_ms=ctx.page.action_timeout_ms)
            ctx.page.act(ref, "check")
        else:
            await element.select(value, timeout_ms=ctx.page.action_timeout_ms)
            ctx.page.act(ref, "select_option", value)
    return await _with_snapshot(ctx)


async def evaluate(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    function = _str(args, "function", required=True)
    assert function is not None
    if args.get("target") is not None or args.get("ref") is not None:
        ref = _target(args)
        result = await (await ctx.page.element(ref)).evaluate(function)
        ctx.page.act(ref, "evaluate", _as_function(function))
    else:
        result = await (await ctx.page.tab()).evaluate(function)
        ctx.page.act(None, "evaluate", _as_function(function))
    await ctx.page.complete(ctx.settle_ms)
    shown = json.dumps(result, ensure_ascii=False, default=str, indent=2)
    filename = _filename(args)
    if filename is not None:
        # Saved whole, as Playwright MCP saves it; the model is given the link.
        path = ctx.outputs.save(
            filename, redact_text(shown, ctx.secrets).encode(), prefix="result", ext="json"
        )
        state = await ctx.page.state()
        return ToolOutput(
            text=f"### Result\n- [Evaluation result]({link(path)}){page_if_changed(ctx, state)}",
            data={"file": str(path)},
        )
    if len(shown) > EVALUATE_RESULT_LIMIT:
        shown = shown[:EVALUATE_RESULT_LIMIT] + " …(cut)"
    state = await ctx.page.state()
    return ToolOutput(
        text=f"### Result\n{shown}{page_if_changed(ctx, state)}",
        data={"result": result if len(shown) <= EVALUATE_RESULT_LIMIT else shown},
    )


async def resize(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    sizes = []
    for name in ("width", "height"):
        value = args.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise ToolFailure(f"argument {name!r} must be a whole number of pixels")
        sizes.append(int(value))
    await (await ctx.page.tab()).resize(*sizes)
    ctx.page.act(None, "set_viewport_size", {"width": sizes[0], "height": sizes[1]})
    return await _with_snapshot(ctx, snapshot=False)  # as Playwright MCP: no snapshot


async def drag(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    start = _str(args, "startTarget", required=True)
    end = _str(args, "endTarget", required=True)
    assert start is not None and end is not None
    source, target = await ctx.page.element(start), await ctx.page.element(end)
    await source.drag_to(target, timeout_ms=ctx.page.action_timeout_ms)
    ctx.page.act(start, "drag_to", ctx.page.element_code(end))
    return await _with_snapshot(ctx, complete=True)
