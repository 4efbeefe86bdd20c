"""Metrics from the event log: completions, safe stops, recoveries, stalls, human waiting."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from session_keeper.cli import main as cli
from session_keeper.errors import Denied, TransientFailure
from session_keeper.jobs import Job, StoredResult, summarize

from .conftest import FakeCatalogue, World, contract, identity, target


async def test_first_attempt_and_recovered_completions_are_told_apart(world: World) -> None:
    """A clean job is a first-attempt completion; one that retried is a recovered one."""
    await world.sign_in()
    loop = world.loop()
    await loop.submit(contract(job_id="clean", extra={"conversation": "job:audit"}))
    await loop.submit(contract(job_id="bumpy", extra={"conversation": "job:audit"}))
    await loop.run("clean", FakeCatalogue().step, target=target, expect_identity=identity)
    bumpy = FakeCatalogue(raise_next=[TransientFailure("503")])
    await loop.run("bumpy", bumpy.step, target=target, expect_identity=identity)
    m = await summarize(world.store, now=world.clock.now())
    assert (m.jobs, m.accepted_completions, m.first_attempt_completions) == (2, 2, 1)
    assert m.recovered_completions == 1 and m.recoveries == {"transient": 1}
    assert m.retries_consumed == 1 and m.pages_committed == 10 and m.repeated_records == 0


async def test_safe_stops_are_never_completions(world: World) -> None:
    """A stopped job counts as safely stopped, with its stall age; never as done."""
    await world.sign_in()
    loop = world.loop()
    await loop.submit(contract())
    await loop.run(
        "audit", FakeCatalogue(raise_next=[Denied("no")]).step, target=target,
        expect_identity=identity,
    )  # fmt: skip
    world.clock.advance(timedelta(minutes=3))
    m = await summarize(world.store, now=world.clock.now())
    assert (m.accepted_completions, m.safely_stopped) == (0, 1)
    assert m.since_last_checkpoint_s == {"audit": 180.0}


async def test_a_failing_validator_turns_done_into_a_false_completion(world: World) -> None:
    """Done is not accepted unless the independent validator agrees."""
    await world.sign_in()
    loop = world.loop()
    await loop.submit(contract())
    await loop.run("audit", FakeCatalogue().step, target=target, expect_identity=identity)

    async def too_strict(job: Job, results: list[StoredResult]) -> bool:
        return len(results) > 1000

    m = await summarize(world.store, now=world.clock.now(), validator=too_strict)
    assert (m.accepted_completions, m.false_completions, m.validated) == (0, 1, True)


async def test_cli_prints_metrics_as_json(world: World, capsys: object) -> None:
    """`session-keeper --db PATH metrics --json` shows the summary."""
    await world.sign_in()
    loop = world.loop()
    await loop.submit(contract())
    await loop.run("audit", FakeCatalogue().step, target=target, expect_identity=identity)
    # The CLI runs its own event loop, as it does from a shell.
    assert (
        await asyncio.to_thread(cli, ["store", "metrics", "--db", str(world.path), "--json"]) == 0
    )
    rows = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    values = {r["metric"]: r["value"] for r in rows}
    assert values["accepted_completions"] == 1 and values["first_attempt_completions"] == 1
