"""``make chaos``: run the fault matrix, the attack rows and the soaks; write RELIABILITY.md.

1. Every test marked ``chaos`` (``pytest -m chaos``) with ``FAULT_TRIALS`` trials per
   fault (default 20), on SQLite and on PostgreSQL, and the worker killed at *every*
   store statement boundary (``FAULT_ALL_BOUNDARIES=1``). Each trial's independent
   validator appends what it measured to a ``FAULT_REPORT`` file (``tests/_chaos.py``):
   lost, duplicated, commits per step, re-extracted records, false completion, final
   state, time from the fault to the validated end state.
2. The Guard attack suite (``demos/guard_attacks.py``, server-counted arrivals).
3. Soaks: the keeper's hypothesis state machine at 10,000 examples, and
   ``scripts/soak_chromium.py`` (1,000 real-Chromium turns over 100 conversations).

Whatever did not run says "not measured" with the reason. Generated; never edit by hand.

Usage: ``python scripts/write_reliability.py [--trials N] [--examples N] [--turns N]
[--out RELIABILITY.md]``. ``--only-logins`` reruns only the logins table;
``--only-engines`` only the durable engines' rows and the tabs rows (or, with
``--records FILE ...``, renders them from ``FAULT_REPORT`` files already collected,
running nothing); either keeps the rest of the file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: Fault rows in the order of issue 14, by the test function that measures them.
FAULTS: dict[str, str] = {
    "test_controller_stops_after_extraction_before_commit": (
        "Controller stops after extraction, before commit"
    ),
    "test_commit_succeeds_but_the_acknowledgement_is_lost": "Commit made, acknowledgement lost",
    "test_unexpected_navigation_during_the_next_step": "Unexpected navigation",
    "test_login_expires_and_a_human_takes_over": (
        "Login expired on the server, then human takeover (sign-in, resume)"
    ),
    "test_budget_expires_with_partial_work_and_a_resume_point": (
        "Budget expiry (deadline or no progress)"
    ),
    "test_browser_dies_mid_step": "Browser dies mid-step (fake browser)",
    "test_browser_sigkilled_mid_step_on_chromium": "Browser SIGKILL mid-step (real Chromium)",
    "test_a_worker_killed_at_every_sqlite_statement_boundary_loses_nothing": (
        "Worker SIGKILL at every store statement boundary"
    ),
    "test_a_worker_killed_at_every_postgres_statement_boundary_loses_nothing": (
        "Worker SIGKILL at every store statement boundary"
    ),
    "test_expired_lease_holder_cannot_commit_after_a_takeover": (
        "Stale worker committing after takeover"
    ),
    "test_two_workers_racing_for_one_job": "Two workers racing",
    "test_a_sweep_mid_job": "A sweep mid-job",
    "test_postgres_restarted_under_three_workers": (
        "PostgreSQL restarted (pg_ctl stop -m immediate + start) under 3 workers"
    ),
    "test_disk_full_under_sqlite": "Disk full under SQLite (a real tmpfs filled up)",
    "test_a_dbos_process_sigkilled_mid_workflow_is_recovered_told_what_the_death_took_once": (
        "DBOS: process SIGKILL mid-workflow or after a write, recovered in a new process"
    ),
}
STORES = ("sqlite", "postgres")
#: Rows that exist on one store only.
ONLY_ON = {
    "PostgreSQL restarted (pg_ctl stop -m immediate + start) under 3 workers": "postgres",
    "Disk full under SQLite (a real tmpfs filled up)": "sqlite",
}


def fault_name(test: str) -> str:
    """The test function's name in a pytest node id (``path::name[params]``)."""
    return test.split("::")[-1].split("[")[0]


