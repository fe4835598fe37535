"""``put``: write a record under its key, adding it or updating it, race-safe.

Callers that keep one record per key (a profile field, a setting, a summary) used to
``lookup`` and then ``add`` or ``update`` themselves, and two of them racing could both
miss and both add, or overwrite each other's update unseen. ``put`` closes both races
with what every provider already guarantees inside one write unit: a live key is held by
at most one record of a scope (an add under a held key is a ``MemoryConflictError``,
enforced by the native schema's unique index), and an update with ``expected_revision``
applies only to that revision. A put that loses either race looks again and retries, so
racing puts of one key leave one record, each put a version of it (last writer wins);
given ``expected_revision``, a put is a compare-and-set and a lost race is the caller's
``MemoryConflictError``.

It is composed of governed operations, not one: the trail shows the ``lookup`` and the
``add`` or ``update`` each put made (a retry shows again), each decided by the policies,
rated by the quotas and evented exactly as that operation, so a put needs the ``read``
and ``write`` permissions of the scope.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from governed_memory.errors import (
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryValidationError,
)
from governed_memory.principal import Principal
from governed_memory.records import MemoryRecord, MemoryType, Visibility
from governed_memory.scope import Scope

if TYPE_CHECKING:
    from governed_memory.memory_operations import MemoryOperations

MAX_PUT_ATTEMPTS = 16
"""How often a put without ``expected_revision`` looks again after losing a race.
Each lost race means another writer's put or add of the key went through, so the
store progresses; a put that loses this often raises ``MemoryConflictError``."""


async def put_by_key(
    memory: MemoryOperations,
    principal: Principal,
    scope: Scope,
    key: str,
    content: str,
    *,
    expected_revision: str | None = None,
    memory_type: MemoryType | str | None = None,
    metadata: Mapping[str, Any] | None = None,
    importance: float | None = None,
    visibility: Visibility | str | None = None,
    entity_ids: Iterable[str] | None = None,
    expires_at: float | None = None,
) -> MemoryRecord:
    """The record ``key`` names in ``scope`` after writing ``content`` to it: a new
    record (fields left ``None`` take ``add``'s defaults) when no live record holds the
    key, else a new version of the holder (fields left ``None`` keep their value)."""
    if not isinstance(key, str) or not key:
        raise MemoryValidationError("put needs a non-empty key", field="key")
    entities = None if entity_ids is None else tuple(entity_ids)
    for _ in range(MAX_PUT_ATTEMPTS):
        holder = await memory.lookup(principal, scope, key=key)
        if holder is None:
            if expected_revision is not None:
                raise MemoryConflictError(
                    "expected_revision was given but no record holds the key")
            try:
                return await memory.add(
                    principal, scope, content, key=key,
                    memory_type=memory_type if memory_type is not None else MemoryType.NOTE,
                    metadata=metadata,
                    visibility=visibility if visibility is not None else Visibility.PRIVATE,
                    importance=importance if importance is not None else 0.5,
                    entity_ids=entities or (), expires_at=expires_at)
            except MemoryConflictError:
                continue  # a racing write took the key first: update it instead
        try:
            return await memory.update(
                principal, scope, holder.id,
                expected_revision=expected_revision or holder.revision, content=content,
                memory_type=memory_type, metadata=metadata, importance=importance,
                visibility=visibility, entity_ids=entities, expires_at=expires_at)
        except (MemoryConflictError, MemoryNotFoundError):
            if expected_revision is not None:
                raise
            continue  # a racing write changed (or removed) the holder: look again
    raise MemoryConflictError(
        f"put lost {MAX_PUT_ATTEMPTS} races for the key in a row; try again")
