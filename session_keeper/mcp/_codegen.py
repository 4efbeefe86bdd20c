"""The ``### Ran Playwright code`` section: each act as Playwright code, in TypeScript (as
Playwright MCP writes it by default) or Python (its ``--codegen python``).

A tool notes what it ran with :func:`call` (a method, its arguments, its options, named
in Python's spelling); this module renders it in the server's language. An element is
Playwright's own locator for it (``getByRole('button', { name: 'Submit' })``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Literal

import attrs

#: The languages the code section is written in.
Language = Literal["typescript", "python"]
LANGUAGES: tuple[Language, ...] = ("typescript", "python")


@attrs.frozen
class Expr:
    """Code that is written as it stands (a locator, an environment lookup)."""

    text: str


def secret(language: Language, name: str) -> Expr:
    """Where generated code reads a ``--secrets`` value: the environment, never the value."""
    if language == "typescript":
        return Expr(f"process.env[{_ts(name)}]")
    return Expr(f"os.environ[{json.dumps(name)}]")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _ts(value: object) -> str:
    if isinstance(value, Expr):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
        return f"'{escaped}'"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_camel(str(k))}: {_ts(v)}" for k, v in value.items())
        return f"{{ {inner} }}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(_ts(v) for v in value) + "]"
    return _ts(str(value))


def _py(value: object) -> str:
    if isinstance(value, Expr):
        return value.text
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str | int | float):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_py(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    return json.dumps(str(value))


def call(
    language: Language,
    target: str,
    method: str,
    *args: object,
    options: Mapping[str, object] | None = None,
) -> str:
    """One line: ``target.method(args, options)`` (``target`` in the same language)."""
    if language == "typescript":
        parts = [_ts(a) for a in args]
        if options:
            # Playwright MCP writes an options object one key per line.
            lines = ",\n".join(f"  {_camel(k)}: {_ts(v)}" for k, v in options.items())
            parts.append(f"{{\n{lines}\n}}")
        return f"await {target}.{_camel(method)}({', '.join(parts)});"
    parts = [_py(a) for a in args]
    parts += [f"{k}={_py(v)}" for k, v in (options or {}).items()]
    return f"{target}.{method}({', '.join(parts)})"


def wait_seconds(language: Language, seconds: float) -> str:
    """Waiting ``seconds``, as Playwright MCP writes it."""
    if language == "typescript":
        shown = int(seconds) if seconds == int(seconds) else seconds
        return f"await new Promise(f => setTimeout(f, {shown} * 1000));"
    return f"page.wait_for_timeout({round(seconds * 1000)})"


def wait_text(language: Language, text: str, state: str) -> str:
    """Waiting for ``text`` to be visible or hidden, as Playwright MCP writes it."""
    if language == "typescript":
        return f"await page.getByText({json.dumps(text)}).first().waitFor({{ state: '{state}' }});"
    return f"page.get_by_text({json.dumps(text)}).first.wait_for(state={json.dumps(state)})"


def locator(language: Language, selector: str) -> str:
    """``page.locator(selector)``: an element no better locator names."""
    return f"page.locator({_ts(selector) if language == 'typescript' else _py(selector)})"
