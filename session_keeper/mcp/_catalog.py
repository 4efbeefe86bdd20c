"""The tool list the server offers: names, titles, descriptions and input schemas.

Playwright MCP's names, titles and argument names where the meaning is the same.
"""

from __future__ import annotations

from typing import Any

from session_keeper.mcp._catalog_page import PAGE_EVENT_TOOLS
from session_keeper.mcp._interact import (
    click,
    drag,
    evaluate,
    fill_form,
    hover,
    press_key,
    resize,
    select_option,
)
from session_keeper.mcp._screenshot import screenshot
from session_keeper.mcp._tools import (
    ToolSpec,
    close,
    logins,
    navigate,
    navigate_back,
    record_login,
    request_access,
    request_sign_in,
    snapshot,
    status,
    tabs,
    type_text,
    wait_for,
)


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


_ELEMENT = {
    "type": "string",
    "description": "Human-readable element description used to obtain permission to interact",
}
_TARGET = {
    "type": "string",
    "description": "Exact target element reference from the page snapshot (e.g. e3), or a "
    "unique element selector",
}

#: Element and keyboard tools (Playwright MCP's schemas).
INTERACT_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="browser_press_key",
        title="Press a key",
        description="Press a key on the keyboard",
        read_only=False,
        run=press_key,
        schema=_schema(
            {
                "key": {
                    "type": "string",
                    "description": "Name of the key to press or a character to generate, "
                    "such as `ArrowLeft` or `a`",
                }
            },
            ("key",),
        ),
    ),
    ToolSpec(
        name="browser_hover",
        title="Hover mouse",
        description="Hover over element on page",
        read_only=False,
        run=hover,
        schema=_schema({"element": _ELEMENT, "target": _TARGET}, ("target",)),
    ),
    ToolSpec(
        name="browser_select_option",
        title="Select option",
        description="Select an option in a dropdown",
        read_only=False,
        run=select_option,
        schema=_schema(
            {
                "element": _ELEMENT,
                "target": _TARGET,
                "values": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Array of values to select in the dropdown. This can be a "
                    "single value or multiple values.",
                },
            },
            ("target", "values"),
        ),
    ),
    ToolSpec(
        name="browser_fill_form",
        title="Fill form",
        description="Fill multiple form fields",
        read_only=False,
        run=fill_form,
        schema=_schema(
            {
                "fields": {
                    "type": "array",
                    "description": "Fields to fill in",
                    "items": {
                        "type": "object",
                        "properties": {
                            "element": _ELEMENT,
                            "target": _TARGET,
                            "name": {"type": "string", "description": "Human-readable field name"},
                            "type": {
                                "type": "string",
                                "enum": ["textbox", "checkbox", "radio", "combobox", "slider"],
                                "description": "Type of the field",
                            },
                            "value": {
                                "type": "string",
                                "description": "Value to fill in the field. If the field is a "
                                "checkbox, the value should be `true` or `false`. If the field "
                                "is a combobox, the value should be the text of the option.",
                            },
                        },
                        "required": ["target", "name", "type", "value"],
                        "additionalProperties": False,
                    },
                }
            },
            ("fields",),
        ),
    ),
    ToolSpec(
        name="browser_evaluate",
        title="Evaluate JavaScript",
        description="Evaluate JavaScript expression on page or element (in this "
        "conversation's page; its requests pass the same grants)",
        read_only=False,
        run=evaluate,
        schema=_schema(
            {
                "element": _ELEMENT,
                "target": _TARGET,
                "function": {
                    "type": "string",
                    "description": "() => { /* code */ } or (element) => { /* code */ } when "
                    "element is provided",
                },
                "filename": {
                    "type": "string",
                    "description": "Filename to save the result to, in the server's "
                    "--output-dir. If not provided, the result is returned as text.",
                },
            },
            ("function",),
        ),
    ),
    ToolSpec(
        name="browser_resize",
        title="Resize browser window",
        description="Resize the browser window",
        read_only=False,
        run=resize,
        schema=_schema(
            {
                "width": {"type": "number", "description": "Width of the browser window"},
                "height": {"type": "number", "description": "Height of the browser window"},
            },
            ("width", "height"),
        ),
    ),
    ToolSpec(
        name="browser_drag",
        title="Drag mouse",
        description="Perform drag and drop between two elements",
        read_only=False,
        run=drag,
        schema=_schema(
            {
                "startElement": _ELEMENT,
                "startTarget": _TARGET,
                "endElement": _ELEMENT,
                "endTarget": _TARGET,
            },
            ("startTarget", "endTarget"),
        ),
    ),
)

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="browser_navigate",
        title="Navigate to a URL",
        description="Navigate to a URL",
        read_only=False,
        run=navigate,
        schema=_schema(
            {"url": {"type": "string", "description": "The URL to navigate to"}}, ("url",)
        ),
    ),
    ToolSpec(
        name="browser_navigate_back",
        title="Go back",
        description="Go back to the previous page in the history",
        read_only=False,
        run=navigate_back,
        schema=_schema({}),
    ),
    ToolSpec(
        name="browser_snapshot",
        title="Page snapshot",
        description="Capture accessibility snapshot of the current page, this is better "
        "than screenshot",
        read_only=True,
        run=snapshot,
        schema=_schema(
            {
                "target": {
                    **_TARGET,
                    "description": "Exact target element reference from "
                    "the page snapshot: snapshot only that element",
                },
                "filename": {
                    "type": "string",
                    "description": "Save snapshot to markdown "
                    "file instead of returning it in the response (needs the "
                    "server's --output-dir).",
                },
                "depth": {"type": "number", "description": "Limit the depth of the snapshot tree"},
                "boxes": {
                    "type": "boolean",
                    "description": "Include each element's "
                    "bounding box as [box=x,y,width,height] in the snapshot",
                },
            }
        ),
    ),
    ToolSpec(
        name="browser_click",
        title="Click",
        description="Perform click on a web page",
        read_only=False,
        run=click,
        schema=_schema(
            {
                "element": _ELEMENT,
                "target": _TARGET,
                "doubleClick": {
                    "type": "boolean",
                    "description": "Whether to perform a double click instead of a single click",
                },
                "button": {
                    "type": "string",
                    "enum": ["left", "right", "middle"],
                    "description": "Button to click, defaults to left",
                },
                "modifiers": {
                    "type": "array",
                    "items": {
                        "type": "string",
                        "enum": ["Alt", "Control", "ControlOrMeta", "Meta", "Shift"],
                    },
                    "description": "Modifier keys to press",
                },
            },
            ("target",),
        ),
    ),
    *INTERACT_TOOLS,
    *PAGE_EVENT_TOOLS,
    ToolSpec(
        name="browser_type",
        title="Type text",
        description="Type text into editable element",
        read_only=False,
        run=type_text,
        schema=_schema(
            {
                "element": _ELEMENT,
                "target": _TARGET,
                "text": {"type": "string", "description": "Text to type"},
                "submit": {"type": "boolean", "description": "Press Enter after typing"},
                "slowly": {"type": "boolean", "description": "Type one character at a time"},
            },
            ("target", "text"),
        ),
    ),
    ToolSpec(
        name="browser_wait_for",
        title="Wait for",
        description="Wait for text to appear or disappear or a specified time to pass",
        read_only=False,
        run=wait_for,
        schema=_schema(
            {
                "time": {"type": "number", "description": "Seconds to wait"},
                "text": {"type": "string", "description": "Text to wait for"},
                "textGone": {"type": "string", "description": "Text to wait for to disappear"},
            }
        ),
    ),
    ToolSpec(
        name="browser_take_screenshot",
        title="Take a screenshot",
        description="Take a screenshot of the current page. You can't perform actions "
        "based on the screenshot, use browser_snapshot for actions.",
        read_only=True,
        run=screenshot,
        schema=_schema(
            {
                "type": {
                    "type": "string",
                    "enum": ["png", "jpeg", "webp"],
                    "description": "Image format; from the filename's extension, else png",
                },
                "filename": {
                    "type": "string",
                    "description": "File name to save the "
                    "screenshot to, in the server's --output-dir",
                },
                "element": _ELEMENT,
                "target": {
                    **_TARGET,
                    "description": "Exact target element reference from "
                    "the page snapshot: a screenshot of that element",
                },
                "fullPage": {
                    "type": "boolean",
                    "description": "The full scrollable page, instead of the visible viewport",
                },
                "scale": {
                    "type": "string",
                    "enum": ["css", "device"],
                    "default": "css",
                    "description": "css: one image pixel per CSS pixel (smaller, the same on "
                    "every screen); device: one per device pixel (sharper with "
                    "--device-scale-factor above 1)",
                },
            }
        ),
    ),
    ToolSpec(
        name="browser_tabs",
        title="Manage tabs",
        description="List, create, close, or select a browser tab: this conversation's "
        "tab (0), the tabs it opened and the popups its pages opened. Other "
        "conversations' tabs are never listed.",
        read_only=False,
        run=tabs,
        schema=_schema(
            {
                "action": {
                    "type": "string",
                    "enum": ["list", "new", "close", "select"],
                    "description": "Operation to perform",
                },
                "index": {
                    "type": "number",
                    "description": "Tab index, used for close/select. If omitted for close, "
                    "current tab is closed.",
                },
                "url": {
                    "type": "string",
                    "description": "URL to navigate to in the new tab, used for new.",
                },
            },
            ("action",),
        ),
    ),
    ToolSpec(
        name="browser_close",
        title="Close browser",
        description="Close the page",
        read_only=False,
        run=close,
        under_modal="free",
        schema=_schema({}),
    ),
    ToolSpec(
        name="browser_status",
        title="Browser status",
        description="Restart facts, this conversation's tab, and the logins it may use",
        read_only=True,
        run=status,
        under_modal="free",
        schema=_schema({}),
    ),
    ToolSpec(
        name="browser_logins",
        title="Logins",
        description="Which sites is this browser signed in to, by whom, and may this "
        "conversation use them (read / write)",
        read_only=True,
        run=logins,
        under_modal="free",
        schema=_schema({}),
    ),
    ToolSpec(
        name="browser_request_access",
        title="Request access to a login",
        description="Ask for one use of another conversation's login. The request stays "
        "pending until the login's owner (in its own MCP client) or a person (console or "
        "application) approves it; this client cannot approve it",
        read_only=False,
        run=request_access,
        under_modal="free",
        schema=_schema(
            {
                "site": {"type": "string", "description": "e.g. billing.example"},
                "action": {"type": "string", "enum": ["read", "write"]},
                "reason": {"type": "string", "description": "Why, for the person"},
            },
            ("site",),
        ),
    ),
    ToolSpec(
        name="browser_request_sign_in",
        title="Ask a person to sign in",
        description="Hand the person a one-time link to a sign-in page of this conversation "
        "(one you cannot see or reach), where they sign in to a site themselves (you never "
        "see or type the password); the login is recorded for this conversation when they "
        "press Done, and your tab moves to the page they signed in to. On a server whose "
        "browser window a person sits at (headed, no console), the sign-in page opens in "
        "front in that window instead; call browser_record_login when they are done",
        read_only=False,
        run=request_sign_in,
        schema=_schema(
            {
                "site": {"type": "string", "description": "e.g. billing.example"},
                "url": {"type": "string", "description": "The sign-in page to open first"},
            },
            ("site",),
        ),
    ),
    ToolSpec(
        name="browser_record_login",
        title="Record a login",
        description="After a person signed in (on this conversation's tab, or on the "
        "sign-in page browser_request_sign_in opened in the window), record that this "
        "conversation owns that site's login; a sign-in page closes and your tab moves to "
        "the page they signed in to",
        read_only=False,
        run=record_login,
        under_modal="free",
        schema=_schema({"site": {"type": "string"}, "account": {"type": "string"}}, ("site",)),
    ),
)
