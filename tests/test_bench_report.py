"""The BENCHMARKS.md writer renders given results faithfully (no browser, no benchmark run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks._report import parse
from benchmarks.run_all import ROWS, adapt_cdp_reconnect, adapt_guard, render, splice

ROOT = Path(__file__).resolve().parents[1]
MACHINE = {"Date": "2026-11-30 21:00 UTC", "Machine": "2 CPUs", "Python": "3.11"}


def record(row: str, ratios: list[float], goal: float, direction: str) -> dict[str, object]:
    return {
        "row": row,
        "compared": f"thing {row}",
        "ratios": ratios,
        "median": sorted(ratios)[len(ratios) // 2],
        "goal": goal,
        "direction": direction,
        "unit": "x",
        "detail": "",
    }


def test_every_row_appears_and_missing_rows_say_not_measured_yet() -> None:
    """No row of the issue is omitted: unmeasured ones say so."""
    text = render([record("1", [0.004, 0.005, 0.009], 0.01, "<=")], MACHINE)
    table = [line for line in text.splitlines() if line.startswith("| ") and "Row" not in line]
    assert [line.split("|")[1].strip() for line in table] == list(ROWS)
    assert sum("not measured yet" in line for line in table) == len(ROWS) - 1


def test_a_missed_goal_is_reported_with_its_margin_never_as_met() -> None:
    """A median above its ceiling (or below its floor) is 'not met' with the factor."""
    text = render(
        [record("9", [1.10, 1.20, 1.30], 1.05, "<="), record("5", [0.80, 0.90, 0.85], 0.95, ">=")],
        MACHINE,
    )
    row9 = next(line for line in text.splitlines() if line.startswith("| 9 "))
    row5 = next(line for line in text.splitlines() if line.startswith("| 5 "))
    assert "not met" in row9 and "1.14× the ceiling" in row9
    assert "1.20×" in row9 and "1.10× – 1.30× (n=3)" in row9
    assert "not met" in row5 and "0.89× the floor" in row5


def test_a_met_goal_shows_median_spread_and_the_machine_header() -> None:
    """Met rows say 'met'; the header carries every machine field given."""
    text = render([record("1", [0.004, 0.005, 0.009], 0.01, "<=")], MACHINE)
    row1 = next(line for line in text.splitlines() if line.startswith("| 1 "))
    assert "| 0.0050× |" in row1 and "| met |" in row1
    for key, value in MACHINE.items():
        assert f"**{key}**: {value}" in text


def test_bench_records_and_legacy_outputs_parse_into_rows() -> None:
    """BENCH json lines and the guard's printed pairs are read."""
    assert parse('noise\nBENCH {"row": "1", "median": 0.5}\n') == [{"row": "1", "median": 0.5}]
    guard = adapt_guard("guarded: 110, 120\nplain:   100, 100\n")
    assert guard[0]["ratios"] == [1.1, 1.2]


def test_a_row_that_could_not_run_here_says_why() -> None:
    """An unmeasured record (a peer missing on this machine) shows its reason, no figure."""
    unmeasured = {"row": "10", "compared": "ours vs theirs", "unmeasured": "npm is missing"}
    text = render([unmeasured], MACHINE)
    row10 = next(line for line in text.splitlines() if line.startswith("| 10 "))
    assert "not measured here" in row10 and "npm is missing" in row10 and "met" not in row10


def test_reliability_table_sums_what_each_trial_measured() -> None:
    """RELIABILITY.md rows sum the validator's counts per fault and store; unmeasured rows
    say "not measured"; failed tests are listed by name."""
    from scripts.write_reliability import render as render_reliability

    base = {
        "seed": 7,
        "duplicate_commits": 0,
        "re_extracted": 1,
        "state": "done",
        "store": "sqlite",
        "recover_s": 0.5,
    }
    trials = [
        {"test": "t.py::test_browser_dies_mid_step[seed7-1]", "lost": 0, "duplicated": 0,
         "false_completion": False, **base},
        {"test": "t.py::test_browser_dies_mid_step[seed7-2]", "lost": 2, "duplicated": 1,
         "false_completion": True, **{**base, "recover_s": 2.0}},
        {"row": "handle bypasses", "test": "x", "seed": 7, "attempts": 30, "with_login": 0},
        # The same trial's record for the durable engines' table: not counted here.
        {"row": "engine", "test": "t.py::test_browser_dies_mid_step[seed7-1]", "seed": 7,
         "engine": "dbos", "fault": "process_sigkill", "lost": 0, "duplicated": 0},
    ]  # fmt: skip
    text = render_reliability(
        trials, ["t.py::test_browser_dies_mid_step[seed7-2]"], [],
        {"attempts": "86", "leaked_requests": "0"}, {}, {},
    )  # fmt: skip
    row = next(line for line in text.splitlines() if line.startswith("| Browser dies mid-step"))
    assert row == (
        "| Browser dies mid-step (fake browser) | sqlite | 2 | 2 | 1 | 0 | 2 | 1 | done 2 | "
        "1.2 s / 2.0 s | 7 |"
    )
    assert "| Browser dies mid-step (fake browser) | postgres | not measured" in text
    assert "Failed tests: 1." in text and "`t.py::test_browser_dies_mid_step[seed7-2]`" in text
    assert "| 86 | 0 |" in text and "| 30 | 0 |" in text
    assert "Hypothesis state machine: not measured." in text