def tally(records: Sequence[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (fault row, store): trials, summed counts, final states, recovery times.

    A test's ``row="engine"`` records are the durable engines' table's, not this one's.
    """
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for t in records:
        name = FAULTS.get(fault_name(t["test"]))
        if name is None or t.get("row") == "engine":
            continue
        r = rows.setdefault(
            (name, t.get("store", "sqlite")),
            {"trials": set(), "jobs": 0, "lost": 0, "duplicated": 0, "duplicate_commits": 0,
             "re_extracted": 0, "false_completions": 0, "states": {}, "seeds": set(),
             "recover": []},
        )  # fmt: skip
        r["trials"].add((t["test"], t.get("statement")))
        r["jobs"] += 1
        for k in ("lost", "duplicated", "duplicate_commits", "re_extracted"):
            r[k] += int(t[k])
        r["false_completions"] += int(bool(t["false_completion"]))
        r["states"][t["state"]] = r["states"].get(t["state"], 0) + 1
        r["seeds"].add(t["seed"])
        if t.get("recover_s") is not None:
            r["recover"].append(float(t["recover_s"]))
    return rows


#: The fault rows on a durable execution engine (``row="engine"`` records), in order.
ENGINE_FAULTS = {
    "worker_sigkill": "Worker SIGKILL mid-step (another worker takes the profile)",
    "process_sigkill": (
        "Process SIGKILL mid-workflow (a page, or right after billing answered a refund), "
        "recovered in a new process"
    ),
    "browser_sigkill": "Browser SIGKILL mid-step",
    "server_signout": "Server-side sign-out mid-step (a person signs in, the step resumes)",
    "write_unknown": "Write outcome unknown (answer or request lost)",
    "lease_stolen": "Lease stolen from a stalled worker (fencing)",
}


def render_tabs(records: Sequence[dict[str, Any]]) -> list[str]:
    """The "Tabs" section: where a lost tab is named and reopened, against the site's log."""
    lines = [
        "## Tabs (the site's own log as the truth)",
        "",
        "A tab opened at one page moves itself (a form, a link, a script, a redirect,",
        "history), then Chromium is SIGKILLed (`tests/real/test_tab_url_truth.py`). **Named",
        "right**: the turn's lost tab, its text and the MCP banner give the URL the site last",
        "served it (or, for history.pushState/replaceState, which reach no server, the URL",
        "the script gave). **Reopened right**: reopening it loads that URL at the site.",
        "",
        "| Moved by | Trials | Named right | Reopened right |",
        "|---|---|---|---|",
    ]
    rows: dict[str, list[dict[str, Any]]] = {}
    for t in (t for t in records if t.get("row") == "tab_truth"):
        rows.setdefault(str(t["how"]), []).append(t)
    if not rows:
        lines.append("| (none) | not measured | — | — |")
    for how, trials in sorted(rows.items()):
        named = sum(int(t["named_right"]) for t in trials)
        reopened = sum(int(t["reopened_right"]) for t in trials)
        lines.append(f"| {how} | {len(trials)} | {named} | {reopened} |")
    return lines


#: The tests that measure the durable engines' rows, and the tabs rows.
ENGINE_TESTS = (
    "tests/integrations/test_temporal_faults.py",
    "tests/integrations/test_dbos_faults.py",
    "tests/integrations/test_dbos_recovery.py",
)
TAB_TESTS = ("tests/real/test_tab_url_truth.py",)
ENGINES_HEADING = "## Durable engines (the test site's own log as the truth)"
TABS_HEADING = "## Tabs (the site's own log as the truth)"


def render_engines(records: Sequence[dict[str, Any]], note: str | None = None) -> list[str]:
    """The "Durable engines" section: each engine's fault rows, counted at the site.

    A record with a ``store`` (DBOS: its system database) is a row of its own.
    """
    lines = [ENGINES_HEADING, ""]
    if note:
        lines += [note, ""]
    lines += [
        "The fault rows with browser steps run by a durable execution engine (a real",
        "Temporal dev server: `tests/integrations/test_temporal_faults.py`; a real DBOS on",
        "the tests' PostgreSQL and on SQLite: `tests/integrations/test_dbos_faults.py`, and",
        "`tests/integrations/test_dbos_recovery.py` for its process SIGKILL), real Chromium",
        "and the local sites. **Lost**: pages of a walk the site never served or the steps'",
        "results lack; refunds never made. **Duplicated**: pages the result holds twice;",
        "refunds beyond one per idempotency key, or a POST after one reached the site.",
        "**Told once**: trials where exactly one step's facts named what the fault took.",
        "**Stale writes**: requests a worker sent after its profile's lease was taken.",
        "**Re-read**: pages served again (repeated work, not duplicated output).",
        "",
        "| Fault | Engine | Trials | Lost | Duplicated | Told once | Stale writes | "
        "Re-read | Recover (median / max) | Seed |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    cells: dict[tuple[str, str, str], dict[str, Any]] = {}
    for t in (t for t in records if t.get("row") == "engine"):
        c = cells.setdefault(
            (str(t["fault"]), str(t["engine"]), str(t.get("store") or "")),
            {"trials": 0, "lost": 0, "duplicated": 0, "told_once": 0, "told_asked": 0,
             "stale": 0, "re_read": 0, "recover": [], "seeds": set()},
        )  # fmt: skip
        c["trials"] += 1
        c["lost"] += int(t["lost"])
        c["duplicated"] += int(t["duplicated"])
        if t.get("told") is not None:
            c["told_asked"] += 1
            c["told_once"] += int(t["told"] == 1)
        c["stale"] += int(t.get("stale_writes") or 0)
        c["re_read"] += int(t.get("re_read") or 0)
        if t.get("recover_s") is not None:
            c["recover"].append(float(t["recover_s"]))
        c["seeds"].add(t["seed"])
    if not cells:
        lines.append("| (none) | not measured | — | the tests did not run |" + " |" * 6)
    order = list(ENGINE_FAULTS)

    def key(cell: tuple[str, str, str]) -> tuple[int, str, str]:
        fault, engine, store = cell
        return (order.index(fault) if fault in order else len(order), engine, store)

    for (fault, engine, store), c in sorted(cells.items(), key=lambda kv: key(kv[0])):
        told = f"{c['told_once']} of {c['told_asked']}" if c["told_asked"] else "—"
        seeds = ", ".join(str(s) for s in sorted(c["seeds"]))
        name = ENGINE_FAULTS.get(fault, fault) + (f" ({store} system database)" if store else "")
        lines.append(
            f"| {name} | {engine} | {c['trials']} | {c['lost']} | "
            f"{c['duplicated']} | {told} | {c['stale']} | {c['re_read']} | "
            f"{seconds(c['recover'])} | {seeds} |"
        )
    return lines


def replace_section(text: str, heading: str, section: Sequence[str], before: str) -> str:
    """``text`` with the section under ``heading`` (up to the next ``## `` heading)
    replaced by ``section``; without one, ``section`` goes in before ``before``."""
    if heading in text:
        head, _, rest = text.partition(heading)
        nxt = re.search(r"^## ", rest, re.M)
        tail = rest[nxt.start() :] if nxt else ""
        return head + "\n".join(section) + "\n\n" + tail
    head, sep, rest = text.partition(before)
    return head + "\n".join(section) + "\n\n" + sep + rest


def write_engines(records: Sequence[dict[str, Any]], note: str, out: Path) -> None:
    """Replace the durable engines' section of ``out`` (and the tabs section, when the
    records hold tab rows) with what ``records`` measured; keep the rest."""
    text = out.read_text(encoding="utf-8")
    text = replace_section(text, ENGINES_HEADING, render_engines(records, note), TABS_HEADING)
    if any(t.get("row") == "tab_truth" for t in records):
        text = replace_section(text, TABS_HEADING, render_tabs(records), "## Attacks")
    out.write_text(text, encoding="utf-8")
    print(f"wrote the durable engines section of {out}")


def only_engines(trials: int, out: Path, tests: Sequence[str], save: Path | None) -> None:
    """Run only the durable engines' rows (and the tabs rows) of ``tests``; replace their
    sections of ``out``, keeping the rest. ``save``: keep the trial records there too."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAULT_TRIALS": str(trials)}
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        report = Path(tmp) / "faults.jsonl"
        env["FAULT_REPORT"] = str(report)
        t0 = time.monotonic()
        proc = run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "chaos",
             "-rfEs", *tests],
            env, 4 * 3600,
        )  # fmt: skip
        elapsed = time.monotonic() - t0
        text = report.read_text(encoding="utf-8") if report.exists() else ""
    if save is not None:
        save.write_text(text, encoding="utf-8")
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", proc.stdout, re.M)
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    names = " ".join(Path(t).name for t in tests)
    note = (
        f"Measured {when} by `--only-engines --trials {trials} --tests {names}` "
        f"({elapsed / 60:.1f} min, {len(failed)} failed tests); "
        "the rest of this file is from the run in its header."
    )
    write_engines([json.loads(ln) for ln in text.splitlines()], note, out)
    if proc.returncode != 0:
        sys.exit(proc.returncode)


def engines_from_records(files: Sequence[Path], out: Path) -> None:
    """Render the durable engines' section of ``out`` (and the tabs section, when they
    hold tab rows) from ``FAULT_REPORT`` files already collected; run nothing."""
    records = [
        json.loads(ln)
        for f in files
        for ln in f.read_text(encoding="utf-8").splitlines()
        if ln.strip()
    ]
    shown = [t for t in records if t.get("row") in ("engine", "tab_truth")]
    per_file: dict[str, int] = {}
    for t in shown:
        name = Path(str(t["test"]).split("::")[0]).name
        per_file[name] = per_file.get(name, 0) + 1
    stamps = sorted(datetime.datetime.fromtimestamp(f.stat().st_mtime, datetime.UTC) for f in files)
    when = stamps[-1].strftime("%Y-%m-%d %H:%M UTC") if stamps else "—"
    measured = ", ".join(f"`{n}` ({k} trials)" for n, k in sorted(per_file.items()))
    note = (
        f"Measured by {measured or 'no trials'}, their `FAULT_REPORT` records last written "
        f"{when} (rendered with `--only-engines --records`); "
        "the rest of this file is from the run in its header."
    )
    write_engines(records, note, out)


def seconds(values: Sequence[float]) -> str:
    """Median and max of durations, in ms below a second."""
    if not values:
        return "—"

    def fmt(v: float) -> str:
        return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.1f} s"

    return f"{fmt(statistics.median(values))} / {fmt(max(values))}"


#: The logins table is written between these (``--only-logins`` replaces just it).
LOGINS_START = "<!-- logins table: scripts/write_reliability.py -->"
LOGINS_END = "<!-- end of the logins table -->"
LOGIN_FAULTS = {
    "sigkill": "SIGKILL of Chromium",
    "clean_close": "clean close",
    "idle_sweep": "idle sweep (default: logins deleted first)",
    "server_signout": "server-side sign-out, then a clean restart",
    # (for the single sign-on shape: every session at the identity provider ended)
    "new_device": "server-side sign-out, a clean restart, a sign-in page no recipe knows",
}


def render_logins(records: Sequence[dict[str, Any]], note: str | None) -> list[str]:
    """The "Logins" section: per site shape and fault, beliefs against the site's word."""
    lines = [LOGINS_START, "## Logins (the site's own word as the truth)", ""]
    lines += [
        "Each trial signs in to seven kinds of site in one conversation of a new profile on",
        "real Chromium (a TOTP site by its sign-in recipe), injects one fault, and compares",
        "what `ensure()` then says of each login with the account the site serves the",
        "owner's next request as (`tests/real/test_chaos_login_truth.py`; a re-issued cookie",
        "without a probe, relaunched three times, the last by the row's fault:",
        "`tests/real/test_chaos_reissue_truth.py`; an SPA's token beside app state:",
        "`tests/real/test_chaos_storage_login_truth.py`). A lost login with a",
        "recipe is renewed (`renew_login`): **Renewals**, or **Human asks** when the renewal",
        "needs a person. **False: lost** — told lost while the site serves the account.",
        "**False: signed in** — confirmed, renewed (or silent) while the site",
        'serves nobody. **Survived, signed out** — told "survived, re-validate before',
        "acting\" while the site serves nobody: the keeper's stated uncertainty, which only",
        "a probe can resolve (a server-side sign-out is invisible from the browser).",
        "**Left after sweep** — the swept profile still signed in. **Intruder requests** —",
        "requests with the login that reached the site from a conversation without a grant.",
        "A login made through an OpenID Connect provider (`tests/real/test_chaos_sso_truth.py`,",
        "a real `oidc-provider` and its relying parties): the truth is app's own log; intruder",
        "requests count every answer the servers gave as the account to a conversation without",
        "a grant, a sign-in at another relying party through the provider's session included;",
        "left after sweep, the swept profile signing in at app or, silently, at another one.",
    ]
    if note:
        lines += ["", note]
    lines += [
        "",
        "| Site shape | Fault | Trials | Beliefs | False: lost | False: signed in | "
        "Survived, signed out | Left after sweep | Intruder requests | Renewals | Human asks |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for t in (t for t in records if t.get("row") == "logins"):
        c = cells.setdefault(
            (str(t["shape"]), str(t["fault"])),
            {"trials": 0, "beliefs": {}, "false_lost": 0, "false_signed_in": 0,
             "unverified": 0, "left": 0, "intruder": 0, "renewals": 0, "human_asks": 0},
        )  # fmt: skip
        c["trials"] += 1
        c["beliefs"][t["belief"]] = c["beliefs"].get(t["belief"], 0) + 1
        c["false_lost"] += int(bool(t["false_lost"]))
        c["false_signed_in"] += int(bool(t["false_signed_in"]))
        c["unverified"] += int(bool(t["unverified_signed_out"]))
        c["left"] += int(bool(t["credential_left"]))
        c["intruder"] += int(t["intruder_requests"])
        c["renewals"] += int(t.get("renewals", 0))
        c["human_asks"] += int(t.get("human_asks", 0))
    if not cells:
        lines.append("| (none) | not measured | — | the test did not run |" + " |" * 7)
    order = list(LOGIN_FAULTS)
    for (shape, fault), c in sorted(
        cells.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]) if kv[0][1] in order else 9)
    ):
        beliefs = ", ".join(f"{b} {n}" for b, n in sorted(c["beliefs"].items()))
        left = str(c["left"]) if fault == "idle_sweep" else "—"
        lines.append(
            f"| {shape} | {LOGIN_FAULTS.get(fault, fault)} | {c['trials']} | {beliefs} | "
            f"{c['false_lost']} | {c['false_signed_in']} | {c['unverified']} | {left} | "
            f"{c['intruder']} | {c['renewals']} | {c['human_asks']} |"
        )
    return [*lines, LOGINS_END]


