"""Time from a CDP socket cut to the conversation's tab re-adopted, and false restarts.

A Chromium started as a separate process (``--remote-debugging-port=0``) is reached
through a TCP proxy. Each trial opens nothing new: it cuts every proxied connection,
restores the proxy at once, and measures until the session has re-adopted the tab by
target id. Then ``ensure()`` must report no restart (a restart would be false: the
browser never stopped). Run from the repository root::

    PYTHONPATH=$PWD python benchmarks/cdp_reconnect.py [cuts]   # 100 by default

A cut taken for a restart prints why (a new generation, or the tab lost and reopened).

Ends with::

    RESULT cut_to_readopt_ms_median=... max=... false_restarts=N cuts=N
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

from session_keeper import CdpBackend, LoginSettings, SessionKeeper, find_chromium
from session_keeper.testing import LocalSites
from tests.cdp._remote import CutProxy, RemoteChromium

KEY = bytes(range(32))


async def main(cuts: int) -> None:
    with LocalSites() as sites:
        remote = RemoteChromium(find_chromium(), sites.host_resolver_rules)
        await remote.start()
        proxy = CutProxy(remote.port)
        await proxy.start()
        backend = CdpBackend(proxy.url)
        times: list[float] = []
        false_restarts = 0
        try:
            async with SessionKeeper(
                backend, login_settings=LoginSettings(fingerprint_key=KEY)
            ) as keeper:
                await keeper.ensure("research")
                page = await keeper.unguarded_page("research", sites.url("docs.example", "/"))
                session = backend.current
                assert session is not None
                for i in range(cuts):
                    before = session.reconnects
                    start = time.perf_counter()
                    proxy.cut()
                    proxy.restore()
                    while session.alive and session.reconnects == before:  # noqa: ASYNC110
                        # A 1 ms poll is the measurement: no event exists for "re-adopted".
                        await asyncio.sleep(0.001)
                    times.append((time.perf_counter() - start) * 1000)
                    facts = await keeper.ensure("research")
                    if facts.restarted or not session.alive:
                        false_restarts += 1
                        print(f"cut {i + 1}: FALSE RESTART ({session.cause or 'restarted'})")
                        # Count the next cuts on their own, not as this one's echo.
                        page = await keeper.unguarded_page(
                            "research", sites.url("docs.example", "/")
                        )
                        session = backend.current or session
                    elif await keeper.unguarded_page("research") is not page:
                        false_restarts += 1
                        print(f"cut {i + 1}: FALSE RESTART (the tab was lost and reopened)")
                        page = await keeper.unguarded_page("research")
                    print(f"cut {i + 1}: re-adopted in {times[-1]:.1f} ms", flush=True)
        finally:
            await proxy.stop()
            await remote.stop()
    print(
        f"RESULT cut_to_readopt_ms_median={statistics.median(times):.1f} "
        f"max={max(times):.1f} false_restarts={false_restarts} cuts={cuts}"
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