def test_the_logins_table_sums_beliefs_false_beliefs_and_renewals_per_shape_and_fault() -> None:
    """Two trials of one shape and fault become one row: beliefs counted, false beliefs,
    intruder requests, renewals and human asks summed; "left after sweep" only for a sweep."""
    from scripts.write_reliability import render_logins

    trial = {
        "row": "logins",
        "shape": "TOTP",
        "fault": "sigkill",
        "belief": "renewed",
        "false_lost": False,
        "false_signed_in": False,
        "unverified_signed_out": False,
        "credential_left": False,
        "intruder_requests": 0,
        "renewals": 1,
        "human_asks": 0,
    }
    asked = {**trial, "belief": "lost", "renewals": 0, "human_asks": 1, "intruder_requests": 2}
    lines = render_logins([trial, asked, {"row": "boundary"}], None)
    rows = [line for line in lines if line.startswith("| TOTP")]
    assert rows == [
        "| TOTP | SIGKILL of Chromium | 2 | lost 1, renewed 1 | 0 | 0 | 0 | — | 2 | 1 | 1 |"
    ]


def test_the_engine_table_sums_each_fault_per_engine_and_counts_trials_told_once() -> None:
    """Engine trials of one fault and engine become one row: lost, duplicated, stale
    writes and re-read summed, "told once" counting trials told exactly once; a fault
    with nothing to tell says "—"."""
    from scripts.write_reliability import render_engines

    trial = {"row": "engine", "engine": "temporal", "fault": "worker_sigkill", "seed": 7,
             "lost": 0, "duplicated": 0, "told": 1, "stale_writes": 0, "re_read": 2,
             "recover_s": 4.0}  # fmt: skip
    twice = {**trial, "told": 2, "duplicated": 1, "recover_s": 6.0}
    write = {**trial, "fault": "write_unknown", "told": None, "re_read": 0, "recover_s": None}
    lines = render_engines([trial, twice, write, {"row": "logins"}])
    rows = [ln for ln in lines if "| temporal" in ln]
    assert rows == [
        "| Worker SIGKILL mid-step (another worker takes the profile) | temporal | 2 | 0 | 1 | "
        "1 of 2 | 0 | 4 | 5.0 s / 6.0 s | 7 |",
        "| Write outcome unknown (answer or request lost) | temporal | 1 | 0 | 0 | — | 0 | 0 | "
        "— | 7 |",
    ]


def test_dbos_engine_trials_are_a_row_per_system_database_after_temporal_s_row() -> None:
    """A DBOS trial names its system database (``store``): each database is a row of its
    own, labelled with it, under the fault's Temporal row."""
    from scripts.write_reliability import render_engines

    base = {"row": "engine", "fault": "browser_sigkill", "seed": 7, "lost": 0, "duplicated": 0,
            "told": 1, "stale_writes": 0, "re_read": 1, "recover_s": 2.0}  # fmt: skip
    records = [
        {**base, "engine": "dbos", "store": "sqlite"},
        {**base, "engine": "dbos", "store": "postgres"},
        {**base, "engine": "dbos", "store": "postgres", "told": 2},
        {**base, "engine": "temporal"},
    ]
    rows = [ln for ln in render_engines(records) if ln.startswith("| Browser")]
    assert rows == [
        "| Browser SIGKILL mid-step (postgres system database) | dbos | 2 | 0 | 0 | 1 of 2 | 0 "
        "| 2 | 2.0 s / 2.0 s | 7 |",
        "| Browser SIGKILL mid-step (sqlite system database) | dbos | 1 | 0 | 0 | 1 of 1 | 0 | 1 "
        "| 2.0 s / 2.0 s | 7 |",
        "| Browser SIGKILL mid-step | temporal | 1 | 0 | 0 | 1 of 1 | 0 | 1 | 2.0 s / 2.0 s | 7 |",
    ]


