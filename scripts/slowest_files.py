"""Print ``SLOWEST_FILES`` for ``tests/conftest.py`` from a full run's junit XML.

``make test`` hands whole files to its two pytest-xdist workers in collection order, which
``tests/conftest.py`` makes :data:`SLOWEST_FILES` first, slowest first (longest files
first keeps the run from ending on one worker's long file while the other waits). This
sums each file's test times in a junit report and prints the files that took at least
``--min-seconds``, slowest first, as the tuple to paste over the old one.

Run: ``python scripts/slowest_files.py junit.xml`` (the XML of a full run, e.g.
``make test PYTEST_ARGS=--junitxml=junit.xml`` or CI's).
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_file(classname: str) -> str | None:
    """The test file a junit ``classname`` (``tests.guard.test_x`` or, for a test class,
    ``tests.keeper.test_x.TestClass``) names, as a path from the repository root."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = Path(*parts[:end]).with_suffix(".py")
        if (ROOT / path).is_file():
            return path.as_posix()
    return None


def file_seconds(junit: Path) -> dict[str, float]:
    """Each test file's summed test time (setup, call and teardown) in ``junit``."""
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(junit).getroot().iter("testcase"):
        path = test_file(case.get("classname", ""))
        if path is not None:
            seconds[path] += float(case.get("time") or 0)
    return dict(seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path, help="a full run's junit XML")
    parser.add_argument(
        "--min-seconds", type=float, default=20.0, help="list files at least this slow (20)"
    )
    args = parser.parse_args(argv)
    seconds = file_seconds(args.junit)
    if not seconds:
        print(f"{args.junit}: no test cases of files under {ROOT}", file=sys.stderr)
        return 1
    slow = sorted(
        (p for p, s in seconds.items() if s >= args.min_seconds), key=lambda p: -seconds[p]
    )
    print("SLOWEST_FILES = (")
    for path in slow:
        print(f'    "{path}",  # {seconds[path]:.0f} s')
    print(")")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
