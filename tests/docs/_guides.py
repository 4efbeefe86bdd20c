"""What a guide's programs are, read from its Markdown, and how to run one as a user would.

A guide (or the README) names its files with titled fenced blocks (```python
title="quickstart.py"```, ```json title="claude_desktop_config.json"```) and shows a run
as a ``console`` block right after a ``<!-- run -->`` comment:

    <!-- run: chromium postgres -->
    ```console
    $ python quickstart.py
    what it prints
    ```

The words after ``run:`` are the pytest markers the run needs. Every titled block is
written into one empty directory, each ``$ python FILE ARGS`` line runs there, and its
standard output must be the lines that follow it (a line ``...`` stands for any lines,
a ``...`` inside a line for any text).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[2]

#: The documents whose programs are run: the README and every guide.
DOCUMENTS = (
    "README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs" / "guides").glob("*.md")),
)

_FENCE = re.compile(r"^(?P<fence>```+)(?P<info>[^`\n]*)$")
_TITLE = re.compile(r'title="(?P<title>[^"]+)"')
_RUN = re.compile(r"^<!-- run(?::(?P<marks>[^>]*))? -->$")


@attrs.frozen(kw_only=True)
class Command:
    """One ``$ python FILE ARGS`` line of a run block and the output shown after it."""

    argv: tuple[str, ...]
    expected: tuple[str, ...]


@attrs.frozen(kw_only=True)
class Run:
    """A ``<!-- run -->`` console block: its commands, the markers it needs, where it is."""

    document: str
    line: int
    marks: tuple[str, ...]
    commands: tuple[Command, ...]


@attrs.frozen(kw_only=True)
class Guide:
    """A document's titled files and its runs."""

    document: str
    files: Mapping[str, str]
    runs: tuple[Run, ...]


def read_guide(document: str) -> Guide:
    """Parse ``document`` (a path relative to the repository root)."""
    lines = (ROOT / document).read_text(encoding="utf-8").splitlines()
    files: dict[str, str] = {}
    runs: list[Run] = []
    i = 0
    pending_run: tuple[str, ...] | None = None
    while i < len(lines):
        marker = _RUN.match(lines[i].strip())
        if marker is not None:
            pending_run = tuple((marker.group("marks") or "").split())
            i += 1
            continue
        fence = _FENCE.match(lines[i])
        if fence is None:
            if lines[i].strip():
                pending_run = None  # a run marker belongs to the block right after it
            i += 1
            continue
        start = i
        close = fence.group("fence")
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i] != close:
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"{document}:{start + 1}: unclosed code block")
        i += 1
        info = fence.group("info")
        title = _TITLE.search(info)
        if title is not None:
            name = title.group("title")
            if name in files:
                raise ValueError(f"{document}:{start + 1}: a second block titled {name}")
            files[name] = "\n".join(body) + "\n"
        if pending_run is not None:
            if not info.strip().startswith("console"):
                raise ValueError(f"{document}:{start + 1}: <!-- run --> before a non-console block")
            runs.append(
                Run(document=document, line=start + 1, marks=pending_run, commands=_commands(body))
            )
            pending_run = None
    return Guide(document=document, files=files, runs=tuple(runs))


def _commands(body: Sequence[str]) -> tuple[Command, ...]:
    commands: list[Command] = []
    argv: list[str] | None = None
    shown: list[str] = []
    for line in [*body, "$ "]:
        if line.startswith("$ "):
            if argv is not None:
                commands.append(Command(argv=tuple(argv), expected=tuple(shown)))
            argv, shown = shlex.split(line[2:]), []
        elif argv is None:
            raise ValueError(f"output before any command: {line!r}")
        else:
            shown.append(line.rstrip())
    for command in commands:
        if command.argv[0] != "python" or len(command.argv) < 2:
            raise ValueError(f"a run runs `python ...`, not {shlex.join(command.argv)}")
    return tuple(commands)


def write_files(guide: Guide, where: Path) -> None:
    """Write every titled block of ``guide`` under ``where`` (sub-directories made)."""
    for name, text in guide.files.items():
        path = where / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def matches(expected: Sequence[str], got: Sequence[str]) -> bool:
    """Whether ``got`` is ``expected`` line for line, ``...`` standing for any lines."""
    if not expected:
        return not got
    head, rest = expected[0], expected[1:]
    if head == "...":
        return any(matches(rest, got[k:]) for k in range(len(got) + 1))
    return bool(got) and _line_matches(head, got[0]) and matches(rest, got[1:])


def _line_matches(expected: str, got: str) -> bool:
    """Equal, or equal around the ``...`` inside the line (a time, a port)."""
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, got) is not None


def run_command(
    command: Command,
    *,
    python: str,
    cwd: Path,
    env: Mapping[str, str],
    bin_dirs: Sequence[Path] = (),
    timeout: float = 150,
) -> subprocess.CompletedProcess[str]:
    """Run one ``$ python FILE ARGS`` line with ``python``, in ``cwd``; ``bin_dirs`` and
    then ``python``'s own directory come first on ``PATH`` (where ``session-keeper`` is)."""
    first = [str(d) for d in bin_dirs] + [str(Path(python).parent)]
    full = {**env, "PATH": os.pathsep.join([*first, env.get("PATH", "")])}
    return subprocess.run(
        [python, *command.argv[1:]],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
