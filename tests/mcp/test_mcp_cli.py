"""``session-keeper mcp`` argument handling (no browser)."""

from __future__ import annotations

import pytest

from session_keeper import Grant
from session_keeper._cli import main
from session_keeper.mcp._serve import build_parser


def test_mcp_cli_reads_grants_http_address_and_conversation() -> None:
    """Grants become Grant objects; --http is split into host and port."""
    args = build_parser().parse_args(
        ["--profile", "p", "--grant", "billing:billing.example",
         "--grant", "research:billing.example:read", "--http", "127.0.0.1:8931",
         "--conversation", "desk"]
    )  # fmt: skip
    assert args.grant == [
        Grant("billing", "billing.example", actions={"read", "write"}),
        Grant("research", "billing.example", actions={"read"}),
    ]
    assert args.http == ("127.0.0.1", 8931)
    assert args.conversation == "desk"


@pytest.mark.parametrize(
    "bad", [["--grant", "billing"], ["--grant", "a::read"], ["--http", "8931"], []]
)
def test_mcp_cli_refuses_bad_arguments_before_starting_anything(
    bad: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed grant or address, or no profile, exits 2 with usage; nothing starts."""
    profile = [] if bad == [] else ["--profile", "p"]
    with pytest.raises(SystemExit) as exc:
        main(["mcp", *profile, *bad])
    assert exc.value.code == 2
    assert "usage: session-keeper mcp" in capsys.readouterr().err
