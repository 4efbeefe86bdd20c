"""Which requests aim at the keeper's own surfaces, and what the Guard's watch pauses for them
(pure: no browser)."""

from __future__ import annotations

import pytest

from session_keeper._guard.watch import fetch_patterns
from session_keeper._model.web import non_web_reason, shown_origin
from session_keeper._util.surfaces import (
    PROCESS_SURFACES,
    Surfaces,
    serve_surface,
    surface_for,
    surfaces,
)


@pytest.mark.parametrize(
    ("url", "aimed"),
    [
        ("http://127.0.0.1:8931/mcp", True),
        ("http://127.9.9.9:8931/", True),  # all of 127/8 is this machine
        ("http://localhost:8931/", True),
        ("http://api.localhost:8931/", True),
        ("http://[::1]:8931/", True),
        ("http://[::ffff:7f00:1]:8931/", True),  # IPv4-mapped 127.0.0.1
        ("http://[::ffff:203.0.113.7]:8931/", False),
        ("http://0.0.0.0:8931/", True),
        ("http://billing.example:8931/", True),  # a name may resolve to loopback
        ("ws://127.0.0.1:8931/socket", True),
        ("http://127.0.0.1:8932/", False),  # another port
        ("http://203.0.113.7:8931/", False),  # another machine's address
        ("http://127.0.0.1/", False),
    ],
)
def test_a_request_aims_at_a_loopback_surface_by_its_port_on_any_name_of_this_machine(
    url: str, aimed: bool
) -> None:
    """Loopback literals, localhost and every host name on the surface's port count; another
    machine's IP literal or another port does not."""
    with serve_surface("mcp", "127.0.0.1", 8931):
        assert (surface_for(url) is not None) is aimed
    assert surface_for(url) is None  # withdrawn when it stops serving


def test_a_surface_on_every_interface_is_reached_by_any_address() -> None:
    """A surface bound to 0.0.0.0 is aimed at by any host on its port, another IP included."""
    with serve_surface("console", "0.0.0.0", 9000):
        assert surface_for("http://203.0.113.7:9000/") is not None
        assert [s.kind for s in surfaces()] == ["console"]
    assert surfaces() == ()


def test_the_watch_pauses_every_request_to_a_surface_port() -> None:
    """Each surface port gets a pattern of its own; one on 80/443 makes everything pause."""
    patterns = fetch_patterns({"billing.example"}, ports={8931})
    assert {"urlPattern": "*:8931/*", "requestStage": "Request"} in patterns
    assert fetch_patterns(set(), ports={443}) == [{"urlPattern": "*", "requestStage": "Request"}]


@pytest.mark.parametrize(
    "url",
    ["http://docs.example/", "https://x.example:8443/a?b", "about:blank", "about:blank#top"],
)
def test_web_urls_and_about_blank_are_on_the_web(url: str) -> None:
    """http:, https: and about:blank are where a conversation's page may go."""
    assert non_web_reason(url) is None


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "FILE:///etc/passwd",
        "chrome://settings",
        "view-source:https://docs.example/",
        "javascript:alert(1)",
        "data:text/html,hi",
        "blob:https://docs.example/1",
        "about:settings",
        "filesystem:https://docs.example/temporary/x",
        "docs.example/no-scheme",
    ],
)
def test_everything_else_is_off_the_web(url: str) -> None:
    """Local files, browser pages, wrappers, script and content URLs are refused by name."""
    reason = non_web_reason(url)
    assert reason is not None
    assert "http:, https: and about:blank" in reason


def test_a_refused_content_url_keeps_none_of_its_content() -> None:
    """A block record of a data: or javascript: URL keeps the scheme only; a file keeps its path."""
    assert shown_origin("data:text/html,secret-token-123") == ("data:", "")
    assert shown_origin("javascript:fetch('x?token=abc')") == ("javascript:", "")
    assert shown_origin("file:///home/u/.ssh/id_rsa") == ("file://", "/home/u/.ssh/id_rsa")


def test_a_closed_subscription_hears_no_further_change() -> None:
    """A subscriber is told of each surface starting and stopping until it closes, then never."""
    own = Surfaces()
    heard: list[tuple[int, ...]] = []
    subscription = own.subscribe(lambda: heard.append(tuple(s.port for s in own.served())))
    with own.serve("console", "127.0.0.1", 9000):
        pass
    assert heard == [(9000,), ()]
    subscription.close()
    subscription.close()  # idempotent
    with own.serve("console", "127.0.0.1", 9001):
        assert own.surface_for("http://127.0.0.1:9001/") is not None
    assert heard == [(9000,), ()]
    assert subscription.closed and own.subscribers == 0


def test_a_failing_subscriber_keeps_neither_the_surface_nor_the_others_from_their_change() -> None:
    """One subscriber raising does not stop a surface from serving, nor the next from hearing."""
    own = Surfaces()
    heard: list[str] = []

    def fails() -> None:
        raise RuntimeError("a subscriber's own failure")

    own.subscribe(fails)
    own.subscribe(lambda: heard.append("told"))
    with own.serve("mcp", "127.0.0.1", 8931) as surface:
        assert own.served() == (surface,)
    assert heard == ["told", "told"] and own.served() == ()


def test_the_module_functions_are_the_process_surfaces() -> None:
    """serve_surface, surfaces and surface_for read and change the one process-wide object."""
    with serve_surface("mcp", "127.0.0.1", 8931) as surface:
        assert PROCESS_SURFACES.served() == surfaces() == (surface,)
        assert surface_for("http://localhost:8931/") == surface
    assert PROCESS_SURFACES.served() == ()
