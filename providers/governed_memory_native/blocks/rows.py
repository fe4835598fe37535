"""Row layout shared by the SQLite and PostgreSQL block stores: one layout, so a
version reads back the same from either.

A block is its versions: ``(scope_hash, name, version)`` is the primary key, and that
key alone is what turns "write version n + 1" into a compare-and-set (a second writer
of the same number collides). ``tenant_id`` and ``user_id`` are stored beside each
version only so erasure by user is one indexed delete.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from governed_memory.scope import Scope
from governed_memory.tiers.blocks import BlockVersion

TABLE = "memory_block_versions"
COLUMNS = ("scope_hash", "name", "version", "value", "edit", "updated_at")
INSERTED = ("scope_hash", "name", "version", "tenant_id", "user_id", "value", "edit",
            "updated_at")


def encode(scope: Scope, version: BlockVersion) -> tuple[Any, ...]:
    """The values of :data:`INSERTED`, in order."""
    return (version.scope_hash, version.name, version.version, scope.tenant_id,
            scope.user_id, version.value, version.edit, version.updated_at)


def decode(row: Mapping[str, Any]) -> BlockVersion:
    return BlockVersion(scope_hash=row["scope_hash"], name=row["name"],
                        version=int(row["version"]), value=row["value"], edit=row["edit"],
                        updated_at=float(row["updated_at"]))


def distinct(names: Sequence[str]) -> list[str]:
    """The requested names once each, in request order (a query takes each once)."""
    return list(dict.fromkeys(names))
