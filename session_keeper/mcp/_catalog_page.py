"""Catalogue entries for the page-event tools: console, network, dialogs, files, media, find.

Playwright MCP 0.0.83's names and schemas. A ``filename`` saves the result in the
server's output directory (``--output-dir``) and links it; with none it is refused.
"""

from __future__ import annotations

from typing import Any

from session_keeper.mcp._events import console_messages, find, network_request, network_requests
from session_keeper.mcp._modal import drop, emulate_media, file_upload, handle_dialog
from session_keeper.mcp._tools import ToolSpec


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def _feature(description: str, *values: str) -> dict[str, Any]:
    return {
        "description": description,
        "anyOf": [{"type": "string", "enum": list(values)}, {"type": "null"}],
    }


_PATHS = {"type": "array", "items": {"type": "string"}}


def _file(what: str) -> dict[str, Any]:
    return {
        "description": f"Filename to save the {what} to, in the server's --output-dir. If "
        "not provided, it is returned as text.",
        "type": "string",
    }


PAGE_EVENT_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="browser_console_messages",
        title="Get console messages",
        description="Returns all console messages",
        read_only=True,
        run=console_messages,
        under_modal="free",
        schema=_schema(
            {
                "level": {
                    "default": "info",
                    "description": "Level of the console messages to return. Each level "
                    'includes the messages of more severe levels. Defaults to "info".',
                    "type": "string",
                    "enum": ["error", "warning", "info", "debug"],
                },
                "all": {
                    "description": "Return all console messages since the beginning of the "
                    "session, not just since the last navigation. Defaults to false.",
                    "type": "boolean",
                },
                "filename": _file("console messages"),
            },
            ("level",),
        ),
    ),
    ToolSpec(
        name="browser_handle_dialog",
        title="Handle a dialog",
        description="Handle a dialog",
        read_only=False,
        run=handle_dialog,
        under_modal="clears",
        clears="dialog",
        schema=_schema(
            {
                "accept": {"type": "boolean", "description": "Whether to accept the dialog."},
                "promptText": {
                    "description": "The text of the prompt in case of a prompt dialog.",
                    "type": "string",
                },
            },
            ("accept",),
        ),
    ),
    ToolSpec(
        name="browser_network_requests",
        title="List network requests",
        description="Returns a numbered list of network requests since loading the page. Use "
        "browser_network_request with the number to get full details. Only this "
        "conversation's page; URLs without query values, and requests the Guard refused say "
        "by which rule.",
        read_only=True,
        run=network_requests,
        under_modal="free",
        schema=_schema(
            {
                "static": {
                    "default": False,
                    "description": "Whether to include successful static resources like "
                    "images, fonts, scripts, etc. Defaults to false.",
                    "type": "boolean",
                },
                "filter": {
                    "description": "Only return requests whose URL matches this regexp "
                    '(e.g. "/api/.*user").',
                    "type": "string",
                },
                "filename": _file("network requests"),
            },
            ("static",),
        ),
    ),
    ToolSpec(
        name="browser_network_request",
        title="Show network request details",
        description="Returns full details (headers and body) of a single network request, or "
        "a single part if `part` is set. Use the number from browser_network_requests. "
        "Cookie, authorization and token values are redacted; request bodies are not shown.",
        read_only=True,
        run=network_request,
        under_modal="free",
        schema=_schema(
            {
                "index": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 9007199254740991,
                    "description": "1-based index of the request, as printed by "
                    "browser_network_requests.",
                },
                "part": {
                    "description": "Return only this part of the request. Omit to return "
                    "full details.",
                    "type": "string",
                    "enum": [
                        "request-headers",
                        "request-body",
                        "response-headers",
                        "response-body",
                    ],
                },
                "filename": _file("result"),
            },
            ("index",),
        ),
    ),
    ToolSpec(
        name="browser_emulate_media",
        title="Emulate media features",
        description="Emulate CSS media features for the page, for example switch between the "
        "light and dark color scheme. Omitted parameters are left unchanged; null clears an "
        "override.",
        read_only=False,
        run=emulate_media,
        schema=_schema(
            {
                "colorScheme": _feature(
                    "Emulates the prefers-color-scheme media feature", "light", "dark"
                ),
                "reducedMotion": _feature(
                    "Emulates the prefers-reduced-motion media feature", "reduce", "no-preference"
                ),
                "forcedColors": _feature(
                    "Emulates the forced-colors media feature", "active", "none"
                ),
                "contrast": _feature(
                    "Emulates the prefers-contrast media feature", "more", "no-preference"
                ),
                "media": _feature("Changes the CSS media type of the page", "screen", "print"),
            }
        ),
    ),
    ToolSpec(
        name="browser_find",
        title="Find in page snapshot",
        description="Search the accessibility snapshot of the current page for text or a "
        "regular expression. Returns matching snapshot nodes with a few lines of surrounding "
        "context (like search snippets), each shown under its path from the root of the tree, "
        "which is cheaper than capturing the whole snapshot when you only need to locate an "
        "element and its ref.",
        read_only=True,
        run=find,
        schema=_schema(
            {
                "text": {
                    "description": "Plain text to search for in the page snapshot "
                    "(case-insensitive substring match). Provide either text or regex, not both.",
                    "type": "string",
                },
                "regex": {
                    "description": "Regular expression to search for in the page snapshot. "
                    "Matching is case-sensitive by default; wrap the pattern in slashes to add "
                    'flags, e.g. "/error/i" for case-insensitive. Provide either text or '
                    "regex, not both.",
                    "type": "string",
                },
                "filename": _file("result"),
            }
        ),
    ),
    ToolSpec(
        name="browser_file_upload",
        title="Upload files",
        description="Upload one or multiple files. Only files inside the server's upload "
        "directories (--upload-dir) may be given; none by default.",
        read_only=False,
        run=file_upload,
        under_modal="clears",
        clears="fileChooser",
        schema=_schema(
            {
                "paths": {
                    **_PATHS,
                    "description": "The absolute paths to the files to upload. Can be single "
                    "file or multiple files. If omitted, file chooser is cancelled.",
                }
            }
        ),
    ),
    ToolSpec(
        name="browser_drop",
        title="Drop files or data onto an element",
        description="Drop files or MIME-typed data onto an element, as if dragged from outside "
        'the page. At least one of "paths" or "data" must be provided. Files come only from '
        "the server's upload directories (--upload-dir).",
        read_only=False,
        run=drop,
        schema=_schema(
            {
                "element": {
                    "description": "Human-readable element description used to obtain "
                    "permission to interact with the element",
                    "type": "string",
                },
                "target": {
                    "type": "string",
                    "description": "Exact target element reference from the page snapshot",
                },
                "paths": {
                    **_PATHS,
                    "description": "Absolute paths to files to drop onto the element.",
                },
                "data": {
                    "description": "Data to drop, as a map of MIME type to string value (e.g. "
                    '{"text/plain": "hello", "text/uri-list": "https://example.com"}).',
                    "type": "object",
                    "propertyNames": {"type": "string"},
                    "additionalProperties": {"type": "string"},
                },
            },
            ("target",),
        ),
    ),
)
