"""Every program the README and the guides show runs and prints what they show."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ._guides import DOCUMENTS, ROOT, Run, matches, read_guide, run_command, write_files

GUIDES = {d: read_guide(d) for d in DOCUMENTS}
RUNS = [run for guide in GUIDES.values() for run in guide.runs]


def _param(run: Run) -> object:
    marks = [getattr(pytest.mark, m) for m in run.marks]
    return pytest.param(run, id=f"{run.document}:{run.line}", marks=marks)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("run", [_param(r) for r in RUNS])
def test_a_documented_program_prints_the_output_its_page_shows(run: Run, tmp_path: Path) -> None:
    """The page's files, written to an empty directory and run, print what it shows, and
    no traceback on stderr."""
    write_files(GUIDES[run.document], tmp_path)
    # This checkout's package and command, whatever the interpreter has installed (the
    # wheel test runs the installed ones).
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    command_shim = bin_dir / "session-keeper"
    command_shim.write_text(
        f"#!{sys.executable}\nimport sys\nfrom session_keeper.cli import main\nsys.exit(main())\n"
    )
    command_shim.chmod(0o755)
    for command in run.commands:
        done = run_command(
            command, python=sys.executable, cwd=tmp_path, env=env, bin_dirs=[bin_dir]
        )
        got = done.stdout.splitlines()
        assert done.returncode == 0, f"{' '.join(command.argv)} failed:\n{done.stderr}"
        # A program that works but prints a traceback (a library's shutdown) is not what
        # the page shows either.
        assert "Traceback" not in done.stderr, f"{' '.join(command.argv)}:\n{done.stderr}"
        assert matches(command.expected, got), (
            f"{' '.join(command.argv)} printed:\n{done.stdout}\nthe page shows:\n"
            + "\n".join(command.expected)
        )


def test_every_guide_runs_a_program() -> None:
    """A guide with no run block would not be tested at all: each has at least one."""
    assert {d for d, g in GUIDES.items() if not g.runs} == set()
    assert len(GUIDES) >= 7  # the README and the six guides


def test_the_readme_quick_start_is_the_shipped_example() -> None:
    """What the README shows is byte for byte what ``python -m session_keeper.examples.quickstart``
    runs, so the two cannot drift apart."""
    shipped = (ROOT / "session_keeper" / "examples" / "quickstart.py").read_text(encoding="utf-8")
    assert GUIDES["README.md"].files["quickstart.py"] == shipped


def test_the_output_matcher_can_fail() -> None:
    """``...`` stands for any lines; anything else must be equal, line for line."""
    assert matches(["a", "...", "z"], ["a", "b", "c", "z"])
    assert matches(["a", "..."], ["a"])
    assert not matches(["a", "z"], ["a", "b", "z"])
    assert not matches(["a"], ["a", "b"])
    assert not matches(["a", "...", "z"], ["a", "b"])
    assert matches(["5 passed in ..."], ["5 passed in 0.12s"])
    assert not matches(["5 passed in ..."], ["4 passed in 0.12s"])
