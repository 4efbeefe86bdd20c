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
    "11": "Pool: 1,000 conversations over 10 profiles, ≤ 3 open browsers, a crash (fake browsers)",
    "12": "CDP reconnect: every socket to a browser we did not launch cut, ≥ 100 times",
    # Issue 22: lookups that do not scan.
    "13": "decide() at 50,000 grants vs at 10",
    "14": "Open a keeper with 100,000 audit entries",
    "15": "Audit burst drain: entries written per second",
    # Issue 22: state saved as rows that change.
    "16": "One durable write (ensure, counted decide, grant, mark_verified) at 100,000"
    " conversations vs at 100, and vs LangGraph's put of the same change",
    "17": "A restart told to N conversations one turn at a time: cost per conversation at"
    " 100,000 vs at 100 (and memory per conversation)",
    "18": "Durable job loop in a keeper holding 10,000 conversations vs in an empty one",
    # Issue 26: OpenTelemetry.
    "19": "Telemetry overhead: a turn (row 1) and a guarded page load (row 9), tracing on vs off",
    # Issue 26: a replay of what each conversation did.
    "20": "Replay by masked DOM snapshots vs recording off: time per page (and PSS)",
    "21": "Replay by CDP screencast frames vs recording off: time per page (and PSS)",
    # Issue 25: renewal under policy.
    "22": "Server-side sign-out → renewed login (recipe + TOTP) vs the health-check interval",
    # 20 MCP clients on one keeper vs @playwright/mcp --isolated (one context per client).
    "23": "MCP, 20 clients over HTTP on one profile vs @playwright/mcp --isolated: navigate"
    " + snapshot latency",
    "24": "MCP, 20 clients over HTTP on one profile vs @playwright/mcp --isolated: total PSS",
    # Issue 22: bounded by default.
    "25": "Event log rows under a 100,000-turn soak, retention on (events pruned, audit"
    " archived) vs its size one day in",
    # Issue 47: browser steps on the durable execution engines.
    "26": "A browser step on Temporal: the integration vs the same Playwright work in a bare"
    " activity on a browser keeping its profile, as the keeper's (and vs that activity plus"
    " the one durable commit a step's turn costs, the floor; and, no goal, vs a browser"
    " keeping no profile)",
    "27": "A browser step on DBOS: the integration vs the same Playwright work in a bare step"
    " on a browser keeping its profile, as the keeper's (and vs that step plus the one"
    " durable commit a step's turn costs, the floor; and, no goal, vs a browser keeping no"
    " profile)",
    "28": "A job's pages/s, side by side in one run: JobLoop (SQLite) vs Temporal vs DBOS",
    # Issue 49: row 10's round on row 9's page, against Playwright MCP's own enforcement.
    "29": "MCP: navigate + snapshot on row 9's signed-in page (40 subresources), ours (Guard"
    " on, a grant) vs @playwright/mcp enforcing its own --allowed-origins",
    "30": "MCP: the same page, ours (Guard on, a grant) vs @playwright/mcp defaults (no"
    " enforcement)",
    # Issue 47: a step's external write records its intent first.
    "31": "An engine step's first external write: the keeper's work with the durable write"
    " intent vs with the lease renewal alone (SQLite, fake browser: the worst case)",
}
GOALS: dict[str, str] = {
    "1": "≤ 0.01×",
    "2": "—",
    "3": "max ≤ 50 ms",
    "4": "≤ 1.0×",
    "5": "≥ 0.95×",
    "6": "≥ 1.0× AsyncSqliteSaver.aput at 1 writer (SqliteSaver.put: reported), ≥ 1.0×"
    " SqliteSaver.put at 8",
    "7": "≤ 0.1×",
    "8": "—",
    "9": "Guard vs Chromium's Fetch interception alone ≤ 1.02× in every run (the"
    " interception floor, Chromium's, reported beside it)",
    "10": "≤ 1.0×",
    "11": "—",
    "12": "0 false restarts",
    "13": "≤ 2×",
    "14": "≤ 0.2 s",
    "15": "—",
    "16": "≤ 1.5× vs at 100, ≤ 1.0× vs LangGraph",
    "17": "≤ 1.5×",
    "18": "≥ 0.9×",
    "19": "a turn in a caller's recording span ≤ 0.1× one CDP round trip; a quiet turn"
    " and a guarded load ≤ 1.05×",
    "20": "≤ 1.1×",
    "21": "—",
    "22": "≤ 1.25×",
    "23": "≤ 1.0×",
    "24": "≤ 1.0×",
    "25": "≤ 1.1×",
    "26": "≤ 1.10×",
    "27": "≤ 1.10×",
    "28": "—",
    "29": "≤ 1.0× in every run",
    "30": "— (reported, with what the difference is)",
    "31": "— (reported: the price of never submitting a write unread)",
}

