"""One machine-readable line per benchmark row, collected by ``benchmarks/run_all.py``.

A benchmark calls :func:`emit` once per row it measures; the line it prints,
``BENCH {json}``, carries the row id, what is compared, the per-round ratios (rounds
interleaved in one run), the goal and its direction. ``run_all.py`` renders these into
BENCHMARKS.md; nothing in that file is typed by hand.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from typing import Any

PREFIX = "BENCH "


def emit(
    row: str,
    *,
    compared: str,
    ratios: Sequence[float],
    goal: float | None,
    direction: str,
    unit: str = "x",
    detail: str = "",
) -> dict[str, Any]:
    """Print one ``BENCH {json}`` line and return its record.

    ``direction`` is ``"<="`` (smaller is better: the goal is a ceiling) or ``">="``.
    """
    if direction not in ("<=", ">="):
        raise ValueError(f"direction must be '<=' or '>=', not {direction!r}")
    if not ratios:
        raise ValueError("a row needs at least one measured round")
    record: dict[str, Any] = {
        "row": row,
        "compared": compared,
        "ratios": [round(r, 6) for r in ratios],
        "median": statistics.median(ratios),
        "goal": goal,
        "direction": direction,
        "unit": unit,
        "detail": detail,
    }
    print(PREFIX + json.dumps(record), flush=True)
    return record


def emit_unmeasured(row: str, *, compared: str, reason: str) -> dict[str, Any]:
    """Print a ``BENCH`` line saying the row could not be measured here, and why."""
    record: dict[str, Any] = {"row": row, "compared": compared, "unmeasured": reason}
    print(PREFIX + json.dumps(record), flush=True)
    return record


def parse(output: str) -> list[dict[str, Any]]:
    """Every ``BENCH`` record in a benchmark's standard output, in order."""
    return [
        json.loads(line[len(PREFIX) :]) for line in output.splitlines() if line.startswith(PREFIX)
    ]
