"""The engine: the SessionKeeper facade and its parts, one sub-package per concept.

Each room imports only the rooms below it (an import-linter ``layers`` contract in
``pyproject.toml``), and each names its entry module in its own docstring:

- ``facade``: :class:`~session_keeper.SessionKeeper`, its settings and its wiring;
- ``lifecycle``: the browser's launch, restart and re-binding, what a restart kept,
  conversations' news and ends, sweeps;
- ``logins``: recording, probing, renewing and moving logins;
- ``permissions``: grants, borrow requests, takeovers and the one permission query;
- ``tabs``: one page per conversation and the handle code drives it through;
- ``guard_link``: which Guard watches a keeper, and the log of what it refused;
- ``saving``: the keeper's rows, written as they change, and its owned writes;
- ``state``: what the keeper knows now, and the values of it that are saved.
"""
