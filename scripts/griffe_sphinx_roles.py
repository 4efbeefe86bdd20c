"""Griffe extension: render Sphinx roles in our docstrings as inline code.

The package's docstrings say ``:class:`Store``` and ``:meth:`aclose``` (they read well
in ``help()`` and in editors). Markdown has no roles, so without this the page would
show the role's name next to the code span.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

# :class:`~session_keeper.Store` -> `Store`; :meth:`aclose` -> `aclose`
_ROLE = re.compile(r":(?:class|meth|func|attr|mod|exc|data|obj|const):`(~?)([^`]+)`")


def _as_code(match: re.Match[str]) -> str:
    target = match.group(2)
    if match.group(1):  # a leading ~ shows only the last dotted part, as Sphinx does
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


class SphinxRolesAsCode(griffe.Extension):
    """Rewrite every docstring's Sphinx roles before mkdocstrings renders it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_as_code, obj.docstring.value)