RELIABILITY = """# Reliability

- **Date**: then

## Fault matrix

| kept | row |

## Durable engines (the test site's own log as the truth)

Measured long ago.

| old | engine row |

## Tabs (the site's own log as the truth)

| old | tab row |

## Attacks (server-counted)

### The agent boundary (server-counted)

| kept | too |
"""


def _write_reliability(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "write_reliability.py"), *args],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip


def test_only_engines_from_records_replaces_that_section_alone_and_says_what_measured_it(
    tmp_path: Path,
) -> None:
    """``--only-engines --records`` runs nothing: it renders the engine rows of the files
    given (the tabs section stays when they hold no tab rows) between the file's other
    sections, byte for byte as they were, under a line naming the tests and trials."""
    temporal, dbos = tmp_path / "temporal.jsonl", tmp_path / "dbos.jsonl"
    trial = {"row": "engine", "engine": "temporal", "fault": "write_unknown", "seed": 3,
             "lost": 0, "duplicated": 0, "told": None, "stale_writes": 0, "re_read": 0,
             "recover_s": 1.5,
             "test": "tests/integrations/test_temporal_faults.py::t[a]"}  # fmt: skip
    temporal.write_text(json.dumps(trial) + "\n" + json.dumps(trial) + "\n")
    on_dbos = {**trial, "engine": "dbos", "store": "postgres",
               "test": "tests/integrations/test_dbos_faults.py::t[postgres-a]"}  # fmt: skip
    dbos.write_text(json.dumps(on_dbos) + "\n")
    out = tmp_path / "RELIABILITY.md"
    out.write_text(RELIABILITY)
    done = _write_reliability("--only-engines", "--records", str(temporal), str(dbos),
                              "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    before = RELIABILITY.partition("## Durable engines")[0]
    assert text.startswith(before)
    assert text.endswith(RELIABILITY[RELIABILITY.index("## Tabs") :])
    section = text[len(before) : text.index("## Tabs")]
    assert "old | engine row" not in section and "Measured long ago" not in section
    assert (
        "Measured by `test_dbos_faults.py` (1 trials), `test_temporal_faults.py` (2 trials)"
        in section
    )
    assert "| Write outcome unknown (answer or request lost) | temporal | 2 |" in section
    assert "(postgres system database) | dbos | 1 |" in section
    # With tab rows, the tabs section is rendered from them too; the rest stays.
    tabs = tmp_path / "tabs.jsonl"
    tab = {"row": "tab_truth", "how": "submit", "named_right": 1, "reopened_right": 1,
           "seed": 3, "test": "t.py::x"}  # fmt: skip
    tabs.write_text(json.dumps(tab) + "\n")
    done = _write_reliability("--only-engines", "--records", str(tabs), "--out", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "| submit | 1 | 1 | 1 |" in text and "old | tab row" not in text
    assert text.endswith(RELIABILITY[RELIABILITY.index("## Attacks") :])


def test_only_engines_refuses_records_it_cannot_read_and_changes_nothing(tmp_path: Path) -> None:
    """A records file that does not exist, or ``--records`` with tests to run: a usage
    error (exit 2) naming it, and the file is left as it was."""
    out = tmp_path / "RELIABILITY.md"
    out.write_text(RELIABILITY)
    missing = tmp_path / "nope.jsonl"
    done = _write_reliability("--only-engines", "--records", str(missing), "--out", str(out))
    assert done.returncode == 2 and "nope.jsonl" in done.stderr
    done = _write_reliability(
        "--only-engines", "--records", str(out), "--tests", "tests/real/test_tab_url_truth.py"
    )
    assert done.returncode == 2 and "--records" in done.stderr
    assert out.read_text() == RELIABILITY


def test_the_tab_table_counts_each_way_a_tab_moved_named_and_reopened_right() -> None:
    """Tab trials of one way become one row: trials, named right and reopened right
    summed; other records are ignored."""
    from scripts.write_reliability import render_tabs

    good = {"row": "tab_truth", "how": "submit", "named_right": 1, "reopened_right": 1}
    wrong = {**good, "named_right": 0}
    lines = render_tabs([good, wrong, {**good, "how": "back"}, {"row": "engine"}])
    assert [ln for ln in lines if ln.startswith("| back") or ln.startswith("| submit")] == [
        "| back | 1 | 1 | 1 |",
        "| submit | 2 | 1 | 2 |",
    ]


def test_a_missed_goal_says_why_and_a_met_one_does_not() -> None:
    """Rows below their goal get the profiled reason; met rows get none."""
    text = render(
        [record("5", [0.80, 0.90, 0.85], 0.95, ">="), record("1", [0.004], 0.01, "<=")], MACHINE
    )
    assert "## Why a goal is missed" in text and "**Row 5**" in text
    assert "**Row 1**" not in text


def test_cdp_reconnect_row_counts_false_restarts_over_at_least_100_cuts() -> None:
    """Row 12 is met only with no false restart over ≥ 100 cuts; latency is its detail."""
    out = "cut 1: re-adopted in 40.0 ms\nRESULT cut_to_readopt_ms_median=41.5 max=90.2 "
    met = adapt_cdp_reconnect(out + "false_restarts=0 cuts=100\n")
    missed = adapt_cdp_reconnect(out + "false_restarts=2 cuts=150\n")
    few = adapt_cdp_reconnect(out + "false_restarts=0 cuts=20\n")
    row = {
        name: next(line for line in render(r, MACHINE).splitlines() if line.startswith("| 12 "))
        for name, r in (("met", met), ("missed", missed), ("few", few))
    }
    assert "| 0 false restarts |" in row["met"] and "| met |" in row["met"]
    assert "median 41.5 ms, max 90.2 ms" in row["met"] and "0 of 100 cuts" in row["met"]
    assert "**not met**: 2 false restarts" in row["missed"] and "2 of 150 cuts" in row["missed"]
    assert "not measured here" in row["few"] and "met" not in row["few"].split("|")[6]


def test_a_reported_row_says_what_its_difference_is_and_an_unmeasured_one_does_not() -> None:
    """Row 30 (no goal) carries its profile when measured; not when it was not measured."""
    measured = {**record("30", [1.2, 1.3, 1.25], 1.0, "<="), "goal": None}
    text = render([measured], MACHINE)
    assert "## What a reported row's difference is" in text and "**Row 30**" in text
    row30 = next(line for line in text.splitlines() if line.startswith("| 30 "))
    assert "| no goal |" in row30
    unmeasured = {"row": "30", "compared": "ours vs theirs", "unmeasured": "npm is missing"}
    assert "**Row 30**" not in render([unmeasured], MACHINE)


def test_splicing_rows_replaces_their_lines_alone_and_redraws_why_from_the_table() -> None:
    """``--only --splice`` puts the fresh rows in place, keeps every other line, the header
    and the notes, and draws "why missed" from the spliced verdicts."""
    before = render(
        [record("5", [0.80, 0.90, 0.85], 0.95, ">="), record("1", [0.004], 0.01, "<=")],
        MACHINE,
        notes=["the earlier run's note"],
    )
    fresh = render([record("5", [0.96, 0.99, 0.97], 0.95, ">=")], {"Date": "later"})
    text = splice(before, fresh, {"5"}, "row 5 measured again")
    row5 = [line for line in text.splitlines() if line.startswith("| 5 ")]
    assert len(row5) == 1 and "| 0.97× |" in row5[0] and "| met |" in row5[0]
    row1 = next(line for line in text.splitlines() if line.startswith("| 1 "))
    assert row1 == next(line for line in before.splitlines() if line.startswith("| 1 "))
    assert "- **Date**: 2026-11-30 21:00 UTC" in text and "later" not in text
    assert "**Row 5**" not in text  # met now: no reason for a miss
    assert "- the earlier run's note" in text and "- row 5 measured again" in text
    # A row the fresh run lacks (its benchmark failed) keeps its earlier line.
    kept = splice(before, render([], {}), {"5"}, "row 5 failed")
    assert [ln for ln in kept.splitlines() if ln.startswith("| 5 ")] == [
        ln for ln in before.splitlines() if ln.startswith("| 5 ")
    ]
    assert "**Row 5**" in kept


def test_splicing_refuses_a_file_without_the_table(tmp_path: Path) -> None:
    """``--splice`` into a file that is no BENCHMARKS.md fails before any benchmark runs
    and leaves the file as it was."""
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# something else\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "benchmarks/run_all.py", "--only", "1", "--splice", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert proc.returncode == 2 and "holds no BENCHMARKS.md table" in proc.stderr
    assert out.read_text(encoding="utf-8") == "# something else\n"
