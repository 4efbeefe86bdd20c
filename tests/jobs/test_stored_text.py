"""What the job loop stores about a failure carries no token from a URL."""

from __future__ import annotations

from session_keeper.errors import BrowserGoneError

from .conftest import FakeCatalogue, World, contract, identity, target

SITE = "billing.example"


async def test_a_token_in_a_step_error_message_does_not_reach_the_event_log(
    world: World,
) -> None:
    """Browser errors quote URLs (OAuth codes, magic links); the loop must not store them raw."""
    canary = "CANARYcode91b2"
    await world.sign_in()
    await world.loop().submit(contract(max_attempts=5))
    cat = FakeCatalogue(
        raise_next=[
            BrowserGoneError(f'page.goto: net::ERR_ABORTED at "https://{SITE}/cb?code={canary}"')
        ]
    )
    out = await world.loop().run("audit", cat.step, target=target, expect_identity=identity)
    assert out.state == "done"
    for event in await world.store.events(job_id="audit"):
        assert canary not in repr(event.data), event
