"""The TodoMVC persistence check on real Chromium, with a readable report.

Starts the local fixture sites and a Chromium on a fresh temporary profile, then runs
the check: eight existing rows; create one uniquely named item; aim at a missing
exact target (zero matches, zero actions); complete only the new item; reload;
restart the browser. After each operation every row is compared.

Usage: ``python demos/todomvc_check.py``. Exits 1 if any check fails.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

from session_keeper import PlaywrightBackend
from session_keeper.testing import LocalSites
from session_keeper.testing._todomvc import run_todomvc_check


async def main() -> int:
    with LocalSites() as sites, tempfile.TemporaryDirectory(prefix="sk-todo-") as profile:
        backend = PlaywrightBackend(profile, host_resolver_rules=sites.host_resolver_rules)
        try:
            results = await run_todomvc_check(backend, sites)
        finally:
            await backend.aclose()

    print("TodoMVC persistence check (todo.example on local Chromium)")
    print("original rows:")
    for i, row in enumerate(results[0].rows, 1):
        print(f"  {i}. {row}")
    for result in results:
        print(f"{'PASS' if result.passed else 'FAIL'}  {result.step}")
        for line in result.details:
            print(f"      {line}")
    print("final rows:")
    for i, row in enumerate(results[-1].rows, 1):
        print(f"  {i}. {row}")
    passed = sum(r.passed for r in results)
    print(f"{passed}/{len(results)} checks passed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
