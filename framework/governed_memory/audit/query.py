"""Reading events back out of a trail, filtered the way an auditor asks.

Events are read as the JSON objects the chain hashed, not rebuilt into
``MemoryEvent``: a trail outlives the code that wrote it, and a query must still read
an entry whose event has a field this version does not know.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from governed_memory.audit.chain import ENTRY, ChainFormatError, read_chain_json
from governed_memory.audit.stored import StoredTrail
from governed_memory.audit.verify import Source, chain_files, read_lines


@attrs.frozen(slots=True)
class TrailEntry:
    seq: int
    event: dict[str, Any]

    @property
    def type(self) -> str:
        return str(self.event.get("type", ""))

    @property
    def occurred_at(self) -> float:
        value = self.event.get("occurred_at")
        return float(value) if isinstance(value, int | float) else 0.0


def json_lines(path: Path | StoredTrail) -> Iterator[Any]:
    """The decoded value of each complete line of one trail file.

    A torn last line (no newline: the writer died mid-append) and a line that is not
    strict JSON (:mod:`~governed_memory.audit.strict_json`: a duplicate key, say) are
    passed over here, never read one way of several; telling whether that is damage is
    ``verify``'s job, and ``audit query``/``report`` verify first unless told not to.
    """
    for _, raw, terminated in read_lines(path):
        if not terminated:
            continue
        try:
            yield read_chain_json(raw, "")
        except ChainFormatError:
            continue


def iter_entries(paths: Sequence[Source]) -> Iterator[TrailEntry]:
    """Every entry of the trail in chain order (unverified: verify first); a trail
    store's entries are read as its lines would be."""
    for path in chain_files(paths):
        for value in json_lines(path):
            if (isinstance(value, dict) and value.get("kind") == ENTRY
                    and isinstance(value.get("event"), dict)
                    and isinstance(value.get("seq"), int)):
                yield TrailEntry(value["seq"], value["event"])


@attrs.frozen(slots=True)
class EventFilter:
    """All given conditions must hold; ``None`` leaves a dimension open."""

    tenant: str | None = None
    principal: str | None = None
    scope_hash: str | None = None
    subject_hash: str | None = None
    operation: str | None = None
    """An operation (``add``, ``search``, ``delete_user``) or an event type
    (``memory.write.committed``)."""
    outcome: str | None = None
    since: float | None = None
    until: float | None = None

    def matches(self, event: dict[str, Any]) -> bool:
        if self.tenant is not None and event.get("tenant_id") != self.tenant:
            return False
        if self.principal is not None and event.get("principal_id") != self.principal:
            return False
        if self.scope_hash is not None and not (
                event.get("scope_hash") == self.scope_hash
                or self.scope_hash in (event.get("scope_hashes") or ())):
            return False
        if self.subject_hash is not None and self.subject_hash not in (
                event.get("subject_hashes") or ()):
            return False
        if self.operation is not None and self.operation not in (event.get("operation"),
                                                                 event.get("type")):
            return False
        if self.outcome is not None and event.get("outcome") != self.outcome:
            return False
        when = event.get("occurred_at")
        if not isinstance(when, int | float):
            return self.since is None and self.until is None
        if self.since is not None and when < self.since:
            return False
        return not (self.until is not None and when >= self.until)


def query(paths: Sequence[Source], where: EventFilter) -> Iterator[TrailEntry]:
    return (entry for entry in iter_entries(paths) if where.matches(entry.event))
