"""What every fault trial, attack row and soak shares: trial counts, the seed, the report file.

``make chaos`` (``scripts/write_reliability.py``) runs the tests marked ``chaos`` with
``FAULT_TRIALS=20`` and a ``FAULT_REPORT`` file; each trial appends one JSON line of
what its independent validator measured, which the script tallies into RELIABILITY.md.
CI's ``make test`` runs the same tests at a few trials each (``FAULT_TRIALS`` unset): 3, or 1
where one trial is a whole browser (``BROWSER_TRIALS``).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

#: Trials per fault: a few in CI (every push), 20 under ``make chaos``.
TRIALS = int(os.environ.get("FAULT_TRIALS") or 3)
#: Trials per fault of the rows whose one trial is a whole real browser with its sign-ins
#: and relaunches (5 to 15 s each): one in CI, so every fault path runs on every push,
#: and 20 under ``make chaos``, whose RELIABILITY.md counts are the statistics;
#: ``FAULT_TRIALS=<n>`` sets both.
BROWSER_TRIALS = int(os.environ.get("FAULT_TRIALS") or 1)


def _session_seed() -> int:
    """``FAULT_SEED``, else one drawn for this run. Under pytest-xdist each worker imports
    this module and draws the fault points it parametrizes with at collection; they must
    collect the same tests, so they derive the seed from the run's id they all share."""
    given = os.environ.get("FAULT_SEED")
    if given:
        return int(given)
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run:
        return int.from_bytes(hashlib.sha256(run.encode()).digest()[:4], "big")
    return random.SystemRandom().randrange(2**32)


#: One seed per session (``FAULT_SEED=<n>`` replays one); it is in every trial's id, so
#: a failing trial names the seed that reproduces it.
SEED = _session_seed()
P = TypeVar("P")


def sample(name: str, space: Sequence[P], k: int = TRIALS) -> list[P]:
    """``k`` distinct fault points drawn from ``space`` with this session's seed."""
    return random.Random(f"{SEED}:{name}").sample(list(space), min(k, len(space)))


def rng(name: str) -> random.Random:
    """A random source for one fault, from this session's seed."""
    return random.Random(f"{SEED}:{name}")


def record(row: str, **fields: Any) -> None:
    """Append one measured trial (or attack/soak row) to ``FAULT_REPORT``, when set."""
    report = os.environ.get("FAULT_REPORT")
    if not report:
        return
    # "<node id> (call)": the node id itself may hold spaces (a tuple fault point).
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
    line = json.dumps({"row": row, "test": test, "seed": SEED, **fields}, default=str) + "\n"
    with Path(report).open("a", encoding="utf-8") as f:
        f.write(line)
