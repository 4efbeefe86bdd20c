"""What the conversation's page said and fetched, and searching its snapshot.

``browser_console_messages``, ``browser_network_requests``, ``browser_network_request``
and ``browser_find``, with Playwright MCP's arguments and result sections. They read
only the current tab of the calling conversation (its :class:`PageWatch`): another
conversation's console and requests are never in reach. Requests are shown redacted
(see :mod:`session_keeper._keeper.tabs.page_watch`) and say when the Guard refused one and
by which rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, cast

from session_keeper._keeper.tabs.page_watch import ConsoleLevel, SeenRequest
from session_keeper.mcp._outputs import link
from session_keeper.mcp._page import ToolFailure
from session_keeper.mcp._secrets import redact_text
from session_keeper.mcp._tools import ToolContext, ToolOutput, _bool, _filename, _str

#: The longest response body shown (characters).
BODY_LIMIT = 20_000
_PARTS = ("request-headers", "request-body", "response-headers", "response-body")
_CONTEXT_LINES = 3


def _text_or_file(
    ctx: ToolContext,
    args: Mapping[str, Any],
    output: ToolOutput,
    *,
    title: str,
    prefix: str,
    ext: str,
) -> ToolOutput:
    """``output`` as it is, or, given a ``filename``, its text saved under that name in
    the output directory (no ``--secrets`` value written) and linked, as Playwright MCP
    saves a result: ``- [Console](console.log)``."""
    filename = _filename(args)
    if filename is None:
        return output
    body = output.text.split("\n", 1)[1] if output.text.startswith("### ") else output.text
    path = ctx.outputs.save(
        filename, redact_text(body, ctx.secrets).encode(), prefix=prefix, ext=ext
    )
    return ToolOutput(
        text=f"### Result\n- [{title}]({link(path)})", data={**output.data, "file": str(path)}
    )


async def console_messages(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    level = args.get("level", "info")
    if level not in ("error", "warning", "info", "debug"):
        raise ToolFailure("argument 'level' must be one of error, warning, info, debug")
    _filename(args)  # a bad one is refused before anything is read
    every = _bool(args, "all")
    watch = await ctx.page.watch()
    total, errors, warnings = watch.console_counts(all=every)
    messages = watch.console(cast("ConsoleLevel", level), all=every)
    header = [f"Total messages: {total} (Errors: {errors}, Warnings: {warnings})"]
    if len(messages) != total:
        header.append(f'Returning {len(messages)} messages for level "{level}"')
    lines = [m.render() for m in messages]
    listed = ToolOutput(
        text="### Result\n" + "\n".join([*header, "", *lines]),
        data={
            "total": total,
            "errors": errors,
            "warnings": warnings,
            "messages": [
                {"type": m.type, "level": m.level, "text": m.text, "url": m.url, "line": m.line}
                for m in messages
            ],
        },
    )
    return _text_or_file(ctx, args, listed, title="Console", prefix="console", ext="log")


def _guard_note(r: SeenRequest) -> str:
    b = r.blocked
    return "" if b is None else f" (refused by the Guard, rule {b.rule}: {b.reason})"


def _line(r: SeenRequest) -> str:
    line = f"[{r.method}] {r.url}"
    if r.status is not None:
        line += f" => [{r.status}] {r.status_text}".rstrip()
    elif r.failure is not None:
        line += f" => [FAILED] {r.failure}"
    return line + _guard_note(r)


def _request_data(r: SeenRequest) -> dict[str, Any]:
    return {
        "index": r.number,
        "method": r.method,
        "url": r.url,
        "resource_type": r.resource_type,
        "status": r.status,
        "failure": r.failure,
        "blocked": None if r.blocked is None else r.blocked.to_data(),
    }


def _regex(source: str, name: str) -> Callable[[str], bool]:
    # Playwright MCP's "/pattern/flags" form; plain text is a pattern as it stands.
    literal = re.fullmatch(r"/(.*)/([a-z]*)", source, re.DOTALL)
    pattern, flags = (literal.group(1), literal.group(2)) if literal else (source, "")
    bits = 0
    for flag in flags.replace("g", ""):
        bits |= {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}.get(flag, 0)
    try:
        compiled = re.compile(pattern, bits)
    except re.error as exc:
        raise ToolFailure(f"argument {name!r} is not a valid regular expression: {exc}") from None
    return lambda text: compiled.search(text) is not None


async def network_requests(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    _filename(args)
    static = _bool(args, "static")
    pattern = _str(args, "filter")
    matches = _regex(pattern, "filter") if pattern is not None else None
    watch = await ctx.page.watch()
    shown: list[SeenRequest] = []
    hidden = 0
    for r in watch.requests():
        if not static and not r.is_fetch and r.succeeded:
            hidden += 1
            continue
        if matches is not None and not matches(r.url):
            continue
        shown.append(r)
    lines = [f"{r.number}. {_line(r)}" for r in shown]
    if hidden:
        them = "it" if hidden == 1 else "them"
        lines.append(
            f"\nNote: {hidden} static request{'' if hidden == 1 else 's'} not shown, run with "
            f'"static" option to see {them}.'
        )
    listed = ToolOutput(
        text="### Network\n" + "\n".join(lines),
        data={"requests": [_request_data(r) for r in shown], "hidden_static": hidden},
    )
    return _text_or_file(ctx, args, listed, title="Network", prefix="network", ext="log")


def _headers(title: str, headers: tuple[tuple[str, str], ...]) -> list[str]:
    return ["", f"  {title}", *(f"    {k}: {v}" for k, v in headers)] if headers else []


async def network_request(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    index = args.get("index")
    if isinstance(index, bool) or not isinstance(index, int) or index < 1:
        raise ToolFailure("argument 'index' must be a whole number from 1")
    part = args.get("part")
    if part is not None and part not in _PARTS:
        raise ToolFailure(f"argument 'part' must be one of {', '.join(_PARTS)}")
    _filename(args)
    watch = await ctx.page.watch()
    if not any(x.number == index for x in watch.requests()):
        raise ToolFailure(
            f"Request #{index} not found. Use browser_network_requests to see available indexes."
        )
    r = await watch.request(index)
    data = _request_data(r)
    data.update(request_headers=dict(r.request_headers), response_headers=dict(r.response_headers))
    body_note = "(not shown: a request body may carry a password or token)"
    if part == "request-headers":
        text = "### Request headers\n" + "\n".join(f"{k}: {v}" for k, v in r.request_headers)
    elif part == "response-headers":
        text = "### Response headers\n" + "\n".join(f"{k}: {v}" for k, v in r.response_headers)
    elif part == "request-body":
        text = f"### Request body\n{body_note if r.has_body else '(none)'}"
    elif part == "response-body":
        body = await watch.response_text(index, limit=BODY_LIMIT)
        data["response_body"] = body
        shown = (
            "(none: not text, not read by the page, or no longer held by the browser)"
            if body is None
            else body
        )
        text = f"### Response body\n{shown}"
    else:
        lines = [f"#{index} [{r.method}] {r.url}", "", "  General"]
        if r.status is not None:
            lines.append(f"    status:    [{r.status}] {r.status_text}".rstrip())
        elif r.failure is not None:
            lines.append(f"    status:    [FAILED] {r.failure}")
        lines.append(f"    type:      {r.resource_type}")
        if r.blocked is not None:
            lines.append(f"    guard:     refused, rule {r.blocked.rule}: {r.blocked.reason}")
        lines += _headers("Request headers", r.request_headers)
        lines += _headers("Response headers", r.response_headers)
        if r.has_body:
            lines += ["", f"  Request body {body_note}"]
        if r.status is not None:
            lines += ["", 'Call browser_network_request with part="response-body" to read it.']
        text = "### Request\n" + "\n".join(lines)
    title = text.split("\n", 1)[0].removeprefix("### ")
    kind = "request" if part in (None, "request-headers", "request-body") else "response"
    ext = "log" if part is None else "txt"
    details = ToolOutput(text=text, data=data)
    return _text_or_file(ctx, args, details, title=title, prefix=kind, ext=ext)


def _ancestors(lines: list[str], indents: list[int], index: int) -> list[int]:
    out: list[int] = []
    indent = indents[index]
    for i in range(index - 1, -1, -1):
        if indent <= 0:
            break
        if lines[i].strip() and indents[i] < indent:
            out.append(i)
            indent = indents[i]
    return out[::-1]


def find_in_snapshot(snapshot: str, matches: Callable[[str], bool]) -> tuple[int, list[str]]:
    """How many snapshot lines match, and Playwright MCP's snippets of them: each match
    with :data:`_CONTEXT_LINES` lines around it, under its path from the root."""
    lines = snapshot.split("\n")
    indents = [len(x) - len(x.lstrip()) for x in lines]
    hits = [i for i, x in enumerate(lines) if matches(x)]
    windows: list[list[int]] = []
    for i in hits:
        start, end = max(0, i - _CONTEXT_LINES), min(len(lines) - 1, i + _CONTEXT_LINES)
        if windows and start <= windows[-1][1] + 1:
            windows[-1][1] = max(windows[-1][1], end)
        else:
            windows.append([start, end])
    on_path = set(hits)
    for i in hits:
        on_path.update(_ancestors(lines, indents, i))
    snippets = []
    for start, end in windows:
        indices = [*_ancestors(lines, indents, start), *range(start, end + 1)]
        out: list[str] = []
        for n, index in enumerate(indices):
            prev = indices[n - 1] if n else None
            gap = prev is not None and index > prev + 1
            if gap and index not in on_path and prev not in on_path:
                out.append(" " * indents[index] + "...")
            out.append(lines[index])
        snippets.append("\n".join(out))
    return len(hits), snippets


async def find(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    text, regex = _str(args, "text"), _str(args, "regex")
    _filename(args)
    if text is None and regex is None:
        raise ToolFailure('Provide either "text" or "regex" to search for.')
    if text is not None and regex is not None:
        raise ToolFailure('Provide only one of "text" or "regex", not both.')
    if regex is not None:
        # Shown as a JavaScript regex literal, as Playwright MCP shows it.
        shown = regex if re.fullmatch(r"/.*/[a-z]*", regex, re.DOTALL) else f"/{regex}/"
        matches, query = _regex(regex, "regex"), shown
    else:
        assert text is not None
        needle, query = text.lower(), f'"{text}"'
        matches = lambda line: needle in line.lower()  # noqa: E731
    snapshot = await ctx.page.snapshot()
    ctx.page.seen()
    count, snippets = find_in_snapshot(snapshot, matches)
    if not count:
        found = f"No matches found for {query}."
    else:
        word = "match" if count == 1 else "matches"
        found = f"Found {count} {word} for {query}:\n\n" + "\n\n----\n\n".join(snippets)
    result = ToolOutput(text=f"### Result\n{found}", data={"matches": count, "snippets": snippets})
    return _text_or_file(ctx, args, result, title="Find", prefix="find", ext="txt")
