"""The keeper's declared projections: which rows of its saved document the store
copies into its read-only inspection tables.

The keeper owns its document format (its saved state); this module is the one
place that maps that format onto the store's projection tables, so the store never
reads a keeper field. Cookie records are projected as name and fingerprint only.
"""

from __future__ import annotations

from collections.abc import Mapping

from session_keeper.stores._records import dump_json

__all__ = ["keeper_projections"]


def _records(value: object) -> list[Mapping[str, object]]:
    # Only what to_document writes is expected here; anything else is skipped, not guessed.
    if not isinstance(value, list | tuple):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def keeper_projections(doc: Mapping[str, object]) -> dict[str, list[dict[str, object]]]:
    """Rows for ``keeper_generations``, ``keeper_logins``, ``keeper_grants`` and
    ``keeper_tabs`` from a keeper document (see ``Store.save_keeper_state``)."""
    generations: list[dict[str, object]] = []
    seen: set[int] = set()
    for item in _records(doc.get("generations")):
        generation = _int(item.get("generation"))
        if generation is None or generation in seen:
            continue
        seen.add(generation)
        generations.append(
            {
                "generation": generation,
                "started_at": _text(item.get("started_at")),
                "ended_at": _text(item.get("ended_at")),
                "cause": _text(item.get("cause")),
            }
        )
    logins: list[dict[str, object]] = [
        {
            "seq": seq,
            "site": _text(item.get("site")),
            "owner": _text(item.get("owner")),
            "account": _text(item.get("account")),
            "generation": _int(item.get("generation")),
            "recorded_at": _text(item.get("recorded_at")),
            "cookies": dump_json(
                [
                    {"name": _text(c.get("name")), "fingerprint": _text(c.get("fingerprint"))}
                    for c in _records(item.get("cookies"))
                ],
                "cookies",
            ),
        }
        for seq, item in enumerate(_records(doc.get("logins")))
    ]
    grants: list[dict[str, object]] = [
        {"seq": seq, "body": dump_json(dict(item), "grant")}
        for seq, item in enumerate(_records(doc.get("grants")))
    ]
    tabs: list[dict[str, object]] = [
        {
            "seq": seq,
            "conversation": _text(item.get("conversation")),
            "last_verified_url": _text(item.get("last_url")),
            "body": dump_json(dict(item), "tab"),
        }
        for seq, item in enumerate(_records(doc.get("tabs")))
    ]
    return {
        "keeper_generations": generations,
        "keeper_logins": logins,
        "keeper_grants": grants,
        "keeper_tabs": tabs,
    }
