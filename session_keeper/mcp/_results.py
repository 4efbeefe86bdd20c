"""How a tool's output becomes an MCP result: one text block of ``### `` sections, as
Playwright MCP answers, with the turn's restart facts first and the same words in
``structuredContent`` for clients that give the model only that."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import mcp_types as types

from session_keeper._model.facts import TurnFacts
from session_keeper.mcp._banner import banner
from session_keeper.mcp._tools import ToolOutput


def with_code(text: str, code: Sequence[str], language: str) -> str:
    """``text`` with a ``### Ran Playwright code`` section after its Error and Result
    sections, where Playwright MCP puts it."""
    fence = "js" if language == "typescript" else "python"
    section = f"### Ran Playwright code\n```{fence}\n" + "\n".join(code) + "\n```"
    chunks = text.split("\n### ")
    titles = [chunk.removeprefix("### ").split("\n", 1)[0] for chunk in chunks]
    at = next((i for i, t in enumerate(titles) if t not in ("Error", "Result")), len(chunks))
    if at == 0:
        return f"{section}\n{text}"
    head, tail = "\n### ".join(chunks[:at]), "\n### ".join(chunks[at:])
    return f"{head}\n{section}" + (f"\n### {tail}" if tail else "")


def result(
    facts: TurnFacts | None, output: ToolOutput, *, lost_pages: Sequence[str] = ()
) -> types.CallToolResult:
    # One text block of "### " sections, as Playwright MCP answers (clients that parse
    # its answers read the first block): the restart banner first, an error's words
    # under "### Error".
    words = output.text
    if output.is_error and not words.startswith("### "):
        words = f"### Error\n{words}"
    told = banner(facts) if facts is not None else ""
    if facts is not None and lost_pages:
        told += "\n- Lost: your other tabs, not reopened: " + ", ".join(
            f"{i} ({url})" for i, url in enumerate(lost_pages, start=1)
        )
    if facts is not None:
        words = f"{told}\n{words}"
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=words)]
    if output.image is not None:
        data, mime = output.image
        content.append(
            types.ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=mime)
        )
    restart = facts.to_dict() if facts is not None else None
    if restart is not None and lost_pages:
        restart["lost_pages"] = list(lost_pages)
    structured: dict[str, Any] = {"restart": restart, **output.data}
    # Some clients hand the model only structuredContent: it carries the words too.
    if facts is not None:
        structured.setdefault("restart_notice", told)
    if output.is_error:
        structured.setdefault("error", "error")
        structured.setdefault("message", output.text)
    return types.CallToolResult(
        content=content, structured_content=structured, is_error=output.is_error
    )
