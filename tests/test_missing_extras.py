"""Each optional face, imported or built without its extra, names the extra to install.

Run in a fresh interpreter where the extra's packages cannot be imported: hidden by a
``sys.meta_path`` finder that refuses them, or by ``sys.modules[name] = None`` (Python's
own "not importable" marker). The real import machinery does the rest.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Hides ``HIDDEN`` (top-level names) from every import, then runs ``CODE``; prints what
#: the face raised.
_PROGRAM = """
import importlib.abc, json, sys
HIDDEN, HOW, CODE = {hidden!r}, {how!r}, {code!r}

class Uninstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

if HOW == "finder":
    sys.meta_path.insert(0, Uninstalled())
else:
    for name in HIDDEN:
        sys.modules[name] = None
try:
    exec(CODE)
except ImportError as exc:
    print(json.dumps({{"types": [t.__name__ for t in type(exc).__mro__], "message": str(exc),
                      "name": exc.name}}))
else:
    print(json.dumps(None))
"""

CASES = [
    ("console", ["uvicorn"], "from session_keeper.console import Console"),
    ("console", ["starlette"], "from session_keeper.console import Console"),
    ("console", ["jinja2"], "from session_keeper.console import Console"),
    ("mcp", ["mcp"], "from session_keeper.mcp import KeeperMCP"),
    ("mcp", ["PIL"], "from session_keeper.mcp import KeeperMCP"),
    ("langgraph", ["langgraph"], "from session_keeper.integrations.langgraph import browser_node"),
    (
        "langgraph",
        ["langchain_core"],
        "from session_keeper.integrations.langgraph import browser_node",
    ),
    (
        "postgres",
        ["psycopg", "psycopg_pool"],
        "from session_keeper.stores import PostgresStore\nPostgresStore('postgresql://127.0.0.1/x')",
    ),
    (
        "otel",
        ["opentelemetry"],
        "from session_keeper import Telemetry\nTelemetry(tracer_provider=object())",
    ),
    ("dbos", ["dbos"], "from session_keeper.integrations.dbos import WorkflowBrowser"),
    (
        "keyring",
        ["keyring"],
        "from session_keeper.security import OsKeyringCredentials\nOsKeyringCredentials()",
    ),
]


def _run(hidden: list[str], how: str, code: str) -> dict[str, object] | None:
    program = _PROGRAM.format(hidden=hidden, how=how, code=code)
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] | None = json.loads(done.stdout.splitlines()[-1])
    return result


#: Each case hidden by the finder; two also by ``sys.modules`` (a fresh interpreter each).
RUNS = [pytest.param(*c, "finder", id=f"{c[0]}-{c[1][0]}") for c in CASES] + [
    pytest.param(*c, "sys.modules", id=f"{c[0]}-{c[1][0]}-sys.modules")
    for c in (CASES[0], CASES[7])
]


@pytest.mark.parametrize(("extra", "hidden", "code", "how"), RUNS)
def test_an_optional_face_without_its_extra_names_the_pip_install(
    extra: str, hidden: list[str], code: str, how: str
) -> None:
    """Importing (or building) the face raises a ModuleNotFoundError (MissingExtra) whose
    message names the missing module and ``pip install 'session-keeper[EXTRA]'``."""
    raised = _run(hidden, how, code)
    assert raised is not None, "the face was usable without its extra"
    assert "ModuleNotFoundError" in raised["types"]  # type: ignore[operator]
    assert "MissingExtra" in raised["types"]  # type: ignore[operator]
    message = str(raised["message"])
    assert f"pip install 'session-keeper[{extra}]'" in message
    assert hidden[0] in message and raised["name"] == hidden[0]


def test_every_face_imports_with_its_extras_installed() -> None:
    """With nothing hidden, the same statements run (the check refuses only a missing extra)."""
    for _, _, code in CASES:
        assert _run([], "finder", code) is None, code
