"""From ``pip install`` to the documented programs, as a new user gets them: the wheel built
from this checkout, installed with each guide's own ``pip install`` line into a fresh venv,
run from an empty directory (no checkout on ``sys.path``, no ``make``)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ._guides import DOCUMENTS, ROOT, Guide, matches, read_guide, run_command, write_files

pytestmark = [pytest.mark.slow, pytest.mark.chromium, pytest.mark.postgres]

#: Downloads from PyPI land here once and are reused by every venv and every run.
PIP_CACHE = Path(os.environ.get("SESSION_KEEPER_PIP_CACHE", Path.home() / ".cache" / "pip"))
#: Venvs being made at once, beside the page whose programs run (concurrent installs
#: may share pip's cache: pip writes each entry to a temporary file, then renames it).
VENVS_AT_ONCE = 2


def install_line(guide: Guide) -> list[str]:
    """The page's first ``pip install ...`` line, as arguments after ``install``."""
    text = (ROOT / guide.document).read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith("pip install "):
            return shlex.split(line.split("#", 1)[0])[2:]
    raise AssertionError(f"{guide.document} says nowhere how to install")


def _with_wheel(args: list[str], wheel: Path) -> list[str]:
    """``session-keeper[extra]`` becomes ``<the wheel>[extra]``; other packages stay."""
    out = []
    for arg in args:
        name, _, extra = arg.partition("[")
        out.append(f"{wheel}[{extra}" if name == "session-keeper" and extra else
                   str(wheel) if name == "session-keeper" else arg)  # fmt: skip
    assert str(wheel) in " ".join(out), f"the install line {args} does not install us"
    return out


def _user_env() -> dict[str, str]:
    """The environment without anything pointing at this checkout or its venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_CACHE_DIR"] = str(PIP_CACHE)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _check(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> None:
    done = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{shlex.join(cmd)} failed:\n{done.stdout}\n{done.stderr}"


#: Run by the installed package's Python: what the wheel carries besides its code.
_INSTALLED = """
import importlib.metadata, importlib.resources, json, session_keeper
meta = importlib.metadata.metadata("session-keeper")
files = importlib.resources.files("session_keeper")
print(json.dumps({
    "version": importlib.metadata.version("session-keeper"),
    "__version__": session_keeper.__version__,
    "py.typed": files.joinpath("py.typed").is_file(),
    "examples": sorted(p.name for p in files.joinpath("examples").iterdir()),
    "urls": meta.get_all("Project-URL") or [],
}))
"""


def _check_what_the_index_page_promises(
    python: str, wheel: Path, cwd: Path, env: dict[str, str]
) -> None:
    """In the installed wheel: one version (``--version``, ``__version__``, the metadata,
    the wheel's name), ``py.typed``, the shipped example, and pyproject's Project-URLs."""
    version = wheel.name.split("-")[1]
    command = str(Path(python).parent / "session-keeper")
    shown = subprocess.run(
        [command, "--version"], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    assert shown.stdout.split() == ["session-keeper", version]
    done = subprocess.run(
        [python, "-c", _INSTALLED], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    installed = json.loads(done.stdout)
    assert installed["version"] == installed["__version__"] == version
    assert installed["py.typed"]
    assert "quickstart.py" in installed["examples"]
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert sorted(installed["urls"]) == sorted(f"{k}, {v}" for k, v in urls.items())
    assert {"Documentation", "Changelog", "Issues"} <= set(urls)


@pytest.mark.timeout(1800)
def test_the_wheel_with_each_documented_extra_runs_the_readme_and_every_guide(
    tmp_path: Path,
) -> None:
    """Built wheel → one fresh venv per page's install line → each page's programs, from an
    empty directory, print what the page shows; and the README's shipped example runs."""
    env = _user_env()
    dist = tmp_path / "dist"
    _check(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        tmp_path, env, 600,
    )  # fmt: skip
    (wheel,) = dist.glob("session_keeper-*.whl")
    guides = [read_guide(d) for d in DOCUMENTS]
    readme_extras = {
        a for line in (ROOT / "README.md").read_text().splitlines()
        if line.startswith("pip install ") for a in shlex.split(line.split("#", 1)[0])[2:]
    }  # fmt: skip
    installed = {a for guide in guides for a in install_line(guide)}
    # Each page's venv is made while earlier pages' programs run: pip mostly waits on the
    # index and the disk, a program on its browser or database. Made in page order, a
    # page's venv is ready, or being made, when its turn comes.
    making = ThreadPoolExecutor(max_workers=VENVS_AT_ONCE, thread_name_prefix="venv")
    try:
        venvs = [making.submit(_fresh_venv, guide, wheel, tmp_path, env) for guide in guides]
        for guide, made in zip(guides, venvs, strict=True):
            _run_the_page(guide, made.result(), wheel, tmp_path, env)
    finally:
        making.shutdown(wait=True, cancel_futures=True)
    # Every extra the README offers was installed by some page whose programs then ran.
    assert {a for a in readme_extras if a.startswith("session-keeper")} <= installed


def _fresh_venv(guide: Guide, wheel: Path, tmp_path: Path, env: dict[str, str]) -> str:
    """A new venv holding what the page's own ``pip install`` line installs (the wheel
    for ``session-keeper``); its Python."""
    venv = tmp_path / "venvs" / Path(guide.document).stem
    # No pip of its own in each venv (bootstrapping one costs ~4 s of CPU per venv):
    # this pip installs into the venv's interpreter (``--python``), the same packages
    # in the same places as the venv's own ``pip install`` would.
    _check([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env, 120)
    python = str(venv / "bin" / "python")
    _check(
        # No byte-compiling: a user's first import does that for the modules it needs,
        # and compiling every installed package would double this test's time.
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-compile",
         *_with_wheel(install_line(guide), wheel)],
        tmp_path, env, 900,
    )  # fmt: skip
    return python


def _run_the_page(
    guide: Guide, python: str, wheel: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    """The page's programs, run by ``python`` from an empty directory, print what the page
    shows; for the README, also what the index page promises and the shipped example."""
    work = tmp_path / "work" / Path(guide.document).stem
    work.mkdir(parents=True)
    write_files(guide, work)
    for run in guide.runs:
        for command in run.commands:
            done = run_command(command, python=python, cwd=work, env=env)
            where = f"{guide.document}: {shlex.join(command.argv)}"
            assert done.returncode == 0, f"{where} failed:\n{done.stderr}"
            assert matches(command.expected, done.stdout.splitlines()), (
                f"{where} printed:\n{done.stdout}"
            )
    if guide.document == "README.md":
        _check_what_the_index_page_promises(python, wheel, work, env)
        # The README's own command, as shipped in the wheel.
        shipped = subprocess.run(
            [python, "-m", "session_keeper.examples.quickstart"],
            cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert shipped.returncode == 0, shipped.stderr
        (shown,) = [r for r in guide.runs]
        assert matches(shown.commands[0].expected, shipped.stdout.splitlines())
