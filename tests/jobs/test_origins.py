"""A contract's allowed_origins: what an entry admits, what is refused, and the loop's checks."""

from __future__ import annotations

import json

import pytest

from session_keeper.errors import ContractError, InvalidArgument, InvalidArgumentType
from session_keeper.jobs import Accepted, JobContract, StepContext
from session_keeper.jobs._origins import origin_allowed
from session_keeper.testing import FakePage

from .conftest import FakeCatalogue, World, contract, identity, target

# (allowed entry, URL, admitted?)
MATRIX = [
    # No port in the entry: every port of that scheme and host.
    ("http://catalogue.example", "http://catalogue.example/items", True),
    ("http://catalogue.example", "http://catalogue.example:8000/items", True),
    ("http://catalogue.example", "http://catalogue.example:80/", True),
    ("http://catalogue.example", "http://CATALOGUE.example/", True),
    ("HTTP://Catalogue.Example/", "http://catalogue.example:8000/", True),
    # The scheme always matters.
    ("http://catalogue.example", "https://catalogue.example/", False),
    ("https://catalogue.example", "http://catalogue.example:443/", False),
    # The host matches exactly: no subdomains, no look-alikes.
    ("http://catalogue.example", "http://api.catalogue.example/", False),
    ("http://catalogue.example", "http://catalogue.example.evil/", False),
    ("http://catalogue.example", "http://evilcatalogue.example/", False),
    # A port in the entry must match exactly; no port in the URL is the default port.
    ("http://catalogue.example:8000", "http://catalogue.example:8000/x", True),
    ("http://catalogue.example:8000", "http://catalogue.example/x", False),
    ("http://catalogue.example:8000", "http://catalogue.example:8001/x", False),
    ("http://catalogue.example:80", "http://catalogue.example/x", True),
    ("http://catalogue.example:80", "http://catalogue.example:80/x", True),
    ("http://catalogue.example:80", "http://catalogue.example:8000/x", False),
    ("https://catalogue.example:443", "https://catalogue.example/x", True),
    ("https://catalogue.example:443", "https://catalogue.example:8443/x", False),
    # A bare host: any scheme and port; a bare host:port: that port only.
    ("catalogue.example", "https://catalogue.example:9000/", True),
    ("catalogue.example", "http://catalogue.example/", True),
    ("catalogue.example:8000", "http://catalogue.example:8000/", True),
    ("catalogue.example:8000", "https://catalogue.example/", False),
    # IPv6 literals keep their brackets apart from the port.
    ("http://[::1]:8080", "http://[::1]:8080/", True),
    ("http://[::1]:8080", "http://[::1]:8081/", False),
    ("http://[::1]", "http://[::1]:8081/", True),
    # Non-network URLs are never inside an allowlist (about: is a fresh tab: allowed).
    ("http://catalogue.example", "data:text/html,hi", False),
    ("http://catalogue.example", "about:blank", True),
]


@pytest.mark.parametrize(("entry", "url", "admitted"), MATRIX)
def test_an_origin_admits_scheme_and_host_and_the_port_only_when_it_names_one(
    entry: str, url: str, admitted: bool
) -> None:
    """Scheme + host must match; a port matters only when the entry names one (80/443 = none)."""
    assert origin_allowed(url, (entry,)) is admitted


MALFORMED = [
    "ftp://catalogue.example",
    "http://catalogue.example/items",
    "http://catalogue.example?x=1",
    "http://catalogue.example#top",
    "http://user:pw@catalogue.example",
    "http://catalogue.example:",
    "http://catalogue.example:0",
    "http://catalogue.example:99999",
    "http://catalogue.example:http",
    "*.catalogue.example",
    "http://",
    " http://catalogue.example",
    "http://catalogue\x00.example",
    "http://[::1",
]


@pytest.mark.parametrize("entry", MALFORMED)
def test_a_malformed_allowed_origin_is_refused_when_the_contract_is_made(entry: str) -> None:
    """A contract with a malformed origin is a typed error at construction and from JSON."""
    with pytest.raises(InvalidArgument):
        JobContract(job_id="j", allowed_origins=(entry,))
    doc = JobContract(job_id="j").to_dict()
    doc["allowed_origins"] = [entry]
    with pytest.raises(ContractError):
        JobContract.from_json(json.dumps(doc))


def test_allowed_origins_of_the_wrong_type_are_a_type_error() -> None:
    """Not a collection of str: InvalidArgumentType, never a raw TypeError."""
    with pytest.raises(InvalidArgumentType):
        JobContract(job_id="j", allowed_origins="http://catalogue.example")
    with pytest.raises(InvalidArgumentType):
        JobContract(job_id="j", allowed_origins=None)


async def test_a_page_that_left_the_contracts_origins_is_never_committed(world: World) -> None:
    """A step that ended on another origin fails validation; its records are not committed."""
    await world.sign_in()
    await world.loop().submit(contract())
    # The wandering page claims the expected identity: only the origin check can catch it.
    cat = FakeCatalogue(wander_next=1, wander_to="https://evil.example/items?page=1")
    seen: list[str] = []
    original = cat.step

    async def noting_step(ctx: StepContext[FakePage]) -> Accepted:
        out = await original(ctx)
        seen.append(ctx.page.url)
        return out

    out = await world.loop().run("audit", noting_step, target=target, expect_identity=identity)
    assert out.state == "done"
    assert seen[0] == "https://evil.example/items?page=1"
    failed = await world.store.events(job_id="audit", kind="step_failed")
    assert [e.failure_class for e in failed] == ["changed_page"]
    assert "left the contract's origins" in str(failed[0].data["error"])
    # Page 1 was committed once, from the second (allowed) observation.
    committed = await world.store.events(job_id="audit", kind="page_committed")
    assert [e.step for e in committed][:1] == ["page-1"] and len(committed) == 5
    assert out.attempts_used == 1


async def test_a_target_outside_the_contracts_origins_is_never_opened(world: World) -> None:
    """A cursor whose target URL leaves the allowlist stops the job before navigating there."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue()
    opened: list[str] = []

    def off_site(cursor: str | None) -> str:
        url = target(cursor) if cursor in (None, "page-1") else "https://evil.example/p"
        opened.append(url)
        return url

    out = await world.loop().run("audit", cat.step, target=off_site, expect_identity=identity)
    assert out.state == "stopped" and "outside the contract's origins" in (out.reason or "")
    assert cat.calls == 1 and world.keeper.current_url("job:audit") == target("page-1")


async def test_an_origin_without_a_port_admits_the_sites_real_port_in_a_job(
    world: World,
) -> None:
    """``https://catalogue.example`` lets a job read the catalogue served on port 8000."""
    await world.sign_in()
    await world.loop().submit(contract(allowed_origins=("https://catalogue.example",)))

    def on_8000(cursor: str | None) -> str:
        return target(cursor).replace("catalogue.example/", "catalogue.example:8000/")

    out = await world.loop().run(
        "audit", FakeCatalogue().step, target=on_8000, expect_identity=identity
    )
    assert out.state == "done" and out.attempts_used == 0