#: The tests that write the logins table's rows.
LOGIN_TESTS = (
    "tests/real/test_chaos_login_truth.py",
    "tests/real/test_chaos_sso_truth.py",
    "tests/real/test_chaos_reissue_truth.py",
    "tests/real/test_chaos_storage_login_truth.py",
)


def merged_rows(old: str, new: list[str]) -> list[str]:
    """The table rows of ``new`` (rendered lines) and those of ``old`` (the section as it
    stands) whose site shape ``new`` does not measure, sorted as :func:`render_logins` does."""

    def rows(lines: Sequence[str]) -> list[str]:
        return [ln for ln in lines if ln.startswith("| ") and not ln.startswith("| Site shape")]

    fresh = rows(new)
    shapes = {ln.split(" | ")[0] for ln in fresh}
    kept = [ln for ln in rows(old.splitlines()) if ln.split(" | ")[0] not in shapes]
    order = [LOGIN_FAULTS.get(f, f) for f in LOGIN_FAULTS]

    def key(line: str) -> tuple[str, int]:
        shape, fault = line.split(" | ")[:2]
        return shape, order.index(fault) if fault in order else len(order)

    return sorted([*kept, *fresh], key=key)


def only_logins(trials: int, out: Path, tests: Sequence[str] = LOGIN_TESTS) -> None:
    """Run only the logins rows and replace that table in ``out`` (the rest is kept).

    With ``tests`` a part of :data:`LOGIN_TESTS`, only the site shapes they measure are
    replaced; the table's other rows stay as they were measured (the note says so).
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAULT_TRIALS": str(trials)}
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        report = Path(tmp) / "faults.jsonl"
        env["FAULT_REPORT"] = str(report)
        t0 = time.monotonic()
        proc = run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", *tests],
            env, 3 * 3600,
        )  # fmt: skip
        elapsed = time.monotonic() - t0
        lines = report.read_text(encoding="utf-8").splitlines() if report.exists() else []
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", proc.stdout, re.M)
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    records = [json.loads(ln) for ln in lines]
    text = out.read_text(encoding="utf-8")
    partial = set(tests) != set(LOGIN_TESTS)
    what = " ".join(Path(t).name for t in tests) if partial else ""
    note = (
        f"Measured {when} with `--only-logins --trials {trials}"
        f"{' --tests ' + what if partial else ''}` ({elapsed / 60:.1f} min, "
        f"{len(failed)} failed tests); the rest of this file is from the run in its header."
    )
    section_lines = render_logins(records, note)
    if partial and LOGINS_START in text:
        old = text.partition(LOGINS_START)[2].partition(LOGINS_END)[0]
        earlier = re.findall(r"^Measured .*$", old, re.M)
        notes = [note, *(n for n in earlier if n != note)]
        intro = section_lines[: section_lines.index(note)]
        table_at = next(i for i, ln in enumerate(section_lines) if ln.startswith("| Site shape"))
        spaced: list[str] = []
        for n in notes:
            spaced += [n, ""]
        section_lines = [
            *intro,
            *spaced[:-1],
            *section_lines[section_lines.index(note) + 1 : table_at + 2],
            *merged_rows(old, section_lines),
            LOGINS_END,
        ]
    section = "\n".join(section_lines)
    if LOGINS_START in text:
        head, _, rest = text.partition(LOGINS_START)
        text = head + section + rest.partition(LOGINS_END)[2]
    else:
        head, sep, rest = text.partition("## Soaks")
        text = head + section + "\n\n" + sep + rest
    out.write_text(text, encoding="utf-8")
    print(f"wrote the logins table of {out}")
    if proc.returncode != 0:
        sys.exit(proc.returncode)


def render(
    records: Sequence[dict[str, Any]],
    failed: Sequence[str],
    skipped: Sequence[str],
    guard: dict[str, str] | None,
    soaks: dict[str, Any],
    header: dict[str, str],
) -> str:
    """RELIABILITY.md from the trial records, failed and skipped tests, guard and soaks."""
    lines = ["# Reliability", "", "Generated by `make chaos` (`scripts/write_reliability.py`);"]
    lines += ["never edited by hand.", ""]
    lines += [f"- **{k}**: {v}" for k, v in header.items()]
    lines += [
        "",
        "## Fault matrix",
        "",
        "Each trial injects its fault at its own randomised point (seeded; the seed replays",
        "it: `FAULT_SEED=<seed>`), then an independent validator compares the store and the",
        "event log with the site's ground truth. **Lost**: records of committed pages (or of",
        "the whole catalogue, once done) missing. **Duplicated**: records a commit found",
        "already stored, plus any source id stored twice. **Duplicate commits**: commits",
        "beyond the first of any step. **Re-extracted**: records read off a page again",
        "(repeated work, not duplicated output). **Recover**: wall time from the fault to",
        "the validated end state, median / max (fake-clock waits such as a lease running",
        "out or a person's pause take no wall time; real Chromium relaunches do).",
        "",
        "| Fault | Store | Trials | Lost | Duplicated | Duplicate commits | Re-extracted | "
        "False completions | Final states | Recover (median / max) | Seed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = tally(records)
    missing: list[str] = []
    for name in dict.fromkeys(FAULTS.values()):
        for store in STORES:
            if ONLY_ON.get(name, store) != store:
                continue
            r = rows.get((name, store))
            if r is None:
                missing.append(f"{name} on {store}")
                lines.append(f"| {name} | {store} | not measured (see below) |" + " |" * 8)
                continue
            states = ", ".join(f"{s} {n}" for s, n in sorted(r["states"].items()))
            seeds = ", ".join(str(s) for s in sorted(r["seeds"]))
            trials = len(r["trials"])
            jobs = f" ({r['jobs']} jobs)" if r["jobs"] != trials else ""
            lines.append(
                f"| {name} | {store} | {trials}{jobs} | {r['lost']} | {r['duplicated']} | "
                f"{r['duplicate_commits']} | {r['re_extracted']} | {r['false_completions']} | "
                f"{states} | {seconds(r['recover'])} | {seeds} |"
            )
    lines += ["", f"Failed tests: {len(failed)}."]
    lines += [f"- `{f}`" for f in failed]
    lines += ["", *render_engines(records)]
    lines += ["", *render_tabs(records)]
    lines += ["", "## Attacks (server-counted)", ""]
    lines += ["| Suite | Attempts | Arrived with the login | Detail |", "|---|---|---|---|"]
    if guard is None:
        lines.append("| Guard attack suite | not measured | — | it printed no RESULT line |")
    else:
        lines.append(
            f"| Guard attack suite (`demos/guard_attacks.py`) | {guard.get('attempts', '?')} | "
            f"{guard.get('leaked_requests', '?')} | sites {guard.get('sites', '?')}, "
            f"{guard.get('failed', '?')} failed, {guard.get('canary_hits', '?')} canary hits |"
        )
    bypass = [t for t in records if t.get("row") == "handle bypasses"]
    if bypass:
        lines.append(
            f"| Conversation-handle bypasses (`tests/guard/test_conversation_tab.py`) | "
            f"{sum(int(t['attempts']) for t in bypass)} | "
            f"{sum(int(t['with_login']) for t in bypass)} | attribute paths out of the "
            "handle, its locators and its popup, plus GET/POST fetches to the signed-in site |"
        )
    else:
        lines.append("| Conversation-handle bypasses | not measured | — | the test did not run |")
    lines += ["", "### The agent boundary (server-counted)", ""]
    lines += ["| Path | Attempts | Arrived | Measured by |", "|---|---|---|---|"]
    boundary: dict[str, dict[str, Any]] = {}
    for t in (t for t in records if t.get("row") == "boundary"):
        row = boundary.setdefault(str(t["path"]), {"attempts": 0, "arrived": 0, "tests": set()})
        row["attempts"] += int(t["attempts"])
        row["arrived"] += int(t["arrived"])
        row["tests"].add(str(t["test"]).split("::")[0])
    if not boundary:
        lines.append("| (none) | not measured | — | the tests did not run |")
    for path, row in sorted(boundary.items()):
        tests = ", ".join(f"`{t}`" for t in sorted(row["tests"]))
        lines.append(f"| {path} | {row['attempts']} | {row['arrived']} | {tests} |")
    lines += ["", *render_logins(records, None)]
    lines += ["", "## Soaks", ""]
    sm = soaks.get("state_machine")
    if sm is None:
        lines.append("- Hypothesis state machine: not measured.")
    else:
        lines.append(
            f"- Hypothesis state machine (`tests/keeper/test_state_machine.py`, 40 steps each): "
            f"{sm['passing']} passing, {sm['failing']} failing, {sm['invalid']} invalid examples "
            f"of {sm['asked']} asked, in {sm['seconds']:.0f} s."
        )
    ch = soaks.get("chromium")
    if ch is None:
        lines.append("- Real-Chromium soak: not measured (the script printed no SOAK line).")
    else:
        lines += [
            f"- Real-Chromium soak (`scripts/soak_chromium.py --seed {ch['seed']}`): "
            f"{ch['turns']} turns over {ch['conversations']} conversations, {ch['kills']} "
            f"SIGKILLs of Chromium, in {ch['seconds']:.0f} s. Told once: {ch['told']} "
            f"conversations told of a restart that took their tab, {ch['missed']} missed, "
            f"{ch['told_twice']} told twice; {ch['retried_turns']} turns began before the kill "
            "was noticed and were retried once it was.",
            "",
            "  | Measure | Start (turn 1) | Warm (turn 100) | End |",
            "  |---|---|---|---|",
        ]
        for key, label in (
            ("fds", "Our process: open file descriptors"),
            ("driver_fds", "Playwright driver: open file descriptors"),
            ("rss_mb", "Our process: RSS (MB)"),
            ("chromium_processes", "Chromium processes"),
            ("chromium_pss_mb", "Chromium: summed PSS (MB)"),
            ("open_tabs", "Conversations with a live tab"),
            ("saved_state_kb", "Saved state: SQLite database + WAL (kB)"),
            ("wal_kb", "of which WAL (kB)"),
        ):
            cells = [str(ch.get(f"{key}_{w}", "—")) for w in ("start", "warm", "end")]
            lines.append(f"  | {label} | " + " | ".join(cells) + " |")
    if missing or skipped:
        lines += ["", "## Not measured", ""]
        lines += [f"- {m}: not measured." for m in missing]
        lines += [f"- Skipped: {s}" for s in skipped]
    return "\n".join(lines) + "\n"


def run(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run a phase from the repository root; its output tail is echoed."""
    proc = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=timeout
    )
    print(proc.stdout[-3000:], proc.stderr[-1500:], sep="\n", flush=True)
    return proc


