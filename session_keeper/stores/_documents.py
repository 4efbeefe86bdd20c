"""Keeper documents: opaque JSON the caller owns (the vault; a keeper before rows, see
:mod:`._rows`), plus the projections it declares.

The store does not read a document's fields. The caller (the keeper, the vault)
owns the format and its version; when it saves, it may pass rows for the read-only
projection tables (:data:`~._schema.PROJECTION_TABLES`), which the store checks
against the schema and replaces in the same transaction as the document.

What the store does enforce is its own invariant, for every document: no secret in
a stored row. A record (a mapping inside a list) may not carry a key named like a
secret, and a cookie record (a mapping inside a list called ``cookies``) may not
carry its ``value``: fingerprints only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from session_keeper.errors import InvalidArgument, InvalidArgumentType
from session_keeper.stores._engine import Engine, operation
from session_keeper.stores._profiles import check_profile_lease, lock_profile
from session_keeper.stores._records import ProfileLease, dump_json
from session_keeper.stores._schema import PROJECTION_TABLES, Table
from session_keeper.stores._sql import Q, Step, check_str, load_mapping

#: Rows for projection tables, by table name; each row maps column names to values.
#: ``keeper_id`` is the store's to fill in.
Projections = Mapping[str, Sequence[Mapping[str, object]]]

#: Keys that name a secret; a document holding one in a record is refused.
#: Checked on records (mappings inside lists), not on mappings keyed by ids, so a
#: conversation that happens to be called "password" is not mistaken for one.
_SECRET_KEYS: Final = frozenset({"cookie_value", "password", "secret"})
#: The Python values a projection cell of each column kind accepts.
_CELL_TYPES: Final[Mapping[str, type | tuple[type, ...]]] = {
    "text": str,
    "time": str,
    "int": int,
    "real": (int, float),
}


def scan_for_secrets(value: object, path: str, in_record: bool = False) -> None:
    """Refuse a record key named like a secret, and a cookie record carrying its value."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if in_record and isinstance(key, str) and key.lower() in _SECRET_KEYS:
                raise InvalidArgument(
                    f"keeper state holds a {key!r} at {path}; store fingerprints, never values"
                )
            if key == "cookies" and isinstance(item, list | tuple):
                _refuse_cookie_values(item, f"{path}.{key}")
            scan_for_secrets(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            scan_for_secrets(item, f"{path}[{i}]", in_record=True)


def _refuse_cookie_values(cookies: Sequence[object], path: str) -> None:
    for i, cookie in enumerate(cookies):
        if isinstance(cookie, Mapping) and "value" in cookie:
            raise InvalidArgument(
                f"keeper state holds a cookie value at {path}[{i}]; "
                "store fingerprints, never values"
            )


def _insert_sql(table: Table) -> str:
    columns = ", ".join(table.column_names)
    marks = ", ".join("?" for _ in table.columns)
    return f"INSERT INTO {table.name} ({columns}) VALUES ({marks})"


_INSERTS: Final = {name: _insert_sql(table) for name, table in PROJECTION_TABLES.items()}


def projection_table(name: str, rows: object, what: str) -> Table:
    """The projection table ``name`` names, once ``rows`` is a sequence (else refused)."""
    table = PROJECTION_TABLES.get(name)
    if table is None:
        known = ", ".join(sorted(PROJECTION_TABLES))
        raise InvalidArgument(f"{name!r} is not a projection table (known: {known})")
    if isinstance(rows, str | bytes) or not isinstance(rows, Sequence):
        raise InvalidArgumentType(f"{what}[{name!r}] must be a sequence of rows")
    return table


def check_projections(projections: Projections | None) -> dict[str, list[tuple[object, ...]]]:
    """Projection rows as column tuples (``keeper_id`` left out), checked against the schema."""
    # Every row is checked against the schema before the transaction writes anything.
    if projections is None:
        return {}
    if not isinstance(projections, Mapping):
        raise InvalidArgumentType("projections must map table names to rows")
    checked: dict[str, list[tuple[object, ...]]] = {}
    for name, rows in projections.items():
        table = projection_table(name, rows, "projections")
        columns = table.column_names[1:]  # keeper_id is the store's
        keys: set[tuple[object, ...]] = set()
        out: list[tuple[object, ...]] = []
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise InvalidArgumentType(f"projections[{name!r}][{i}] must be a mapping")
            unknown = set(row) - set(columns)
            if unknown:
                raise InvalidArgument(f"{name} has no column {sorted(map(str, unknown))}")
            for column in table.columns[1:]:
                cell = row.get(column.name)
                if cell is None:
                    if not column.null:
                        raise InvalidArgument(f"{name}.{column.name} needs a value")
                    continue
                wanted = _CELL_TYPES[column.kind]
                if not isinstance(cell, wanted) or isinstance(cell, bool):
                    raise InvalidArgumentType(
                        f"{name}.{column.name} must be {column.kind} or None, "
                        f"not {type(cell).__name__}"
                    )
            key = tuple(row.get(c) for c in table.primary_key[1:])
            if key in keys:
                raise InvalidArgument(f"{name} has two rows for {key}")
            keys.add(key)
            out.append(tuple(row.get(c) for c in columns))
        checked[name] = out
    return checked


class KeeperDocuments(Engine):
    """``save_keeper_state``, ``load_keeper_state`` and ``keeper_ids``."""

    @operation(write=True)
    def save_keeper_state(
        self,
        keeper_id: str,
        state: Mapping[str, object],
        *,
        projections: Projections | None = None,
    ) -> Step[None]:
        """See :meth:`Store.save_keeper_state`."""
        return self._save_keeper_state(keeper_id, state, projections, None)

    @operation(write=True)
    def save_keeper_state_fenced(
        self,
        fence: ProfileLease,
        keeper_id: str,
        state: Mapping[str, object],
        *,
        projections: Projections | None = None,
    ) -> Step[None]:
        """See :meth:`Store.save_keeper_state_fenced`."""
        return self._save_keeper_state(keeper_id, state, projections, check_profile_lease(fence))

    def _save_keeper_state(
        self,
        keeper_id: str,
        state: Mapping[str, object],
        projections: Projections | None,
        fence: ProfileLease | None,
    ) -> Step[None]:
        check_str(keeper_id, "keeper_id")
        if not isinstance(state, Mapping):
            raise InvalidArgumentType(f"state must be a mapping, not {type(state).__name__}")
        body = dump_json(dict(state), "keeper state")
        scan_for_secrets(state, "$")
        rows = check_projections(projections)
        now = self._clock.now()
        if fence is not None:
            # In the same transaction as the write: a holder fenced meanwhile writes nothing.
            yield from lock_profile(fence, now)
        yield Q(
            "upsert_keeper_state",
            "INSERT INTO keeper_state (keeper_id, body, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (keeper_id) DO UPDATE SET body = excluded.body, "
            "updated_at = excluded.updated_at",
            (keeper_id, body, now),
        )
        # Every save replaces all of the keeper's projections, declared or not.
        for table in PROJECTION_TABLES:
            yield Q(f"clear_{table}", f"DELETE FROM {table} WHERE keeper_id = ?", (keeper_id,))
        for table, table_rows in rows.items():
            for row in table_rows:
                yield Q(f"project_{table}", _INSERTS[table], (keeper_id, *row))

    @operation(write=False)
    def load_keeper_state(self, keeper_id: str) -> Step[dict[str, object] | None]:
        """See :meth:`Store.load_keeper_state`."""
        check_str(keeper_id, "keeper_id")
        rows = yield Q(
            "select_keeper_state",
            "SELECT body FROM keeper_state WHERE keeper_id = ?",
            (keeper_id,),
        )
        if not rows:
            return None
        return load_mapping(rows[0][0], f"keeper state {keeper_id!r}")

    @operation(write=False)
    def keeper_ids(self) -> Step[list[str]]:
        """See :meth:`Store.keeper_ids`."""
        rows = yield Q(
            "select_keeper_ids",
            "SELECT keeper_id FROM keeper_state UNION SELECT keeper_id FROM keeper_heads "
            "ORDER BY keeper_id",
        )
        return [str(r[0]) for r in rows]
