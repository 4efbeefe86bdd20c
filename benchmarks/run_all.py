"""``make bench``: run every benchmark row and write BENCHMARKS.md (generated, never edited).

Each benchmark runs in its own process. New benchmarks print ``BENCH {json}`` records
(:mod:`benchmarks._report`); the older ones print per-round lines and a ``RESULT`` line,
which the adapters below turn into the same records. :func:`render` is a pure function
of the records and the machine description, so ``tests/test_bench_report.py`` checks
the table without a browser.

Usage: ``python benchmarks/run_all.py [--out BENCHMARKS.md] [--only 1,3]``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import parse  # noqa: E402

Record = dict[str, Any]

# Every row of issue 14, in order; a row with no record says "not measured yet".
ROWS: dict[str, str] = {
    "1": "Turn overhead: ensure() + the conversation's handle vs one CDP round trip",
    "2": "A kept-browser turn vs a fresh browser per turn (launch + page); same with one"
    " navigation",
    "3": "Crash → fact (on_browser_lost), over ≥ 20 SIGKILLs",
    "4": "Recovery: relaunch + 10 lost tabs reopened vs bare relaunch + 10 navigations",
    "5": "Durable job loop vs a raw Playwright loop over the same pages",
    "6": "Store commit vs LangGraph SqliteSaver.put, same durability",
    "7": "Memory: marginal PSS per conversation vs a browser per conversation",
    "8": "Scale: 1,000 conversations on one browser, a crash",
    "9": "Guard overhead: signed-in page with 40 subresources, guarded vs unguarded",
    "10": "MCP: navigate + snapshot through our server vs @playwright/mcp",
}
GOALS: dict[str, str] = {
    "1": "≤ 0.01×",
    "2": "—",
    "3": "max ≤ 50 ms",
    "4": "≤ 1.0×",
    "5": "≥ 0.95×",
    "6": "≥ 0.8× at 1 writer, ≥ 1.0× at 8",
    "7": "≤ 0.1×",
    "8": "—",
    "9": "≤ 1.05×",
    "10": "≤ 1.0×",
}


# --- adapters for the benchmarks that predate BENCH records -------------------------------


def _floats(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)]


def adapt_crash(out: str) -> list[Record]:
    """crash_detection.py: the default mode's median and max over the kills."""
    m = re.search(r"RESULT crash_to_fact_ms_median=([\d.]+) p_max=([\d.]+) trials=(\d+)", out)
    if not m:
        return []
    median, worst, trials = float(m[1]), float(m[2]), int(m[3])
    return [
        {
            "row": "3",
            "compared": f"SIGKILL of Chromium → recorded fact, default watch, {trials} kills",
            "ratios": [],
            "median": median,
            "value": worst,
            "spread": f"max {worst:.1f} ms over {trials} kills",
            "goal": 50.0,
            "direction": "<=",
            "unit": " ms",
            "detail": "figure checked against the goal: the max",
        }
    ]


def adapt_job_loop(out: str) -> list[Record]:
    """job_loop.py: per-round durable/raw ratios (rounds alternate raw, durable)."""
    ratios = [float(x) for x in re.findall(r"^round \d+: .* ratio ([\d.]+)$", out, re.M)]
    m = re.search(r"RESULT durable_pages_per_s=([\d.]+) raw_pages_per_s=([\d.]+)", out)
    if not ratios or not m:
        return []
    return [
        {
            "row": "5",
            "compared": "JobLoop (SQLite, leased, fenced) vs raw Playwright loop, pages/s",
            "ratios": ratios,
            "median": statistics.median(ratios),
            "goal": 0.95,
            "direction": ">=",
            "unit": "x",
            "detail": f"durable {m[1]} pages/s, raw {m[2]} pages/s (medians)",
        }
    ]


