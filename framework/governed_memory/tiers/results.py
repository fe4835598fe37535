"""What the tier stores return, and how the activity port checks it came from the
scopes that were asked for.

The long-term tier's records carry a scope hash the port compares; the conversation
and working-state tiers follow the same rule. Each result answers ``audit(allowed)``:
the result with anything of another scope left out, what the event may say about it
(ids, counts, never content), and the ids it left out, which the port reports as a
``memory.read.scope_violation``. A single result of another scope is a storage error:
there is nothing left to return.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

import attrs

from governed_memory.errors import MemoryStorageError
from governed_memory.records import _frozen_mapping
from governed_memory.request import Audited, Checked, summarised


def _own(scope_hash: str, allowed: Set[str], what: str) -> None:
    if scope_hash not in allowed:
        raise MemoryStorageError(f"the {what} store answered for another scope")


@attrs.frozen(slots=True)
class Cleared(Audited):
    """How much a clear removed from one exact scope."""

    scope_hash: str
    removed: int

    def audit(self, allowed: Set[str]) -> Checked[Cleared]:
        _own(self.scope_hash, allowed, "tier")
        return summarised(self, count=self.removed)


@attrs.frozen(slots=True)
class WorkingState(Audited):
    """One run's scratch state. ``expires_at`` moves forward on every update."""

    scope_hash: str
    state: Mapping[str, Any] = attrs.field(converter=_frozen_mapping)
    updated_at: float
    expires_at: float
    revision: int = 1

    def audit(self, allowed: Set[str]) -> Checked[WorkingState]:
        _own(self.scope_hash, allowed, "working-state")
        return summarised(self, versions=(self.revision,), count=1)


@attrs.frozen(slots=True)
class WorkingStateRead(Audited):
    """A read of one run's state; ``state`` is ``None`` when there is none (never set,
    cleared or expired)."""

    scope_hash: str
    state: WorkingState | None = None

    def audit(self, allowed: Set[str]) -> Checked[WorkingStateRead]:
        _own(self.scope_hash, allowed, "working-state")
        if self.state is not None:
            _own(self.state.scope_hash, allowed, "working-state")
        return summarised(self, versions=() if self.state is None else (self.state.revision,),
                         count=0 if self.state is None else 1)


@attrs.frozen(slots=True)
class InjectedVersion:
    """One memory version a per-turn context put into a prompt."""

    record_id: str
    version: int
    content_hash: str
    scope_hash: str


@attrs.frozen(slots=True)
class RememberedDecision:
    """One fact's decision as the trail keeps it: never the fact, only what became of
    it, the memory that says it (when one does) and the fixed reason."""

    decision: str
    reason: str
    record_id: str | None = None
    version: int | None = None


@attrs.frozen(slots=True)
class RememberRecord(Audited):
    """What one ``remember`` call decided, in the order it decided."""

    scope_hash: str
    decisions: tuple[RememberedDecision, ...]

    def audit(self, allowed: Set[str]) -> Checked[RememberRecord]:
        _own(self.scope_hash, allowed, "remember")
        named = [d for d in self.decisions if d.record_id is not None]
        return summarised(self, record_ids=tuple(str(d.record_id) for d in named),
                          versions=tuple(d.version for d in named if d.version is not None),
                          count=len(self.decisions),
                          reasons=tuple(f"{d.decision}: {d.reason}" for d in self.decisions))


@attrs.frozen(slots=True)
class ContextRecord(Audited):
    """What one per-turn context injected and what it had to do without."""

    injected: tuple[InjectedVersion, ...]
    degraded: tuple[str, ...]
    window_turn_ids: tuple[str, ...] = ()

    def audit(self, allowed: Set[str]) -> Checked[ContextRecord]:
        kept = tuple(v for v in self.injected if v.scope_hash in allowed)
        stray = tuple(v.record_id for v in self.injected if v.scope_hash not in allowed)
        return summarised(
            attrs.evolve(self, injected=kept),
            record_ids=tuple(v.record_id for v in kept),
            versions=tuple(v.version for v in kept),
            content_hashes=tuple(v.content_hash for v in kept),
            count=len(kept),
            reasons=tuple(f"degraded: {d}" for d in self.degraded),
            stray=stray,
        )
