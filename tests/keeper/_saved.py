"""Editing a keeper's saved rows from outside, as a test (or an attacker) would."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from session_keeper._keeper.saving import sealed_rows as r


def read_row(db: Path, kind: str, key: str, keeper_id: str = "default") -> dict[str, Any]:
    """One stored row's body (its MAC included)."""
    con = sqlite3.connect(db)
    try:
        (body,) = con.execute(
            "SELECT body FROM keeper_rows WHERE keeper_id = ? AND kind = ? AND key = ?",
            (keeper_id, kind, key),
        ).fetchone()
    finally:
        con.close()
    row: dict[str, Any] = json.loads(body)
    return row


def rewrite_row(
    db: Path,
    kind: str,
    key: str,
    change: Callable[[dict[str, Any]], None],
    *,
    keeper_id: str = "default",
) -> None:
    """Change one row and, like anyone without a keyring could, recompute its digest and
    the unsealed head's sum: only what the row says is wrong."""
    old = read_row(db, kind, key, keeper_id)
    body = {k: v for k, v in old.items() if k != "mac"}
    change(body)
    stored, mac = r.with_mac(None, keeper_id, kind, key, body)
    con = sqlite3.connect(db)
    try:
        (head_text,) = con.execute(
            "SELECT body FROM keeper_heads WHERE keeper_id = ?", (keeper_id,)
        ).fetchone()
        head = json.loads(head_text)
        total = r.add(r.remove(int(head["digest"], 16), old["mac"]), mac)
        head["digest"] = f"{total:064x}"
        con.execute(
            "UPDATE keeper_rows SET body = ? WHERE keeper_id = ? AND kind = ? AND key = ?",
            (json.dumps(stored), keeper_id, kind, key),
        )
        con.execute(
            "UPDATE keeper_heads SET body = ? WHERE keeper_id = ?", (json.dumps(head), keeper_id)
        )
        con.commit()
    finally:
        con.close()


def as_old_document(db: Path, doc: dict[str, Any], keeper_id: str = "default") -> None:
    """Make the store hold ``doc`` as the keeper's pre-rows document, and no rows."""
    con = sqlite3.connect(db)
    try:
        con.execute("DELETE FROM keeper_rows WHERE keeper_id = ?", (keeper_id,))
        con.execute("DELETE FROM keeper_heads WHERE keeper_id = ?", (keeper_id,))
        con.execute(
            "INSERT INTO keeper_state (keeper_id, body, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (keeper_id) DO UPDATE SET body = excluded.body",
            (keeper_id, json.dumps(doc), "2026-10-13T09:00:00.000000+00:00"),
        )
        con.commit()
    finally:
        con.close()


def stored_rows(db: Path, keeper_id: str = "default") -> list[tuple[Any, ...]]:
    """Every stored row and the head, as text (to compare before and after)."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT kind, key, body FROM keeper_rows WHERE keeper_id = ? ORDER BY kind, key",
            (keeper_id,),
        ).fetchall()
        heads = con.execute(
            "SELECT body FROM keeper_heads WHERE keeper_id = ?", (keeper_id,)
        ).fetchall()
    finally:
        con.close()
    return [*heads, *rows]
