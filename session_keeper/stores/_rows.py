"""Keeper rows: a keeper's state as rows keyed ``(kind, key)`` that change in place.

The store does not read a row's fields. The keeper owns their format, their seals and
the head that says what the rows add up to; the store writes a batch of changes (the
head, upserted and deleted rows, the projections that follow them) in one
transaction, one statement per batch (``executemany``), and enforces its own
invariant on what is written: no secret in a stored row (see :mod:`._documents`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import attrs

from session_keeper.errors import InvalidArgument, InvalidArgumentType
from session_keeper.stores._documents import (
    Projections,
    check_projections,
    projection_table,
    scan_for_secrets,
)
from session_keeper.stores._engine import Engine, operation
from session_keeper.stores._profiles import check_profile_lease, lock_profile
from session_keeper.stores._records import ProfileLease, dump_json
from session_keeper.stores._schema import PROJECTION_TABLES, Table
from session_keeper.stores._sql import Q, Step, check_str, load_mapping

#: A row's identity within its keeper: ``(kind, key)``.
RowKey = tuple[str, str]


@attrs.frozen(kw_only=True)
class KeeperRows:
    """What :meth:`Store.load_keeper_rows` returns: a keeper's head and its rows."""

    #: The head document last saved (the keeper's, opaque to the store).
    head: Mapping[str, object]
    #: Every row, by ``(kind, key)``.
    rows: Mapping[RowKey, Mapping[str, object]]


def _upsert_sql(table: Table) -> str:
    columns = ", ".join(table.column_names)
    marks = ", ".join("?" for _ in table.columns)
    keys = ", ".join(table.primary_key)
    rest = [c for c in table.column_names if c not in table.primary_key]
    update = (
        "DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in rest) if rest else "DO NOTHING"
    )
    return f"INSERT INTO {table.name} ({columns}) VALUES ({marks}) ON CONFLICT ({keys}) {update}"


def _delete_sql(table: Table) -> str:
    where = " AND ".join(f"{c} = ?" for c in table.primary_key)
    return f"DELETE FROM {table.name} WHERE {where}"


_PROJECT_UPSERTS: Final = {name: _upsert_sql(t) for name, t in PROJECTION_TABLES.items()}
_PROJECT_DELETES: Final = {name: _delete_sql(t) for name, t in PROJECTION_TABLES.items()}


def _check_row_key(kind: object, key: object, what: str) -> RowKey:
    return check_str(kind, f"{what} kind"), check_str(key, f"{what} key")


def _check_upserts(
    upserts: Iterable[tuple[str, str, Mapping[str, object]]],
) -> list[tuple[str, str, str]]:
    if isinstance(upserts, str | bytes | Mapping):
        raise InvalidArgumentType("upserts must be a sequence of (kind, key, body)")
    out: list[tuple[str, str, str]] = []
    seen: set[RowKey] = set()
    for i, item in enumerate(upserts):
        if not isinstance(item, tuple) or len(item) != 3:
            raise InvalidArgumentType(f"upserts[{i}] must be a (kind, key, body) tuple")
        kind, key = _check_row_key(item[0], item[1], f"upserts[{i}]")
        body = item[2]
        if not isinstance(body, Mapping):
            raise InvalidArgumentType(f"upserts[{i}] body must be a mapping")
        if (kind, key) in seen:
            raise InvalidArgument(f"upserts name the row {(kind, key)} twice")
        seen.add((kind, key))
        # The secret scan runs on what is written: this row, not the keeper's whole state.
        scan_for_secrets(body, f"$[{kind}:{key}]")
        out.append((kind, key, dump_json(dict(body), f"row {(kind, key)}")))
    return out


def _check_deletes(deletes: Iterable[tuple[str, str]], upserted: set[RowKey]) -> list[RowKey]:
    if isinstance(deletes, str | bytes | Mapping):
        raise InvalidArgumentType("deletes must be a sequence of (kind, key)")
    out: list[RowKey] = []
    for i, item in enumerate(deletes):
        if not isinstance(item, tuple) or len(item) != 2:
            raise InvalidArgumentType(f"deletes[{i}] must be a (kind, key) tuple")
        row = _check_row_key(item[0], item[1], f"deletes[{i}]")
        if row in upserted:
            raise InvalidArgument(f"the row {row} is both upserted and deleted")
        out.append(row)
    return out


