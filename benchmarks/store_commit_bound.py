"""How close can any SQLite store's durable write get to LangGraph's ``SqliteSaver.put``?

    python benchmarks/store_commit_bound.py [--commits 2000] [--rounds 5]

Bare ``sqlite3``, no library code, all WAL + ``synchronous=FULL`` (one fsync per
acknowledged write), interleaved in rounds (the order reversed every other round):

- **fenced**: a fenced page commit's SQL (read lease and revision, insert 10 keyed
  result rows, advance the checkpoint, append an event) in the caller's thread;
- **fenced, handed over**: the same SQL on a database thread, each commit handed to it
  from an asyncio event loop and its end handed back (a plain queue and
  ``call_soon_threadsafe``, the cheapest hand-over there is);
- **put**: a single-row blob put like ``SqliteSaver.put``'s, in the caller's thread;
- **put, handed over**: the same put, handed over as above;
- **SqliteSaver.put**: LangGraph's own, as row 6 runs it (``benchmarks/store_commit.py``).

A store whose event loop never waits on disk (``SqliteStore``'s never does) pays the
hand-over on every write, whatever its SQL. ``handed_fenced_vs_saver`` is what row 6's
ratio at one writer can reach at best without dropping required work, and
``handed_put_vs_saver`` what any write can (row 16's, against the same put). Last line:
``RESULT bound_ratio=... handed_fenced_vs_saver=... handed_put_vs_saver=...`` (rates:
above 1.0 is faster than ``SqliteSaver.put``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import queue
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.store_commit import LangGraphBench

FENCED_SCHEMA = (
    "CREATE TABLE results(job_id TEXT, rid TEXT, data TEXT, rev INT, step TEXT,"
    " PRIMARY KEY (job_id, rid));"
    "CREATE TABLE cp(job_id TEXT PRIMARY KEY, doc TEXT, rev INT, token INT);"
    "CREATE TABLE events(id INTEGER PRIMARY KEY, job_id TEXT, kind TEXT, data TEXT);"
    "CREATE INDEX events_job ON events(job_id, id);"
    "INSERT INTO cp VALUES ('j', '{}', 0, 1);"
)
PUT_SCHEMA = (
    "CREATE TABLE checkpoints(thread_id TEXT, ns TEXT, id TEXT, parent TEXT, type TEXT,"
    " checkpoint BLOB, metadata BLOB, PRIMARY KEY (thread_id, ns, id))"
)

Write = Callable[[sqlite3.Connection, int], None]


def open_db(path: Path, schema: str) -> sqlite3.Connection:
    """A WAL database that fsyncs every commit, usable from the database thread."""
    con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.executescript(schema)
    return con


def fenced_commit(con: sqlite3.Connection, i: int) -> None:
    """One fenced page commit, durable when it returns."""
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
    con.execute("UPDATE cp SET doc = ?, rev = rev + 1 WHERE job_id = 'j'", (json.dumps({"c": i}),))
    con.execute(
        "INSERT INTO events(job_id, kind, data) VALUES ('j', 'page_committed', ?)",
        (json.dumps({"i": i}),),
    )
    con.execute("COMMIT")


def blob_put(con: sqlite3.Connection, i: int) -> None:
    """One single-row checkpoint put holding the same records, durable when it returns."""
    records = [{"id": f"s{i}-{k}", "title": "x" * 20, "price": k} for k in range(10)]
    blob = json.dumps({"records": records, "cursor": i}).encode()
    con.execute(
        "INSERT OR REPLACE INTO checkpoints VALUES ('t', '', ?, ?, 'json', ?, x'7b7d')",
        (str(i), str(i - 1), blob),
    )


def in_thread(write: Write, con: sqlite3.Connection, start: int, n: int) -> float:
    """``n`` writes in the caller's thread; returns writes per second."""
    t = time.perf_counter()
    for i in range(start, start + n):
        write(con, i)
    return n / (time.perf_counter() - t)


async def handed_over(write: Write, con: sqlite3.Connection, start: int, n: int) -> float:
    """``n`` writes run on a database thread, each awaited from the event loop; returns
    writes per second."""
    loop = asyncio.get_running_loop()
    work: queue.SimpleQueue[tuple[int, asyncio.Future[None]] | None] = queue.SimpleQueue()

    def database_thread() -> None:
        while (item := work.get()) is not None:
            i, done = item
            write(con, i)
            loop.call_soon_threadsafe(done.set_result, None)

    thread = threading.Thread(target=database_thread)
    thread.start()
    try:
        t = time.perf_counter()
        for i in range(start, start + n):
            done = loop.create_future()
            work.put((i, done))
            await done
        return n / (time.perf_counter() - t)
    finally:
        work.put(None)
        thread.join()


def saver_puts(saver: LangGraphBench, n: int) -> float:
    """``n`` of LangGraph's ``SqliteSaver.put`` as row 6 runs them; returns puts per second."""
    t = time.perf_counter()
    for _ in range(n):
        saver.put(0)
    return n / (time.perf_counter() - t)


async def measure(commits: int, rounds: int) -> None:
    """Interleave the five and print the median ratios."""
    with tempfile.TemporaryDirectory() as tmp:
        db = {
            name: open_db(Path(tmp) / f"{name}.db", schema)
            for name, schema in (
                ("fenced", FENCED_SCHEMA),
                ("fenced_handed", FENCED_SCHEMA),
                ("put", PUT_SCHEMA),
                ("put_handed", PUT_SCHEMA),
            )
        }
        saver = LangGraphBench(Path(tmp) / "saver.db")
        per_round = commits // rounds
        ratios: dict[str, list[float]] = {"bound": [], "fenced": [], "put": []}
        order = ("fenced", "fenced_handed", "put", "put_handed", "saver")
        for r in range(rounds):
            start = r * per_round
            rate: dict[str, float] = {}
            for name in order[:: 1 if r % 2 == 0 else -1]:
                if name == "saver":
                    rate[name] = saver_puts(saver, per_round)
                    continue
                write = fenced_commit if name.startswith("fenced") else blob_put
                if name.endswith("_handed"):
                    rate[name] = await handed_over(write, db[name], start, per_round)
                else:
                    rate[name] = in_thread(write, db[name], start, per_round)
            ratios["bound"].append(rate["fenced"] / rate["put"])
            ratios["fenced"].append(rate["fenced_handed"] / rate["saver"])
            ratios["put"].append(rate["put_handed"] / rate["saver"])
            print(
                f"round {r + 1}: fenced {rate['fenced']:.0f}/s "
                f"(handed over {rate['fenced_handed']:.0f}/s), put {rate['put']:.0f}/s "
                f"(handed over {rate['put_handed']:.0f}/s), SqliteSaver.put "
                f"{rate['saver']:.0f}/s",
                flush=True,
            )
        saver.close()
        for con in db.values():
            con.close()
    print(
        f"RESULT bound_ratio={statistics.median(ratios['bound']):.2f} "
        f"handed_fenced_vs_saver={statistics.median(ratios['fenced']):.2f} "
        f"handed_put_vs_saver={statistics.median(ratios['put']):.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(measure(args.commits, args.rounds))
