"""Ids in the console's routes: a job, borrow or conversation id with "/", "..", "%2F",
spaces or unicode reaches exactly that id; a malformed id is a 400 that changes nothing.

The client is httpx, which resolves ``.`` and ``..`` path segments as a browser does.
"""

from __future__ import annotations

import html
import re

from session_keeper.errors import SignedOut
from session_keeper.jobs import Accepted, JobContract, StepContext
from session_keeper.testing import FakePage

from ._world import World, sign_in

ODD_IDS = ["team/billing", "x/../billing", "a%2Fb", "with space", "ünï/cödé", "a/./b", "q?x#y"]


async def pause(world: World, job_id: str, conversation: str = "billing") -> None:
    """A job acting as ``conversation`` that paused because the site showed its sign-in."""
    await world.store.submit_job(
        JobContract(job_id=job_id, site="billing.example", extra={"conversation": conversation})
    )

    async def step(ctx: StepContext[FakePage]) -> Accepted:
        raise SignedOut("the billing sign-in page is shown")

    assert (await world.loop.run(job_id, step)).state == "awaiting_human"


def form_action(page: str, row_id: str) -> str:
    """The action of the form in the table row ``row_id`` (unescaped as a browser reads it)."""
    row = page.split(f'id="{html.escape(row_id)}"', 1)[1].split("</tr>", 1)[0]
    m = re.search(r'<form method="post" action="([^"]+)"', row)
    assert m is not None, row
    return html.unescape(m.group(1))


async def test_a_job_button_acts_on_its_own_job_whatever_its_id_holds(world: World) -> None:
    """Cancelling job "x/../j-victim" from its button cancels it, not "j-victim"; the
    same for ids with "%2F", spaces and unicode."""
    csrf = await sign_in(world)
    await pause(world, "j-victim")
    odd = ["x/../j-victim", "x/%2E%2E/j-victim", "x%2F..%2Fj-victim", "job one", "jöb/ü"]
    for job_id in odd:
        await pause(world, job_id)
    page = (await world.client.get("/jobs")).text
    for job_id in odd:
        action = form_action(page, f"job-{job_id}")
        r = await world.client.post(action, data={"csrf": csrf, "action": "cancel"})
        assert r.status_code == 303, (job_id, action, r.text)
        assert (await world.store.load_job(job_id)).checkpoint.state != "awaiting_human"
        assert (await world.store.load_job("j-victim")).checkpoint.state == "awaiting_human"


async def test_a_path_that_resolves_to_another_job_never_acts_on_it(world: World) -> None:
    """A hand-made ``/jobs/x/../j-victim/resume`` (resolved by the client to
    ``/jobs/j-victim/resume``) acts only on an existing job named exactly what arrives;
    an id that exists nowhere is a 404, and nothing changes."""
    csrf = await sign_in(world)
    await pause(world, "j-victim")
    for path in ("/jobs/nobody/resume", "/jobs/nobody%2F..%2Fj-victim/resume"):
        r = await world.client.post(path, data={"csrf": csrf, "action": "cancel"})
        assert r.status_code == 404, path
    assert (await world.store.load_job("j-victim")).checkpoint.state == "awaiting_human"


async def test_a_live_view_opens_for_a_conversation_id_with_any_characters(
    world: World,
) -> None:
    """The signed live link of "team/billing" (and of ids with "..", "%2F", spaces,
    unicode) opens that conversation's view, and its navigate form drives that
    conversation's sign-in page (never its tab)."""
    csrf = await sign_in(world)
    for conversation in ODD_IDS:
        page = await world.client.get(world.console.live_path(conversation))
        assert page.status_code == 200, conversation
        assert f"<h1>Live view: {html.escape(conversation)}</h1>" in page.text
        m = re.search(r'<form method="post" action="([^"]+)" class="bar" id="navigate">', page.text)
        assert m is not None
        fields = dict(re.findall(r'name="(exp|sig)" value="([^"]+)"', page.text))
        r = await world.client.post(
            html.unescape(m.group(1)),
            data={"csrf": csrf, "url": "https://docs.example/", **fields},
        )
        assert r.status_code == 303, conversation
        signing_in = world.keeper.unguarded_sign_in_pages(conversation)
        assert [p.url for p in signing_in] == ["https://docs.example/"], conversation
        assert world.keeper.current_url(conversation) is None
    # "x/../billing" drove its own sign-in page; billing's tab is where the fixture left it.
    assert world.keeper.current_url("billing") == "https://billing.example/login?next=%2Finvoices"
    assert world.keeper.unguarded_sign_in_pages("billing") == ()


async def test_a_dot_segment_id_never_opens_another_conversations_view(world: World) -> None:
    """A conversation named ".." cannot be addressed in a path (clients resolve it), and
    its resolved link opens no live view of anyone."""
    await sign_in(world)
    page = await world.client.get(world.console.live_path(".."))
    assert "Live view:" not in page.text


async def test_malformed_ids_in_console_routes_are_400_and_change_nothing(world: World) -> None:
    """An id with NUL or another control character, or 10 kB long, in a job, borrow or
    live route: 400, and no job, borrow or tab changes."""
    csrf = await sign_in(world)
    await pause(world, "j-victim")
    req = world.keeper.request_borrow("research", "billing.example", "write")
    tabs = world.keeper.tabs()
    live = world.console.live_path("billing")
    query = live.split("?", 1)[1]
    for bad in ("a%00b", "a%0Ab", "x" * 10_000):
        # A decoded newline matches no route at all (a 404); the rest reach the id check.
        refused = {400, 404} if "%0A" in bad else {400}
        for path in (f"/jobs/{bad}/resume", f"/borrows/{bad}/answer"):
            r = await world.client.post(
                path, data={"csrf": csrf, "action": "cancel", "decision": "approve"}
            )
            assert r.status_code in refused, path[:40]
        assert (await world.client.get(f"/live/{bad}?{query}")).status_code in refused
        r = await world.client.post(
            f"/live/{bad}/navigate", data={"csrf": csrf, "url": "https://docs.example/"}
        )
        assert r.status_code in refused
    # The keeper's own pages' conversation ids are not a person's to open.
    assert (await world.client.get(f"/live/session-keeper%3Aprobe?{query}")).status_code == 400
    assert (await world.store.load_job("j-victim")).checkpoint.state == "awaiting_human"
    assert [b.id for b in world.keeper.borrow_requests() if b.status == "pending"] == [req.id]
    assert world.keeper.tabs() == tabs