def adapt_store(out: str) -> list[Record]:
    """store_commit.py: the paired SQLite/LangGraph ratios at 1 writer and at 8."""
    records: list[Record] = []
    for writers, goal in (("1", 0.8), ("8", 1.0)):
        m = re.search(
            rf"paired sqlite/langgraph ratio writers={writers}: median=[\d.]+ rounds=([\d. ]+)$",
            out,
            re.M,
        )
        rates = re.search(
            rf"median writers={writers}: sqlite=([\d.]+)/s postgres=([\w.]+)/s "
            rf"langgraph=([\d.]+)/s",
            out,
        )
        if not m:
            continue
        ratios = _floats(m[1])
        detail = (
            f"SqliteStore {rates[1]}/s, SqliteSaver.put {rates[3]}/s, PostgresStore {rates[2]}/s"
            if rates
            else ""
        )
        records.append(
            {
                "row": "6",
                "compared": f"SqliteStore fenced commit vs SqliteSaver.put, {writers} writer(s)",
                "ratios": ratios,
                "median": statistics.median(ratios),
                "goal": goal,
                "direction": ">=",
                "unit": "x",
                "detail": detail,
            }
        )
    return records


def adapt_guard(out: str) -> list[Record]:
    """guard_overhead.py: paired guarded/plain load times (order alternates per round)."""
    g = re.search(r"^guarded: (.*)$", out, re.M)
    p = re.search(r"^plain:   (.*)$", out, re.M)
    if not g or not p:
        return []
    guarded, plain = _floats(g[1]), _floats(p[1])
    ratios = [a / b for a, b in zip(guarded, plain, strict=True)]
    return [
        {
            "row": "9",
            "compared": "page with 40 subresources, signed in: Guard on vs off",
            "ratios": ratios,
            "median": statistics.median(ratios),
            "goal": 1.05,
            "direction": "<=",
            "unit": "x",
            "detail": (
                f"guarded {statistics.median(guarded):.0f} ms, "
                f"plain {statistics.median(plain):.0f} ms (medians)"
            ),
        }
    ]


Adapter = Callable[[str], list[Record]]
# (row ids, script and arguments, adapter or None for BENCH records)
BENCHMARKS: list[tuple[tuple[str, ...], list[str], Adapter | None]] = [
    (("1",), ["benchmarks/turn_overhead.py"], None),
    (("2",), ["benchmarks/kept_vs_fresh.py", "--rounds", "7", "--turns", "3"], None),
    (("3",), ["benchmarks/crash_detection.py", "--trials", "20"], adapt_crash),
    (("5",), ["benchmarks/job_loop.py", "--rounds", "5"], adapt_job_loop),
    (("6",), ["benchmarks/store_commit.py", "--rounds", "5", "--writers", "8"], adapt_store),
    (("7",), ["benchmarks/memory_per_conversation.py", "--rounds", "3", "--extra", "5"], None),
    (("9",), ["benchmarks/guard_overhead.py", "--rounds", "20"], None),
]


# --- rendering ---------------------------------------------------------------------------


def verdict(record: Record) -> str:
    """'met', or by how much the figure misses its goal."""
    if record.get("goal") is None:
        return "no goal"
    goal = float(record["goal"])
    value = float(record["value"] if "value" in record else record["median"])
    unit = record.get("unit", "x")
    if record["direction"] == "<=":
        if value <= goal:
            return "met"
        return f"**not met**: {value / goal:.2f}× the ceiling ({value - goal:+.3g}{unit})"
    if value >= goal:
        return "met"
    return f"**not met**: {value / goal:.2f}× the floor ({value - goal:+.3g}{unit})"


def fmt(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.4f}×" if value < 0.1 else f"{value:.2f}×"
    return f"{value:.1f}{unit}"


def spread(record: Record) -> str:
    if "spread" in record:
        return str(record["spread"])
    ratios = [float(r) for r in record["ratios"]]
    unit = record.get("unit", "x")
    return f"{fmt(min(ratios), unit)} – {fmt(max(ratios), unit)} (n={len(ratios)})"


def render(
    records: Sequence[Record],
    machine: dict[str, str],
    notes: Sequence[str] = (),
    plots: Sequence[tuple[str, str]] = (),
) -> str:
    """BENCHMARKS.md from the records and the machine description (pure)."""
    lines = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`benchmarks/run_all.py`); never edit by hand.",
        "Every ratio is measured in one run with its rounds interleaved; the median is",
        "the median of the per-round ratios and the spread their min – max.",
        "",
    ]
    lines += [f"- **{k}**: {v}" for k, v in machine.items()]
    lines += [
        "",
        "The machine is shared and noisy (other work runs beside the benchmarks); rerun",
        "`make bench` to see the spread between runs.",
        "",
        "| Row | What is compared | Median | Spread | Goal | Verdict | Detail |",
        "|---|---|---|---|---|---|---|",
    ]
    by_row: dict[str, list[Record]] = {}
    for r in records:
        by_row.setdefault(str(r["row"]), []).append(r)
    for row, title in ROWS.items():
        if row not in by_row:
            lines.append(f"| {row} | {title} | not measured yet | — | {GOALS[row]} | — | |")
            continue
        for r in by_row[row]:
            lines.append(
                f"| {row} | {r['compared']} | {fmt(float(r['median']), r.get('unit', 'x'))} "
                f"| {spread(r)} | {GOALS[row]} | {verdict(r)} | {r.get('detail', '')} |"
            )
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"- [{title}]({path})" for title, path in plots]
    if notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