# Why a goal is missed, from profiling (shown only under a row this run did not meet).
WHY: dict[str, str] = {
    "4": "measured on 2026-12-06 (benchmarks/profile_recovery.py; runs of 14 rounds, each"
    " kill after the last recovery settled: without that pause whichever side went second"
    " in a round was 15-20 % slower, which the alternation only hid in the spread): the"
    " keeper does the plain program's browser work and more, and each part of the more"
    " is on the critical path for a few per cent. Taken out one at a time: the whole"
    " keeper 1.14-1.15x; without the input watch (its binding and script, which Playwright"
    " sets up in every new_page) 1.07x; without the jar read after each navigation (the"
    " login evidence's baseline) 1.09x; without both 1.09x. The rest: the keeper"
    " relaunches about 15 ms after the kill, the plain program 30-40 ms after it, at"
    " Playwright's event, so the keeper's launch meets the kernel still tearing the dead"
    " browser down (launch medians 456 vs 407 ms; waiting for the dead browser's"
    " processes first cost as much as it saved), and its Python takes 115 ms of CPU per"
    " recovery against 65 ms (the jar read against the ledger, the facts saved before"
    " they are told, the saves of the reopened tabs) on 2 cores the browser needs too."
    " Single rounds spread 0.9x-1.4x.",
    "5": "per page the durable loop adds one store transaction (the fenced commit holding"
    " the page's results, artifact, checkpoint and event: an fsync and two thread"
    " hand-overs; the job is no longer read back between pages, and the keeper's own"
    " save of the verified URL rides the once-a-second URL save), plus one cookie-jar"
    " read per navigation (login evidence, off the path) and a heartbeat task. Profiled"
    " on an idle machine the overhead is 2–7 % of a page; on this shared 2-core machine"
    " every hand-over waits for a core.",
    "6": "profiled (statement timings, WAL frames, thread hand-overs): a fenced commit runs "
    "four statements in its transaction (lease and checkpoint read, the page's 10 result "
    "rows, the checkpoint, the event) where a checkpointer's put runs one: about 115 µs of "
    "SQL before the COMMIT, whose fsync (median 270 µs here) both sides pay, and more "
    "instructions of the library's Python (checks, JSON, checkpoint and event values) than "
    "of SQLite's (callgrind). It writes about 7 WAL frames against 3 for a put, but fewer "
    "frames barely move the COMMIT (writing none of the results' 3.4 frames left its mean at"
    " 309 µs vs 308 µs). AsyncSqliteSaver.aput, the goal's peer (the same contract: an "
    "asyncio caller never blocked on disk), hands its write to aiosqlite's thread too; at 1"
    " writer what is left against it is the fenced commit's extra statements and the "
    "library's Python. At 8 writers group commit shares one fsync among the batch and the "
    "ratio follows the machine's load. Same durability on both sides (WAL, "
    "synchronous=FULL, checked by PRAGMA each run). The blocking SqliteSaver.put is "
    "reported at 1 writer with no goal: it runs its statement and fsync in the caller's "
    "thread, holding an event loop for the whole write (a commit's fsync, 150-300 µs here "
    "and far more on a busy disk, would stall every conversation's turn and every request "
    "the Guard judges); the floor for a store that keeps the loop off disk, measured "
    "(benchmarks/store_commit_bound.py, 7 rounds of 1,000 on 2026-12-06): the fenced "
    "commit's SQL alone in bare sqlite3, handed from an event loop to a database thread and"
    " back the cheapest way, commits at 0.74x SqliteSaver.put's rate (rounds 0.68-0.87).",
    "9": "profiled (2026-12-06, per load and per process, load 2-5): what the Guard costs"
    " against a plain browser is what Chromium's Fetch interception costs by itself, the"
    " floor of any Guard built on it, reported in the rows 'interception alone' (the run's"
    " third browser has Fetch enabled as the Guard's watch enables it and no Guard: every"
    " pause let go at once). Its extra CPU is in Chromium's browser process (about +30 ms a"
    " load) and network service (+15 ms): with interception on, every request goes through"
    " DevTools' interceptor there, paused or not (here one request a load pauses, the"
    " document). Against that floor the Guard's Python and the driver add nothing"
    " measurable (medians equal per load); with its WebSocket routes or its socket rules"
    " taken out (two runs of 20 rounds) the overhead stayed the same. Single rounds of the"
    " Guard against interception alone spread 0.87x-1.22x on this shared machine (30"
    " rounds), so a run's median can cross 1.02x by noise alone. The page's images are"
    " PNG: with SVG images (each a document of its own to the renderer) the renderer's"
    " work outweighed the requests' and single rounds spread 0.5x-2.6x, so a run's median"
    " moved from 0.96x to 1.12x between runs of 30 rounds on a quiet machine.",
    "16": "profiled (per write: SQL, COMMIT and thread timings; libpq traces; on 2026-12-06"
    " phase timestamps of 2,000 writes): the cost is flat in the number of conversations"
    " (rows that change, one transaction); what is over LangGraph's blocking put is the"
    " hand-over. SqliteSaver.put runs its statement and fsync in the caller's thread,"
    " holding it (and an event loop) for the whole write; a keeper write hands the batch to"
    " the database thread and is woken after the COMMIT: a bare loop -> thread -> loop"
    " round trip costs 97-116 µs here, about a fifth of the write. On SQLite a write is"
    " about 105 µs of statements, 150-300 µs of COMMIT (the fsync both pay) and 100-150 µs"
    " of the keeper's planning (which rows changed, their MACs, the head) on the loop."
    " Against AsyncSqliteSaver.aput and AsyncPostgresSaver.aput, LangGraph's checkpointers"
    " for an asyncio caller, the same writes are 0.88-1.13x. On PostgreSQL a keeper save is"
    " one round trip (its statements pipelined with BEGIN and COMMIT). The floor, measured"
    " (benchmarks/store_commit_bound.py, 7 rounds of 1,000): a put's own SQL in bare"
    " sqlite3, handed over the cheapest way, runs at 0.97x SqliteSaver.put's rate (rounds"
    " 0.93-1.03), so a write of any store that keeps the event loop off disk is about"
    " 1.03x at best; a keeper write does more than a put (its rows, their MACs, the audit"
    " entry).",
    "19": "profiled: the bare OpenTelemetry SDK's span (start, make current, end, hand to"
    " a BatchSpanProcessor), without the library, costs about 40 µs here on a loaded"
    " 2-core machine; the library's wrapper and the turn's attributes add about 1 µs. An"
    " untraced turn is about 5 µs of local work, so one span per turn is several turns;"
    " in row 1's terms the traced turn is still a few hundredths of one CDP round trip."
    " A quiet turn (no caller's span) is about 6 µs on either side, and its ratio moves"
    " by more than the goal's 5 % between runs of 15 rounds (1.04x, then 1.07x with the"
    " medians the other way round: on 6.6 µs, off 6.9 µs). The guarded page load now uses"
    " row 9's PNG gallery (with SVG images the renderer's work spread single rounds"
    " 0.5x-2.6x and the median moved from 0.97x to 1.12x between runs); with PNG it is"
    " 1.01x wall and 1.02x CPU.",
    "10": "profiled (load average 5–16 on 2 cores): per round both sides ask the"
    " browser about the same (9 CDP commands for ours, 10 for Playwright MCP), but ours"
    " waited for two hops it does not make: the Guard pauses the document"
    " (Fetch.requestPaused, a Python decision, Fetch.continueRequest: 3–7 ms inside the"
    " navigation) and the keeper read the cookie jar once the navigation ended (login"
    " evidence, Storage.getCookies: 2–7 ms, beside the snapshot). Since issue 49 a"
    " ConversationTab navigation in a headless browser holds that read until the"
    " conversation's next act (a snapshot is none), so a navigate + snapshot round sends"
    " no Storage.getCookies at all; the Guard's pause stays. Each of our Playwright calls"
    " also crosses the pipe to Playwright's Node driver, where Playwright MCP calls it"
    " in-process. The"
    " server's own work (ensure, the turn, the Guard's decision, the result) is under"
    " 1 ms a call, the MCP SDK and stdio about 3–4 ms. A result also read the page's"
    " title and then its snapshot, one after the other (after a navigation 6 + 38–44 ms,"
    " in browser_snapshot 3 + 5 ms); they are now read together, as Playwright MCP"
    " overlaps its snapshot with its page probe: 2–3 ms less a round at load 5–8"
    " (0.97× the old code's round, 162 rounds interleaved in 6 runs), 0.91× at load"
    " 14–16 (144 rounds), where every hop waits for a core. What is left is the Guard's"
    " pause and the driver's pipe. Profiled again on 2026-12-04 (both"
    " servers' CDP traffic timestamped with DEBUG=pw:protocol, our loop sampled with"
    " py-spy): the Guard's decision sends Fetch.continueRequest 0.2 ms after the pause,"
    " and in the traced rounds both servers saw the load event about 46 ms after"
    " Page.navigate; our next command reached Chromium 3–7 ms after it, theirs 3 ms."
    " A fifth of our loop's busy samples were writes to the driver's pipe."
    " Two changes were measured and left out: reading the jar beside the snapshot"
    " (right after a load Chromium answers Storage.getCookies in 7 ms, 2 ms 20 ms"
    " later, and the snapshot took as much longer: 1.09–1.12× in 3 runs, as before)"
    " and starting Playwright's injected script at the commit (1.057× against the"
    " same code's 1.061×, 60 rounds interleaved). Single rounds spread 0.3×–3×: a"
    " run's median moves by ±10 % between runs.",
}

