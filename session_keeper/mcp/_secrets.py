"""Secrets the model names but never sees (Playwright MCP's ``--secrets``).

A ``browser_type`` / ``browser_fill_form`` value that is exactly a secret's name is
typed as its value; every result, text and structured, shows ``<secret>NAME</secret>``
wherever a value would appear (a page that echoes what was typed, an error quoting it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import attrs

from session_keeper._model.grants import check_name
from session_keeper._security.credentials import Secret
from session_keeper.errors import InvalidArgumentType


def checked_secrets(secrets: Mapping[str, Secret] | None) -> dict[str, Secret]:
    """``secrets`` as a dict of names to :class:`~session_keeper.Secret`; raises
    :class:`InvalidArgumentType` / :class:`InvalidArgument` (naming the name only)."""
    if secrets is None:
        return {}
    if not isinstance(secrets, Mapping):
        raise InvalidArgumentType("secrets maps names to session_keeper.Secret values")
    for name, value in secrets.items():
        check_name(name, "a secret's name")
        if not isinstance(value, Secret):
            raise InvalidArgumentType(f"secret {name!r} must be a session_keeper.Secret")
    return dict(secrets)


def typed_value(secrets: Mapping[str, Secret], text: str) -> str:
    """What to type for ``text``: a secret's value when ``text`` is its name."""
    secret = secrets.get(text)
    return text if secret is None else secret.reveal()


def _scrub(value: Any, pairs: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for plain, shown in pairs:
            value = value.replace(plain, shown)
        return value
    if isinstance(value, Mapping):
        return {k: _scrub(v, pairs) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v, pairs) for v in value]
    return value


_Output = TypeVar("_Output")


def _pairs(secrets: Mapping[str, Secret]) -> list[tuple[str, str]]:
    # Longest first: a value that contains another is replaced whole.
    return sorted(
        ((s.reveal(), f"<secret>{name}</secret>") for name, s in secrets.items()),
        key=lambda pair: -len(pair[0]),
    )


def redact_text(text: str, secrets: Mapping[str, Secret]) -> str:
    """``text`` (what a tool writes to a file) with every secret value shown by its name."""
    return str(_scrub(text, _pairs(secrets))) if secrets else text


def redact(output: _Output, secrets: Mapping[str, Secret]) -> _Output:
    """``output`` (a tool's answer) with every secret value shown by its name."""
    if not secrets:
        return output
    pairs = _pairs(secrets)
    # A ToolOutput (attrs): its words and its JSON; the image is the page's pixels.
    text = getattr(output, "text", "")
    data = getattr(output, "data", {})
    return attrs.evolve(output, text=_scrub(text, pairs), data=_scrub(data, pairs))  # type: ignore[misc]
