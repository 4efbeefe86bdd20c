"""A pydantic-ai agent on DBOS (``DBOSDurability``, the successor of ``DBOSAgent``) whose
tools are keeper browser steps, surviving a SIGKILL of its process mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from demos.sites import DemoSites
from tests.integrations._dbos_agent import PAGES, REFUND_AT
from tests.integrations._dbos_rig import spawn, until, wait_line
from tests.integrations._faults import refund_posts
from tests.integrations._faults import served as served_pages

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.dbos,
    pytest.mark.slow,
    pytest.mark.timeout(240),
]

CONVERSATION = "page-auditor"
BILLING = "billing.example"


@pytest.mark.parametrize("point", ["page-2", "refund"])
def test_an_agent_whose_dbos_process_is_sigkilled_mid_run_finishes_told_of_the_restart_once(
    tmp_path: Path,
    sites: DemoSites,
    chromium_path: str,
    workers: list[subprocess.Popen[str]],
    point: str,
) -> None:
    """The process running the agent (and its Chromium) is SIGKILLed while a tool's
    browser step is in flight (reading page 2, or right after billing answered the
    refund): DBOS recovers the run in a new process, the model's recorded requests and
    the finished steps are not redone, the lost billing login waits for a person inside
    the run; the model read every page, billing's log shows one refund, and one tool
    answer told the model the browser restarted."""
    tag = uuid.uuid4().hex[:8]
    workflow_id = f"agent-{tag}"
    plan = {
        "conversation": CONVERSATION,
        "base": sites.url("docs.example", f"/guide?walk={tag}"),
        "pause": 0.4,
        "invoices_url": sites.url(BILLING, "/invoices"),
    }
    common = [
        f"sqlite:///{tmp_path / 'dbos.sqlite'}",
        str(tmp_path / "keeper.db"),
        str(tmp_path / "profile"),
        sites.host_resolver_rules,
        chromium_path,
    ]
    tail = [workflow_id, sites.url(BILLING, "/login")]

    def served() -> list[int]:
        return served_pages(sites, "docs.example", tag)

    def posts() -> int:
        return sum(refund_posts(sites, BILLING, f"{workflow_id}:").values())

    first = spawn(["--agent", *common, "p1", *tail, json.dumps(plan)])
    workers.append(first)
    wait_line(first, "STARTED")
    if point == "refund":
        until(lambda: posts() == 1, "billing answered the refund")
    else:
        until(lambda: 2 in served(), "the agent reads page 2")
    os.killpg(first.pid, signal.SIGKILL)  # a tool's step in flight, its Chromium with it
    first.communicate()
    posts_before = posts()

    second = spawn(["--agent", *common, "p2", *tail])
    workers.append(second)
    out: dict[str, Any] = json.loads(wait_line(second, "RESULT ", timeout=180))
    answer = out["answer"]
    assert answer["read"] == list(range(PAGES)), out
    assert answer["told"] == 1, out  # the model was told the restart in one tool answer
    assert posts() == 1, out  # billing's own log: the refund was made once
    assert set(served()) == set(range(PAGES))
    (told,) = out["told"]
    assert told["restarted"] is True
    labels = sorted(f"{x['kind']}:{x['name']}" for x in told["lost"])
    assert labels == [f"login:{BILLING}", f"tab:{CONVERSATION}"], told
    # The lost login was waited for between the model's requests, once.
    assert out["sign_ins"] == [{"conversation": CONVERSATION, "site": BILLING}]
    assert out["workers"][0] == "p1" and out["workers"][-1] == "p2"
    if point == "refund":
        # The dead process made the refund; the recovered step read it back.
        assert posts_before == 1
        assert out["workers"][REFUND_AT] == "p2"
        assert answer["refund"].endswith("by readback"), answer
    else:
        assert out["workers"][2] == "p2"
        assert answer["refund"].endswith("by submitted"), answer
    # Every step before the one in flight was recorded by the dead process.
    killed = out["workers"].index("p2")
    assert killed == (REFUND_AT if point == "refund" else 2)
