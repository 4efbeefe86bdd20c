"""A store URL means the same file in every command: SQLAlchemy's spelling."""

from __future__ import annotations

from pathlib import Path

import pytest

from session_keeper.errors import InvalidArgument, InvalidArgumentType
from session_keeper.stores import PostgresStore, SqliteStore, store_from_url


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///agent.db", "agent.db"),
        ("sqlite:///data/agent.db", "data/agent.db"),
        ("sqlite:////var/lib/agent.db", "/var/lib/agent.db"),
        ("agent.db", "agent.db"),
        ("/var/lib/agent.db", "/var/lib/agent.db"),
    ],
)
def test_a_sqlite_url_names_the_file_sqlalchemy_would(url: str, path: str) -> None:
    """``sqlite:///x`` is relative, ``sqlite:////x`` absolute, a bare path is itself."""
    store = store_from_url(url)
    assert isinstance(store, SqliteStore)
    assert Path(store.path) == Path(path)


def test_a_postgres_url_is_a_postgres_store() -> None:
    """Both PostgreSQL schemes give a PostgresStore (not opened: no server needed)."""
    for url in ("postgresql://u@localhost/agents", "postgres://u@localhost/agents"):
        assert isinstance(store_from_url(url), PostgresStore)


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("", InvalidArgument),
        ("sqlite://agent.db", InvalidArgument),
        ("sqlite:///", InvalidArgument),
        ("mysql://localhost/agents", InvalidArgument),
        (Path("agent.db"), InvalidArgumentType),
    ],
)
def test_a_url_no_store_has_is_a_typed_error(
    url: object, error: type[Exception], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty, malformed or foreign URL is refused before any file is created."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error):
        store_from_url(url)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