# --- machine description -----------------------------------------------------------------


def _first(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except OSError as exc:
        return f"unavailable ({exc.strerror})"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else "?"


def _postgres_version() -> str:
    candidates = [shutil.which("postgres")]
    candidates += sorted(str(p) for p in Path("/usr/lib/postgresql").glob("*/bin/postgres"))
    for c in candidates:
        if c:
            return _first([c, "--version"])
    return "not installed"


def machine() -> dict[str, str]:
    """nproc, memory, CPU model, versions and the date of this run."""
    cpu = "?"
    mem = "?"
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    from session_keeper import find_chromium

    return {
        "Date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "Machine": f"{os.cpu_count()} CPUs ({cpu}), {mem} RAM, load {os.getloadavg()[0]:.2f}",
        "Python": platform.python_version(),
        "Playwright": importlib.metadata.version("playwright"),
        "Chromium": _first([find_chromium(), "--version"]),
        "SQLite": sqlite3.sqlite_version,
        "PostgreSQL": _postgres_version(),
    }


def run_one(script: list[str], adapter: Adapter | None) -> tuple[list[Record], str]:
    """Run one benchmark; its records and a note when it failed."""
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, *script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    took = time.monotonic() - start
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr[-4000:])
    if proc.returncode != 0:
        return [], f"`{' '.join(script)}` failed (exit {proc.returncode}) after {took:.0f} s"
    records = adapter(proc.stdout) if adapter else parse(proc.stdout)
    return records, f"`{' '.join(script)}`: {took:.0f} s"


def ensure_curve(out_dir: Path) -> tuple[list[tuple[str, str]], str]:
    """Run ensure_scale.py and plot its curve (a PNG) when matplotlib is installed."""
    script = ["benchmarks/ensure_scale.py"]
    print(f"== curve: {' '.join(script)}", flush=True)
    proc = subprocess.run(
        [sys.executable, *script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    sys.stdout.write(proc.stdout)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("CURVE ")), None)
    if proc.returncode != 0 or line is None:
        return [], f"`{' '.join(script)}` failed (exit {proc.returncode})"
    points = json.loads(line[len("CURVE ") :])["points"]
    summary = "; ".join(f"{n}: median {m:.1f} µs, p99 {p:.1f} µs" for n, m, p in points)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [], f"ensure() latency vs conversations ({summary}); no plot: matplotlib missing"
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label="median")
    ax.plot([p[0] for p in points], [p[2] for p in points], marker="s", label="p99")
    ax.set_xscale("log")
    ax.set_xlabel("conversations on one browser")
    ax.set_ylabel("ensure() latency (µs)")
    ax.legend()
    png = out_dir / "benchmarks" / "plots" / "ensure_latency.png"
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=100)
    plt.close(fig)
    rel = png.relative_to(out_dir).as_posix()
    return [("ensure() latency vs number of conversations", rel)], f"ensure() curve: {summary}"


def main() -> None:
    """Run the rows (all, or ``--only``), write the markdown."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--only", default="", help="comma-separated row ids")
    args = parser.parse_args()
    only = {x for x in args.only.split(",") if x}
    records: list[Record] = []
    notes: list[str] = []
    for rows, script, adapter in BENCHMARKS:
        if only and not only.intersection(rows):
            continue
        print(f"== rows {', '.join(rows)}: {' '.join(script)}", flush=True)
        got, note = run_one(script, adapter)
        records += got
        notes.append(note)
    plots: list[tuple[str, str]] = []
    if not only:
        plots, note = ensure_curve(args.out.parent)
        notes.append(note)
    args.out.write_text(render(records, machine(), notes, plots), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
