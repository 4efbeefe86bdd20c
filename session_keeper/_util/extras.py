"""The extras: which optional part needs which packages, and the error that says so.

An optional face (the console, the MCP server, the LangGraph node, PostgreSQL, the
OpenTelemetry settings, the OS keyring) imported or built without its extra raises
:class:`~session_keeper.errors.MissingExtra`, naming the ``pip install`` to run, rather
than a bare ``No module named ...`` from deep inside.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Final

from session_keeper.errors import MissingExtra

__all__ = ["EXTRA_MODULES", "missing_modules", "needs_extra", "require_extra"]

#: Each extra's top-level modules (what ``pip install 'session-keeper[EXTRA]'`` brings).
EXTRA_MODULES: Final[Mapping[str, tuple[str, ...]]] = {
    "console": ("starlette", "uvicorn", "jinja2", "multipart", "websockets"),
    "mcp": ("mcp", "uvicorn", "PIL"),
    "langgraph": ("langgraph", "langchain_core"),
    "postgres": ("psycopg", "psycopg_pool"),
    "otel": ("opentelemetry",),
    "keyring": ("keyring",),
    "dbos": ("dbos",),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a finder refused it: not importable here
        return False
    except ValueError:  # imported already, without a spec: present
        return True


def missing_modules(extra: str) -> tuple[str, ...]:
    """The modules of ``extra`` that cannot be imported here."""
    return tuple(m for m in EXTRA_MODULES[extra] if not _installed(m))


def _error(extra: str, what: str, missing: tuple[str, ...]) -> MissingExtra:
    return MissingExtra(
        f"{what} needs the {extra} extra ({', '.join(missing)} not installed): "
        f"pip install 'session-keeper[{extra}]'",
        name=missing[0],
    )


def require_extra(extra: str, what: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise :class:`MissingExtra` for ``what`` unless ``modules`` (default: all of
    ``extra``'s) can be imported."""
    wanted = EXTRA_MODULES[extra] if modules is None else modules
    missing = tuple(m for m in wanted if not _installed(m))
    if missing:
        raise _error(extra, what, missing)


@contextmanager
def needs_extra(extra: str, what: str) -> Iterator[None]:
    """Around an optional face's imports: an :class:`ImportError` while one of ``extra``'s
    modules is missing becomes :class:`MissingExtra` (chained to it); any other passes."""
    try:
        yield
    except ImportError as exc:
        if isinstance(exc, MissingExtra):
            raise
        missing = missing_modules(extra)
        if not missing:
            raise  # something else is broken: its own error says what
        raise _error(extra, what, missing) from exc
