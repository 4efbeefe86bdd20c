"""What a browser session can do beyond the base protocol is decided in one place, and a
capability it lacks answers "nothing seen" or "cannot tell", never "nothing there"."""

from __future__ import annotations

import ast
from pathlib import Path

from session_keeper._browser import capabilities, page_activity, sign_in_watch, storage_read
from session_keeper._browser.backend import NavigationObserving
from session_keeper._browser.capabilities import capabilities_of
from session_keeper._browser.rebind import RebindableSession
from session_keeper.testing import FakeBackend

PACKAGE = Path(__file__).resolve().parents[2] / "session_keeper"
#: Every optional protocol a session may offer.
PROTOCOLS = frozenset(
    {
        NavigationObserving.__name__,
        RebindableSession.__name__,
        capabilities.InterceptableSession.__name__,
        capabilities.ReattachingSession.__name__,
        capabilities.SignInPages.__name__,
        page_activity.ActivityObserving.__name__,
        sign_in_watch.DocumentObserving.__name__,
        sign_in_watch.SignInObserving.__name__,
        storage_read.WebStorage.__name__,
    }
)


def _probes(tree: ast.AST) -> list[int]:
    """Lines of ``isinstance(x, P)`` where ``P`` names an optional session protocol."""
    found: list[int] = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
        ):
            continue
        kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
        names = {k.id if isinstance(k, ast.Name) else getattr(k, "attr", "") for k in kinds}
        if names & PROTOCOLS:
            found.append(node.lineno)
    return found


def test_only_the_capabilities_module_asks_a_session_which_optional_protocols_it_offers() -> None:
    """No module of the engine or the Guard probes a session with ``isinstance``: they ask
    ``capabilities_of``, whose defaults keep each caller's meaning of "cannot tell"."""
    home = Path(capabilities.__file__).resolve()
    probes = [
        f"{p.relative_to(PACKAGE)}:{line}"
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.resolve() != home
        for line in _probes(ast.parse(p.read_text(encoding="utf-8")))
    ]
    assert probes == []


async def test_a_session_without_a_capability_gets_a_default_that_tells_nothing() -> None:
    """A session that offers none of storage, documents or page activity (the fake) reads
    no storage (``None``: the caller decides what unreadable means), hears no document,
    and reports no input or download as seen or saved."""
    backend = FakeBackend()
    session = await backend.launch()
    try:
        offered = capabilities_of(session)
        assert offered.web_storage is None
        assert offered.sign_in is None
        assert offered.interceptable is None and offered.reattaching is None
        assert offered.rebindable is None
        heard: list[object] = []
        offered.documents.on_document(lambda conversation, seen: heard.append(seen))
        page = await session.open_page("c")
        await session.goto(page, "https://billing.example/")
        assert heard == []
        assert offered.activity.unsubmitted_input() == ()
        assert offered.activity.unsaved_downloads("c") == ()
        assert await offered.activity.save_downloads("c", Path()) == ()
        # What the fake does offer is the session itself, seen through its protocol.
        assert offered.navigation is session and offered.sign_in_pages is session
    finally:
        await session.close()
