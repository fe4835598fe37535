"""The values of a batch add: what to write, and what became of each item.

``add_many`` runs every item as its own governed add (decided, evented, idempotent on
its own key), so an item the policies refuse is reported, not raised, and the others
still land; these types carry that answer back item by item, in the caller's order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

from governed_memory.records import MemoryRecord, MemoryType, Provenance, Visibility

__all__ = ["MAX_BATCH_ITEMS", "AddItem", "BatchAddResult", "ItemOutcome"]

MAX_BATCH_ITEMS: Final = 10_000
"""Items per ``add_many`` call at most: the result holds every record in memory."""


@attrs.frozen(kw_only=True)
class AddItem:
    """One memory of a batch: ``add``'s arguments after the scope."""

    content: str
    memory_type: MemoryType | str = MemoryType.NOTE
    key: str | None = None
    metadata: Mapping[str, Any] | None = None
    provenance: Provenance | Mapping[str, str] | None = None
    visibility: Visibility | str = Visibility.PRIVATE
    importance: float = 0.5
    entity_ids: Iterable[str] = ()
    valid_from: float | None = None
    invalid_at: float | None = None
    supersedes: str | None = None
    expires_at: float | None = None
    idempotency_key: str | None = None
    occurred_at: float | None = None

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``add`` after the content."""
        return {f.name: getattr(self, f.name) for f in attrs.fields(AddItem)
                if f.name != "content"}


@attrs.frozen(kw_only=True)
class ItemOutcome:
    """What happened to the item at ``index``: its record, or the library's refusal
    (``error_code`` is the error's stable code, ``error`` its message)."""

    index: int
    record: MemoryRecord | None = None
    error_code: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.record is not None


@attrs.frozen(kw_only=True)
class BatchAddResult:
    outcomes: tuple[ItemOutcome, ...]

    @property
    def added(self) -> tuple[MemoryRecord, ...]:
        return tuple(o.record for o in self.outcomes if o.record is not None)

    @property
    def refused(self) -> tuple[ItemOutcome, ...]:
        return tuple(o for o in self.outcomes if o.record is None)