# What a row reported without a goal measures (shown under every run that measured it).
REPORTED: dict[str, str] = {
    "30": "Playwright MCP's defaults enforce nothing, so none of their requests is"
    " intercepted; the difference is what enforcing costs us, measured in its parts by"
    " rows 9 and 10 on the same page and round. Ours runs the Guard's watch: Chromium's"
    " Fetch interception on the browser target, which every one of the page's 41 requests"
    " passes in the browser process and the network service (row 9's 'interception alone',"
    " with no Guard at all: about 1.06x a load's wall time and 1.12x its CPU), of which"
    " only the document pauses for a decision (the images are settled reads: the"
    " conversation's grant on the site is unlimited and never expires); and the round's"
    " own extras over Playwright MCP (row 10): the document's pause for the Guard's"
    " decision (3-7 ms) and each Playwright call crossing the pipe to the driver, where"
    " Playwright MCP calls it in-process. Enforcing an origin allowlist costs Playwright"
    " MCP more than that (row 29's detail): its routing pauses every request and answers"
    " each from Node.",
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


#: Fewest cuts row 12's figure may be counted over (its goal: none of them a restart).
MIN_CUTS = 100


def adapt_cdp_reconnect(out: str) -> list[Record]:
    """cdp_reconnect.py: false restarts over the cuts; re-adoption latency as detail."""
    m = re.search(
        r"RESULT cut_to_readopt_ms_median=([\d.]+) max=([\d.]+) false_restarts=(\d+)"
        r" cuts=(\d+)",
        out,
    )
    if not m:
        return []
    median, worst, false_restarts, cuts = float(m[1]), float(m[2]), int(m[3]), int(m[4])
    compared = f"false restarts after {cuts} CDP socket cuts (browser kept running)"
    if cuts < MIN_CUTS:
        # Fewer cuts than the goal names: no verdict rather than a "met" it did not earn.
        return [
            {
                "row": "12",
                "compared": compared,
                "unmeasured": f"only {cuts} cuts; the goal counts over ≥ {MIN_CUTS}",
            }
        ]
    return [
        {
            "row": "12",
            "compared": compared,
            "ratios": [],
            "median": float(false_restarts),
            "value": float(false_restarts),
            "spread": f"{false_restarts} of {cuts} cuts",
            "goal": 0.0,
            "direction": "<=",
            "unit": " false restarts",
            "detail": f"cut → tab re-adopted by target id: median {median:.1f} ms, "
            f"max {worst:.1f} ms",
        }
    ]


Adapter = Callable[[str], list[Record]]
# (row ids, script and arguments, adapter or None for BENCH records)
BENCHMARKS: list[tuple[tuple[str, ...], list[str], Adapter | None]] = [
    (("1",), ["benchmarks/turn_overhead.py"], None),
    (("2",), ["benchmarks/kept_vs_fresh.py", "--rounds", "7", "--turns", "3"], None),
    (("3",), ["benchmarks/crash_detection.py", "--trials", "20"], adapt_crash),
    (("4",), ["benchmarks/recovery.py", "--rounds", "7", "--tabs", "10"], None),
    (("5",), ["benchmarks/job_loop.py", "--rounds", "7"], adapt_job_loop),
    (("6",), ["benchmarks/store_commit.py", "--rounds", "5", "--writers", "8"], None),
    (("7",), ["benchmarks/memory_per_conversation.py", "--rounds", "3", "--extra", "5"], None),
    (("8",), ["benchmarks/scale_crash.py", "--conversations", "1000", "--crashes", "3"], None),
    (("9",), ["benchmarks/guard_overhead.py", "--rounds", "30"], None),
    (("10",), ["benchmarks/mcp_round.py", "--rounds", "15", "--gallery-rounds", "0"], None),
    (("12",), ["benchmarks/cdp_reconnect.py", str(MIN_CUTS)], adapt_cdp_reconnect),
    (("13", "14", "15"), ["benchmarks/lookups.py", "--rounds", "5", "--postgres"], None),
    (
        ("16",),
        ["benchmarks/keeper_write_scale.py", "--sizes", "100,10000,100000", "--rounds", "15"],
        None,
    ),
    (
        ("17",),
        ["benchmarks/restart_scale.py", "--sizes", "100,1000,10000,100000", "--rounds", "3"],
        None,
    ),
    (("18",), ["benchmarks/job_loop_scale.py", "--rounds", "7"], None),
    (("19",), ["benchmarks/telemetry_overhead.py", "--rounds", "15"], None),
    (("20", "21"), ["benchmarks/replay_cost.py", "--rounds", "5", "--pages", "10"], None),
    (("22",), ["benchmarks/renewal_latency.py", "--rounds", "8"], None),
    (("23", "24"), ["benchmarks/mcp_many_clients.py", "--clients", "20", "--rounds", "5"], None),
    (("25",), ["benchmarks/retention_soak.py", "--turns", "100000"], None),
    (("26",), ["benchmarks/temporal_step.py", "--rounds", "11", "--steps", "20"], None),
    (("27",), ["benchmarks/dbos_step.py", "--rounds", "11", "--steps", "20"], None),
    (("28",), ["benchmarks/durable_pages.py", "--rounds", "3"], None),
    (("29", "30"), ["benchmarks/mcp_round.py", "--rounds", "0", "--gallery-rounds", "15"], None),
    (("31",), ["benchmarks/write_intent.py", "--rounds", "9", "--writes", "200"], None),
]
# Row 8 on a KeeperPool (row 11): run when the pool's benchmark exists.
OPTIONAL: list[tuple[tuple[str, ...], list[str], Adapter | None]] = [
    (("11",), ["benchmarks/pool.py", "--rounds", "3"], None),
]
# Curves plotted from a benchmark's ``CURVE {json}`` line: (script, title, x, y, log x).
CURVES: list[tuple[list[str], str, str, str, bool]] = [
    (
        ["benchmarks/ensure_scale.py"],
        "ensure() latency vs number of conversations",
        "conversations on one browser",
        "ensure() latency (µs)",
        True,
    ),
    (
        [
            "benchmarks/keeper_write_scale.py",
            "--sizes",
            "100,1000,10000,100000",
            "--rounds",
            "5",
        ],
        "one durable write's cost vs conversations in the keeper (SQLite solid, PostgreSQL dashed)",
        "conversations in the keeper",
        "median cost of one write (ms)",
        True,
    ),
    (
        ["benchmarks/job_loop_workers.py", "--rounds", "2"],
        "durable job loop on PostgreSQL: pages/s vs number of workers",
        "workers (JobLoops, one browser, one PostgreSQL)",
        "committed pages/s",
        False,
    ),
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
        if goal == 0:
            return f"**not met**: {fmt(value, unit)} (goal: none)"
        return f"**not met**: {value / goal:.2f}× the ceiling ({value - goal:+.3g}{unit})"
    if value >= goal:
        return "met"
    return f"**not met**: {value / goal:.2f}× the floor ({value - goal:+.3g}{unit})"


def fmt(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.4f}×" if value < 0.1 else f"{value:.2f}×"
    return f"{value:.1f}{unit}" if abs(value) >= 10 else f"{value:.3g}{unit}"


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
            if "unmeasured" in r:
                lines.append(
                    f"| {row} | {r['compared']} | not measured here | — | {GOALS[row]} "
                    f"| — | {r['unmeasured']} |"
                )
                continue
            lines.append(
                f"| {row} | {r['compared']} | {fmt(float(r['median']), r.get('unit', 'x'))} "
                f"| {spread(r)} | {GOALS[row]} | {verdict(r)} | {r.get('detail', '')} |"
            )
    if plots:
        lines += ["", "## Plots", ""]
        for title, path in plots:
            lines += [f"- [{title}]({path})", "", f"  ![{title}]({path})", ""]
    missed = [
        (row, WHY[row])
        for row in ROWS
        if row in WHY
        and any(
            "unmeasured" not in r and verdict(r).startswith("**not met")
            for r in by_row.get(row, [])
        )
    ]
    if missed:
        lines += ["", "## Why a goal is missed", ""]
        lines += [f"- **Row {row}**: {why}" for row, why in missed]
    reported = [
        (row, REPORTED[row])
        for row in ROWS
        if row in REPORTED and any("unmeasured" not in r for r in by_row.get(row, []))
    ]
    if reported:
        lines += ["", "## What a reported row's difference is", ""]
        lines += [f"- **Row {row}**: {what}" for row, what in reported]
    if notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def splice(previous: str, fresh: str, rows: set[str], note: str) -> str:
    """``previous`` (a BENCHMARKS.md) with the table lines of ``rows`` taken from
    ``fresh`` (an ``--only`` run's rendering of them), everything else kept (pure).

    The machine header and plots stay those of the run that wrote ``previous``; the
    "why missed" and "reported" sections are drawn again from the spliced table's
    verdicts; ``note`` (which rows were measured again, when, at what load) joins its
    notes, so the file says which figures came from which run.
    """

    def table(text: str) -> dict[str, list[str]]:
        by_row: dict[str, list[str]] = {}
        for line in text.splitlines():
            m = re.match(r"^\| (\d+) \|", line)
            if m:
                by_row.setdefault(m[1], []).append(line)
        return by_row

    def section(text: str, title: str) -> str:
        part = text.split(f"\n## {title}\n", 1)
        return part[1].split("\n## ", 1)[0].strip("\n") if len(part) == 2 else ""

    if "| Row | What is compared |" not in previous:
        raise ValueError("the file to splice into is no BENCHMARKS.md table")
    old = table(previous)
    # The fresh rendering says "not measured yet" for every row it did not run.
    new = {
        row: lines
        for row, lines in table(fresh).items()
        if not all("| not measured yet |" in line for line in lines)
    }
    head = previous.split("\n| Row | What is compared |", 1)[0]
    lines = [head, "| Row | What is compared | Median | Spread | Goal | Verdict | Detail |"]
    lines.append("|---|---|---|---|---|---|---|")
    # A row whose benchmark failed this time keeps its earlier lines (the note says so).
    merged = {row: (new if row in rows and row in new else old).get(row, []) for row in ROWS}
    for row, title in ROWS.items():
        lines += merged[row] or [f"| {row} | {title} | not measured yet | — | {GOALS[row]} | — | |"]
    plots = (
        previous.split("\n## Plots\n", 1)[1].split("\n## ", 1)[0]
        if ("\n## Plots\n" in previous)
        else ""
    )
    if plots.strip():
        lines += ["", "## Plots", plots.rstrip("\n")]
    missed = [r for r in ROWS if r in WHY and any("| **not met" in ln for ln in merged[r])]
    if missed:
        lines += ["", "## Why a goal is missed", ""]
        lines += [f"- **Row {r}**: {WHY[r]}" for r in missed]
    measured = [
        r for r in ROWS if r in REPORTED and any("not measured" not in ln for ln in merged[r])
    ]
    if measured:
        lines += ["", "## What a reported row's difference is", ""]
        lines += [f"- **Row {r}**: {REPORTED[r]}" for r in measured]
    # The notes are kept verbatim (a note may run over several lines).
    notes = [n for n in (section(previous, "Notes"), f"- {note}") if n]
    lines += ["", "## Notes", "", *notes]
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


def series_summary(series: dict[str, list[list[float]]]) -> str:
    """Named series of ``[x, y]`` points in words."""
    return "; ".join(
        f"{label}: " + ", ".join(f"{x:g} → {y:.2f}" for x, y in points)
        for label, points in series.items()
    )


def curve_summary(name: str, points: list[list[float]]) -> str:
    """The curve's points in words (for the notes, and when there is no plot)."""
    if name == "ensure_latency":
        return "; ".join(f"{n:g}: median {m:.1f} µs, p99 {p:.1f} µs" for n, m, p in points)
    return "; ".join(
        f"{p[0]:g} worker(s): {p[1]:.1f} pages/s (min {p[2]:.1f}, max {p[3]:.1f})" for p in points
    )


def curve(
    out_dir: Path, script: list[str], title: str, xlabel: str, ylabel: str, logx: bool
) -> tuple[list[tuple[str, str]], str]:
    """Run a curve benchmark and plot its ``CURVE`` line (a PNG) when matplotlib is installed."""
    print(f"== curve: {' '.join(script)}", flush=True)
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
    line = next((x for x in proc.stdout.splitlines() if x.startswith("CURVE ")), None)
    if proc.returncode != 0 or line is None:
        return [], f"`{' '.join(script)}` failed (exit {proc.returncode})"
    data = json.loads(line[len("CURVE ") :])
    name, points = str(data["name"]), data.get("points", [])
    series: dict[str, list[list[float]]] = data.get("series", {})
    words = series_summary(series) if series else curve_summary(name, points)
    summary = f"{title} (`{' '.join(script)}`, {took:.0f} s): {words}"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [], f"{summary}; no plot: matplotlib missing"
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [p[0] for p in points]
    if series:
        for label, pts in series.items():
            style = "-" if label.startswith("sqlite") else "--"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", label=label)
        ax.set_ylim(bottom=0)
    elif name == "ensure_latency":
        ax.plot(xs, [p[1] for p in points], marker="o", label="median")
        ax.plot(xs, [p[2] for p in points], marker="s", label="p99")
    else:
        ax.plot(xs, [p[1] for p in points], marker="o", label="median")
        ax.fill_between(
            xs, [p[2] for p in points], [p[3] for p in points], alpha=0.2, label="min – max"
        )
        ax.set_xticks(xs)
        ax.set_ylim(bottom=0)
    if logx:
        ax.set_xscale("log")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7 if series else None)
    fig.tight_layout()
    png = out_dir / "benchmarks" / "plots" / f"{name}.png"
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return [(title, png.relative_to(out_dir).as_posix())], summary


def from_log(log: str, previous: str = "") -> str:
    """BENCHMARKS.md from the printed output of an earlier full run (same records).

    ``previous``: the file that run wrote; its machine header and notes are kept.
    """
    records: list[Record] = []
    adapters = {" ".join(script): adapter for _, script, adapter in BENCHMARKS + OPTIONAL}
    parts = re.split(r"^== (?:rows [\d, ]+|curve): (.*)$", log, flags=re.M)
    plots: list[tuple[str, str]] = []
    for script, out in zip(parts[1::2], parts[2::2], strict=True):
        if script in adapters:
            adapter = adapters[script]
            records += adapter(out) if adapter else parse(out)
    for _, title, *_rest in CURVES:
        name = "ensure_latency" if "ensure()" in title else "job_loop_workers"
        if (ROOT / "benchmarks" / "plots" / f"{name}.png").exists():
            plots.append((title, f"benchmarks/plots/{name}.png"))
    header = dict(re.findall(r"^- \*\*(\w+)\*\*: (.*)$", previous, flags=re.M))
    kept = previous.split("\n## Notes\n", 1)[1] if "\n## Notes\n" in previous else ""
    notes = [n[2:] for n in kept.splitlines() if n.startswith("- ")]
    notes.append("rendered again from the saved output of that run (`--from-log`)")
    return render(records, header or machine(), notes, plots)


def main() -> None:
    """Run the rows (all, or ``--only``), write the markdown."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--only", default="", help="comma-separated row ids")
    parser.add_argument(
        "--from-log", type=Path, help="render the saved output of a full run instead of running"
    )
    parser.add_argument(
        "--splice",
        action="store_true",
        help="with --only: replace only those rows' lines in --out, keep the rest and its header",
    )
    args = parser.parse_args()
    if args.splice and not args.only:
        parser.error("--splice needs --only")
    # Read before the run: a file that cannot take the rows fails now, not an hour later.
    previous = args.out.read_text(encoding="utf-8") if args.splice else ""
    if args.splice and "| Row | What is compared |" not in previous:
        parser.error(f"--splice: {args.out} holds no BENCHMARKS.md table")
    if args.from_log is not None:
        previous = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        text = from_log(args.from_log.read_text(encoding="utf-8"), previous)
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
        return
    only = {x for x in args.only.split(",") if x}
    load_before = os.getloadavg()[0]
    records: list[Record] = []
    notes: list[str] = []
    optional = [b for b in OPTIONAL if (ROOT / b[1][0]).exists()]
    for rows, script, adapter in BENCHMARKS + optional:
        if only and not only.intersection(rows):
            continue
        print(f"== rows {', '.join(rows)}: {' '.join(script)}", flush=True)
        got, note = run_one(script, adapter)
        records += got
        notes.append(note)
    plots: list[tuple[str, str]] = []
    if not only:
        for script, title, xlabel, ylabel, logx in CURVES:
            got_plots, note = curve(args.out.parent, script, title, xlabel, ylabel, logx)
            plots += got_plots
            notes.append(note)
    fresh = render(records, machine(), notes, plots)
    if args.splice:
        here = machine()
        note = (
            f"Rows {', '.join(sorted(only, key=int))} measured again on {here['Date']} "
            f"(load {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end) "
            f"with `run_all.py --only "
            f"{','.join(sorted(only, key=int))} --splice` and put in place of the earlier "
            "run's; the header describes that earlier run. " + " ".join(n for n in notes if n)
        ).strip()
        fresh = splice(previous, fresh, only, note)
    args.out.write_text(fresh, encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
