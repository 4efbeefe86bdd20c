"""How close can any SQLite fenced page commit get to a LangGraph-style put? A lower bound.

    python benchmarks/store_commit_bound.py [--commits 2000]

Bare ``sqlite3`` in one thread, no library code: a fenced commit (read lease and
revision, insert 10 keyed result rows, advance the checkpoint, append an event) against
a single-row blob put like ``SqliteSaver.put``, both WAL + ``synchronous=FULL``,
interleaved in rounds. It shows what ``benchmarks/store_commit.py``'s ratio can reach
at best without dropping required work. Last line: ``RESULT bound_ratio=...``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path


def open_db(path: Path) -> sqlite3.Connection:
    """A WAL database that fsyncs every commit."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    return con


def fenced_commits(con: sqlite3.Connection, start: int, n: int) -> float:
    """``n`` fenced page commits; returns commits per second."""
    t = time.perf_counter()
    for i in range(start, start + n):
        con.execute("BEGIN IMMEDIATE")
        con.execute("SELECT rev, token FROM cp WHERE job_id = 'j'").fetchone()
        rows = json.dumps(
            [{"id": f"s{i}-{k}", "d": {"title": "x" * 20, "price": k}} for k in range(10)]
        )
        con.execute(
            "INSERT OR IGNORE INTO results SELECT 'j', json_extract(value, '$.id'), "
            "json_extract(value, '$.d'), ?, 'p' FROM json_each(?)",
            (i, rows),
        )
        con.execute(
            "UPDATE cp SET doc = ?, rev = rev + 1 WHERE job_id = 'j'", (json.dumps({"c": i}),)
        )
        con.execute(
            "INSERT INTO events(job_id, kind, data) VALUES ('j', 'page_committed', ?)",
            (json.dumps({"i": i}),),
        )
        con.execute("COMMIT")
    return n / (time.perf_counter() - t)


def blob_puts(con: sqlite3.Connection, start: int, n: int) -> float:
    """``n`` single-row checkpoint puts holding the same records; returns puts per second."""
    t = time.perf_counter()
    for i in range(start, start + n):
        records = [{"id": f"s{i}-{k}", "title": "x" * 20, "price": k} for k in range(10)]
        blob = json.dumps({"records": records, "cursor": i}).encode()
        con.execute(
            "INSERT OR REPLACE INTO checkpoints VALUES ('t', '', ?, ?, 'json', ?, x'7b7d')",
            (str(i), str(i - 1), blob),
        )
    return n / (time.perf_counter() - t)


def main(commits: int, rounds: int = 5) -> None:
    """Interleave the two and print the median ratio."""
    with tempfile.TemporaryDirectory() as tmp:
        fenced = open_db(Path(tmp) / "fenced.db")
        fenced.executescript(
            "CREATE TABLE results(job_id TEXT, rid TEXT, data TEXT, rev INT, step TEXT,"
            " PRIMARY KEY (job_id, rid));"
            "CREATE TABLE cp(job_id TEXT PRIMARY KEY, doc TEXT, rev INT, token INT);"
            "CREATE TABLE events(id INTEGER PRIMARY KEY, job_id TEXT, kind TEXT, data TEXT);"
            "CREATE INDEX events_job ON events(job_id, id);"
            "INSERT INTO cp VALUES ('j', '{}', 0, 1);"
        )
        put = open_db(Path(tmp) / "put.db")
        put.execute(
            "CREATE TABLE checkpoints(thread_id TEXT, ns TEXT, id TEXT, parent TEXT, type TEXT,"
            " checkpoint BLOB, metadata BLOB, PRIMARY KEY (thread_id, ns, id))"
        )
        per_round = commits // rounds
        ratios = []
        for r in range(rounds):
            a = fenced_commits(fenced, r * per_round, per_round)
            b = blob_puts(put, r * per_round, per_round)
            ratios.append(a / b)
            print(f"round {r + 1}: fenced {a:.0f}/s, put {b:.0f}/s, ratio {a / b:.2f}")
    print(f"RESULT bound_ratio={statistics.median(ratios):.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=2000)
    main(parser.parse_args().commits)
