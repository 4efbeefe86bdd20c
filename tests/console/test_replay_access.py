"""The replay pages are behind the console's sign-in, like every other page."""

from __future__ import annotations

from ._world import World, sign_in


async def test_a_replay_opens_only_in_a_signed_in_session_and_never_from_a_hand_off(
    world: World,
) -> None:
    """No session: 401; a sign-in hand-off (its live view only): 403; a person: 200, told
    that this keeper records nothing; a frame that does not exist: 404."""
    assert (await world.client.get("/replay/billing")).status_code == 401
    assert (await world.client.get("/replay/billing/frames/1/dom")).status_code == 401
    hand_off = world.console.sign_in_link("billing").removeprefix(world.console.url)
    assert (await world.client.get(hand_off)).status_code == 303
    assert (await world.client.get("/replay/billing")).status_code == 403
    world.client.cookies.clear()
    await sign_in(world)
    page = await world.client.get("/replay/billing")
    assert page.status_code == 200 and 'id="not-recording"' in page.text
    assert "audit: login_recorded" in page.text  # the login it owns
    assert (await world.client.get("/replay/billing/frames/1")).status_code == 404
    assert (await world.client.get("/replay/billing/frames/1/dom")).status_code == 404
