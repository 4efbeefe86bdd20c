"""benchmarks/pool.py runs, checks itself, and ends with its RESULT line (small scale)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from benchmarks._report import parse

ROOT = Path(__file__).resolve().parents[2]


def test_the_pool_benchmark_tells_every_affected_conversation_once_and_balances_relaunches() -> (
    None
):
    """A small run of the benchmark: told once (no wrong restart fact), every crash victim
    told, relaunches = crashes + evictions - pending; RESULT and BENCH lines printed."""
    out = subprocess.run(
        [
            sys.executable,
            "benchmarks/pool.py",
            "--conversations",
            "60",
            "--profiles",
            "5",
            "--max-open",
            "2",
            "--turns",
            "120",
            "--rounds",
            "1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=True,
    ).stdout
    result = out.strip().splitlines()[-1]
    assert result.startswith("RESULT pool ") and "told_once=yes wrong=0" in result
    m = re.search(
        r"crash_told=(\d+)/(\d+) relaunches=(\d+) crashes=1 evictions=(\d+) pending=(\d+)", result
    )
    assert m is not None
    told, affected, relaunches, evictions, pending = map(int, m.groups())
    assert told == affected > 0
    assert relaunches == 1 + evictions - pending
    assert [r["row"] for r in parse(out)] == ["11", "11"]