def _check_projection_deletes(deletes: Projections | None) -> dict[str, list[tuple[object, ...]]]:
    if deletes is None:
        return {}
    if not isinstance(deletes, Mapping):
        raise InvalidArgumentType("projections_delete must map table names to keys")
    out: dict[str, list[tuple[object, ...]]] = {}
    for name, rows in deletes.items():
        table = projection_table(name, rows, "projections_delete")
        key_columns = table.primary_key[1:]
        keys: list[tuple[object, ...]] = []
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping) or set(row) != set(key_columns):
                raise InvalidArgument(
                    f"projections_delete[{name!r}][{i}] must give exactly {list(key_columns)}"
                )
            keys.append(tuple(row[c] for c in key_columns))
        out[name] = keys
    return out


class KeeperRowsStore(Engine):
    """``save_keeper_rows`` and ``load_keeper_rows``."""

    @operation(write=True)
    def save_keeper_rows(
        self,
        keeper_id: str,
        *,
        head: Mapping[str, object],
        upserts: Sequence[tuple[str, str, Mapping[str, object]]] = (),
        deletes: Sequence[tuple[str, str]] = (),
        projections_upsert: Projections | None = None,
        projections_delete: Projections | None = None,
        replaces_document: bool = False,
        fence: ProfileLease | None = None,
    ) -> Step[None]:
        """See :meth:`Store.save_keeper_rows`."""
        check_str(keeper_id, "keeper_id")
        if not isinstance(head, Mapping):
            raise InvalidArgumentType(f"head must be a mapping, not {type(head).__name__}")
        scan_for_secrets(head, "$head")
        head_text = dump_json(dict(head), "keeper head")
        rows = _check_upserts(upserts)
        gone = _check_deletes(deletes, {(k, key) for k, key, _ in rows})
        project = check_projections(projections_upsert)
        unproject = _check_projection_deletes(projections_delete)
        if not isinstance(replaces_document, bool):
            raise InvalidArgumentType("replaces_document must be a bool")
        lease = None if fence is None else check_profile_lease(fence)
        now = self._clock.now()
        if lease is not None:
            # In the same transaction as the write: a holder fenced meanwhile writes nothing.
            yield from lock_profile(lease, now)
        yield Q(
            "upsert_keeper_head",
            "INSERT INTO keeper_heads (keeper_id, body, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (keeper_id) DO UPDATE SET body = excluded.body, "
            "updated_at = excluded.updated_at",
            (keeper_id, head_text, now),
            answer="none",
        )
        if replaces_document:
            # The rows replace the document the keeper saved before them (schema 3).
            yield Q(
                "drop_keeper_document",
                "DELETE FROM keeper_state WHERE keeper_id = ?",
                (keeper_id,),
                answer="none",
            )
        if rows:
            yield Q(
                "upsert_keeper_rows",
                "INSERT INTO keeper_rows (keeper_id, kind, key, body) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (keeper_id, kind, key) DO UPDATE SET body = excluded.body",
                many=tuple((keeper_id, *row) for row in rows),
            )
        if gone:
            yield Q(
                "delete_keeper_rows",
                "DELETE FROM keeper_rows WHERE keeper_id = ? AND kind = ? AND key = ?",
                many=tuple((keeper_id, *row) for row in gone),
            )
        for table, keys in unproject.items():
            if keys:
                yield Q(
                    f"unproject_{table}",
                    _PROJECT_DELETES[table],
                    many=tuple((keeper_id, *k) for k in keys),
                )
        for table, table_rows in project.items():
            if table_rows:
                yield Q(
                    f"project_{table}",
                    _PROJECT_UPSERTS[table],
                    many=tuple((keeper_id, *r) for r in table_rows),
                )

    @operation(write=False)
    def load_keeper_rows(self, keeper_id: str) -> Step[KeeperRows | None]:
        """See :meth:`Store.load_keeper_rows`."""
        check_str(keeper_id, "keeper_id")
        heads = yield Q(
            "select_keeper_head", "SELECT body FROM keeper_heads WHERE keeper_id = ?", (keeper_id,)
        )
        head = load_mapping(heads[0][0], f"keeper head {keeper_id!r}") if heads else {}
        found = yield Q(
            "select_keeper_rows",
            "SELECT kind, key, body FROM keeper_rows WHERE keeper_id = ? ORDER BY kind, key",
            (keeper_id,),
        )
        if not heads and not found:
            return None
        rows = {
            (str(kind), str(key)): load_mapping(body, f"keeper row {(kind, key)}")
            for kind, key, body in found
        }
        # Rows without their head are returned as such (an empty head): the keeper refuses
        # them rather than be handed a fresh start.
        return KeeperRows(head=head, rows=rows)