def main() -> None:
    """Run every phase; write the markdown."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trials", type=int, default=int(os.environ.get("FAULT_TRIALS", "20")))
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "RELIABILITY.md")
    parser.add_argument(
        "--only-logins", action="store_true", help="rerun only the logins table, keep the rest"
    )
    parser.add_argument(
        "--only-engines",
        action="store_true",
        help="rerun only the durable engines' rows and the tabs rows, keep the rest",
    )
    parser.add_argument(
        "--tests",
        nargs="+",
        choices=(*LOGIN_TESTS, *ENGINE_TESTS, *TAB_TESTS),
        help="with --only-logins: rerun these tests' site shapes only, keep the other rows; "
        "with --only-engines: run these tests only",
    )
    parser.add_argument(
        "--records",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="with --only-engines: render from these FAULT_REPORT files, run nothing",
    )
    parser.add_argument(
        "--save-records",
        type=Path,
        metavar="FILE",
        help="with --only-engines: keep the run's FAULT_REPORT records in FILE",
    )
    args = parser.parse_args()
    if args.only_logins and args.only_engines:
        parser.error("--only-logins and --only-engines are separate runs")
    if args.only_logins:
        tests = args.tests or list(LOGIN_TESTS)
        if not set(tests) <= set(LOGIN_TESTS):
            parser.error(f"--only-logins runs some of {', '.join(LOGIN_TESTS)}")
        only_logins(args.trials, args.out, tests)
        return
    if args.only_engines:
        if args.records:
            if args.tests or args.save_records:
                parser.error("--records renders what was run: no --tests, no --save-records")
            missing = [str(f) for f in args.records if not f.is_file()]
            if missing:
                parser.error(f"no such records file: {', '.join(missing)}")
            engines_from_records(args.records, args.out)
            return
        tests = args.tests or [*ENGINE_TESTS, *TAB_TESTS]
        if not set(tests) <= {*ENGINE_TESTS, *TAB_TESTS}:
            parser.error(f"--only-engines runs some of {', '.join((*ENGINE_TESTS, *TAB_TESTS))}")
        only_engines(args.trials, args.out, tests, args.save_records)
        return
    if args.records or args.tests or args.save_records:
        parser.error("--tests, --records and --save-records go with --only-logins/--only-engines")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAULT_TRIALS": str(args.trials)}
    env["FAULT_ALL_BOUNDARIES"] = "1"
    durations: dict[str, float] = {}
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        report = Path(tmp) / "faults.jsonl"
        env["FAULT_REPORT"] = str(report)
        t0 = time.monotonic()
        proc = run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "chaos",
             "-rfEs", "tests"],
            env, 4 * 3600,
        )  # fmt: skip
        durations["fault matrix and attack rows (pytest -m chaos)"] = time.monotonic() - t0
        failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", proc.stdout, re.M)
        skipped = sorted(set(re.findall(r"^SKIPPED \[\d+\] (.+)$", proc.stdout, re.M)))
        lines = report.read_text(encoding="utf-8").splitlines() if report.exists() else []
        records = [json.loads(line) for line in lines]
    t0 = time.monotonic()
    g = run([sys.executable, "demos/guard_attacks.py"], env, 1800)
    durations["Guard attack suite"] = time.monotonic() - t0
    result = next((ln for ln in g.stdout.splitlines() if ln.startswith("RESULT ")), None)
    guard = dict(kv.split("=", 1) for kv in result.split()[1:]) if result else None
    soaks: dict[str, Any] = {}
    t0 = time.monotonic()
    sm_env = {**env, "SESSION_KEEPER_STATEFUL_EXAMPLES": str(args.examples)}
    sm = run(
        # No per-test timeout: 10,000 examples take minutes (pyproject's 120 s is for CI).
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=0",
         "--hypothesis-show-statistics", "tests/keeper/test_state_machine.py"],
        sm_env, 3 * 3600,
    )  # fmt: skip
    durations["state machine soak"] = time.monotonic() - t0
    m = re.search(r"(\d+) passing, (\d+) failing, and (\d+) invalid", sm.stdout)
    if m:
        soaks["state_machine"] = {
            "passing": int(m[1]), "failing": int(m[2]) + int(sm.returncode != 0),
            "invalid": int(m[3]), "asked": args.examples,
            "seconds": durations["state machine soak"],
        }  # fmt: skip
    t0 = time.monotonic()
    ch = run(
        [sys.executable, "scripts/soak_chromium.py", "--turns", str(args.turns),
         "--conversations", str(args.conversations)],
        env, 3 * 3600,
    )  # fmt: skip
    durations["real-Chromium soak"] = time.monotonic() - t0
    line = next((ln for ln in ch.stdout.splitlines() if ln.startswith("SOAK ")), None)
    if line:
        soaks["chromium"] = json.loads(line[len("SOAK ") :])
    total = time.monotonic() - start
    seeds = sorted({str(r["seed"]) for r in records})
    header = {
        "Date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "Machine": f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()} (a shared machine: timings are rough)",
        "Trials per fault": f"{args.trials} per store (the statement-boundary row: every "
        "boundary of a whole run); CI's `make test` runs 3 per fault (`-m chaos` selects them)",
        "Seed": ", ".join(seeds) or "—",
        "Duration of `make chaos`": f"{total / 60:.1f} min ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in durations.items())
        + ")",
    }
    args.out.write_text(render(records, failed, skipped, guard, soaks, header), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
