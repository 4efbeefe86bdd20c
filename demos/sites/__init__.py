"""The demos' local sites: LocalSites plus the pages only the demos and our tests need.

:class:`DemoSites` is :class:`~session_keeper.testing.LocalSites` (billing, docs, SSO)
with three more things on the same port, none of which ships in the wheel:

- ``catalogue.example`` — the paged catalogue the catalogue audit reads (:mod:`._catalogue`);
- the Guard's attack pages on ``docs.example`` and ``todo.example`` (:mod:`._attacks`);
- ``todo.example`` — the TodoMVC page the persistence check drives (:mod:`._todo`).

Importable from the tests and from the demos run as scripts (they put the repository
root on ``sys.path``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from demos.sites._attacks import attack_pages
from demos.sites._catalogue import (
    CATALOGUE_PAGE_SIZE,
    CATALOGUE_PAGES,
    CATALOGUE_PASSWORD,
    CATALOGUE_USERNAME,
    CatalogueSite,
    catalogue_ground_truth,
)
from demos.sites._todo import TODO_SEED, todo_site
from session_keeper.testing import LocalSites

__all__ = [
    "CATALOGUE_PAGES",
    "CATALOGUE_PAGE_SIZE",
    "CATALOGUE_PASSWORD",
    "CATALOGUE_USERNAME",
    "TODO_SEED",
    "DemoSites",
    "catalogue_ground_truth",
]


class DemoSites(LocalSites):
    """LocalSites with the catalogue, the Guard's attack pages and TodoMVC."""

    def __init__(
        self,
        *,
        billing_accounts: Mapping[str, str] | None = None,
        samesite: Literal["Lax", "None"] = "Lax",
    ) -> None:
        self._catalogue = CatalogueSite()
        super().__init__(
            billing_accounts=billing_accounts,
            samesite=samesite,
            extra_sites={
                "catalogue.example": self._catalogue.serve,
                "docs.example": attack_pages,
                "todo.example": todo_site,
            },
        )

    def inject_catalogue_fault(self, status: int, headers: Mapping[str, str] | None = None) -> None:
        """Make the catalogue's next ``/items`` request answer ``status`` (e.g. 503, 429)."""
        self._catalogue.inject_fault(status, headers)

    def expire_sessions(self, host: str) -> None:
        """Forget every session ``host`` issued (the catalogue's too), as a server expiry would."""
        if host == "catalogue.example":
            self._catalogue.expire_sessions()
        else:
            super().expire_sessions(host)
