"""What a person's browser sends is checked before any of it reaches CDP."""

from __future__ import annotations

from typing import Any

import pytest

from session_keeper.console._live import MAX_PASTE, translate_input


def test_mouse_keys_and_paste_become_the_cdp_input_calls() -> None:
    """A click, a typed letter, Enter and a paste map to dispatchMouseEvent/KeyEvent/insertText."""
    assert translate_input(
        {"type": "mouse", "action": "mousePressed", "x": 10.5, "y": 20, "button": "left",
         "clickCount": 1}
    ) == (
        "Input.dispatchMouseEvent",
        {"type": "mousePressed", "x": 10.5, "y": 20.0, "button": "left", "clickCount": 1,
         "modifiers": 0},
    )  # fmt: skip
    method, params = translate_input(
        {"type": "key", "action": "keyDown", "key": "r", "code": "KeyR", "keyCode": 82, "text": "r"}
    ) or ("", {})
    assert method == "Input.dispatchKeyEvent"
    assert params["type"] == "keyDown" and params["text"] == "r"
    _, enter = translate_input(
        {"type": "key", "action": "keyDown", "key": "Enter", "code": "Enter", "keyCode": 13,
         "text": "\r"}
    ) or ("", {})  # fmt: skip
    assert enter["text"] == "\r" and enter["windowsVirtualKeyCode"] == 13
    _, tab = translate_input(
        {"type": "key", "action": "keyDown", "key": "Tab", "code": "Tab", "keyCode": 9}
    ) or ("", {})
    assert tab["type"] == "rawKeyDown" and "text" not in tab
    assert translate_input({"type": "paste", "text": "correct horse"}) == (
        "Input.insertText",
        {"text": "correct horse"},
    )


@pytest.mark.parametrize(
    "msg",
    [
        {"type": "mouse", "action": "mousePressed", "x": "10", "y": 5, "button": "left"},
        {"type": "mouse", "action": "mousePressed", "x": float("nan"), "y": 5},
        {"type": "mouse", "action": "mousePressed", "x": -1, "y": 5},
        {"type": "mouse", "action": "mousePressed", "x": 1e9, "y": 5},
        {"type": "mouse", "action": "dragIntercepted", "x": 1, "y": 5},
        {"type": "mouse", "action": "mousePressed", "x": 1, "y": 5, "button": "back"},
        {"type": "mouse", "action": "mousePressed", "x": True, "y": 5},
        {"type": "key", "action": "keyDown", "key": "x" * 33},
        {"type": "key", "action": "keyDown", "key": "a", "keyCode": 999},
        {"type": "key", "action": "char", "key": "a"},
        {"type": "key", "action": "keyDown", "key": "a", "text": "too long"},
        {"type": "paste", "text": ""},
        {"type": "paste", "text": "x" * (MAX_PASTE + 1)},
        {"type": "paste", "text": 42},
        {"type": "evaluate", "expression": "document.cookie"},
        {},
    ],
)
def test_malformed_or_unknown_input_is_dropped(msg: dict[str, Any]) -> None:
    """Wrong types, out-of-range numbers, unknown kinds: nothing is sent to the page."""
    assert translate_input(msg) is None
