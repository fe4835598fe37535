"""A reference model of the provider contract, independent of every provider.

It holds what a caller could know from the outside: which records exist in which scope,
their versions, revisions, contents and expiry, and what each operation must answer.
Where the contract leaves a provider a choice (hard-deleting an already expired record,
say) the model answers with the set of acceptable outcomes instead of guessing one.
"""

from __future__ import annotations

import enum
from typing import Final

import attrs
from governed_memory.records import VersionOperation

STALE_REVISION: Final = "r-never-issued-by-any-provider"


class Outcome(enum.Enum):
    OK = "ok"
    CONFLICT = "conflict"
    NOT_FOUND = "not_found"


def refused(expected_revision: str | None) -> Outcome:
    """How a write to a missing (deleted, erased, expired) record is refused: a caller
    that named a revision has a conflict; one that did not has nothing to act on."""
    return Outcome.NOT_FOUND if expected_revision is None else Outcome.CONFLICT


@attrs.define
class ModelVersion:
    version: int
    operation: VersionOperation
    content: str
    recorded_at: float


@attrs.define
class ModelRecord:
    id: str
    scope: int
    key: str | None
    content: str
    version: int
    revision: str
    created_at: float
    updated_at: float
    expires_at: float | None
    deleted: bool = False
    erased: bool = False
    """Physically gone (hard delete, purge, erasure)."""
    uncertain: bool = False
    """Invisible, but whether the provider still stores it is its own business (an
    expired record whose key a new record took)."""
    revisions: list[str] = attrs.field(factory=list)
    history: list[ModelVersion] = attrs.field(factory=list)

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def visible(self, now: float) -> bool:
        return not (self.deleted or self.erased or self.uncertain or self.expired(now))

    def history_known(self, now: float) -> bool:
        """Whether the model can say what ``history`` returns: not once the record is
        gone or expired (a provider may purge expired records at any time)."""
        return not (self.erased or self.uncertain or self.expired(now))

    def stale_revision(self) -> str:
        older = self.revisions[:-1]
        return older[0] if older else STALE_REVISION


@attrs.define
class IdempotentAdd:
    scope: int
    key: str
    content: str
    record_key: str | None
    expires_at: float | None
    record_id: str


@attrs.define
class ReferenceModel:
    records: dict[str, ModelRecord] = attrs.field(factory=dict)
    idempotent_adds: list[IdempotentAdd] = attrs.field(factory=list)

    def in_scope(self, scope: int) -> list[ModelRecord]:
        return [record for record in self.records.values() if record.scope == scope]

    def visible(self, scope: int, now: float) -> list[ModelRecord]:
        return sorted((r for r in self.in_scope(scope) if r.visible(now)), key=lambda r: r.id)

    def key_holder(self, scope: int, key: str | None, now: float) -> ModelRecord | None:
        if key is None:
            return None
        return next((r for r in self.in_scope(scope) if r.key == key and r.visible(now)), None)

    # -- predictions ------------------------------------------------------------------

    def expect_add(self, scope: int, key: str | None, now: float) -> set[Outcome]:
        return {Outcome.CONFLICT} if self.key_holder(scope, key, now) else {Outcome.OK}

    def expect_update(self, record: ModelRecord, expected_revision: str | None,
                      now: float) -> set[Outcome]:
        if not record.visible(now):
            return {refused(expected_revision)}
        if expected_revision is not None and expected_revision != record.revision:
            return {Outcome.CONFLICT}
        return {Outcome.OK}

    def expect_delete(self, record: ModelRecord, expected_revision: str | None, hard: bool,
                      now: float) -> set[Outcome]:
        if record.erased or (record.deleted and not hard):
            return {refused(expected_revision)}
        if expected_revision is not None and expected_revision != record.revision:
            return {Outcome.CONFLICT}
        if record.uncertain or (record.expired(now) and not record.deleted):
            if not hard:
                # An expired record is gone for every soft write (ExpiredDeletionTests).
                return {refused(expected_revision)}
            # Invisible but perhaps still stored: erasing it or calling it missing are
            # both faithful to the contract.
            return {Outcome.OK, refused(expected_revision)}
        return {Outcome.OK}

    def purge_bounds(self, scope: int, now: float) -> tuple[int, int]:
        """Fewest and most records ``purge_expired`` may remove from ``scope`` now."""
        live_expired = [r for r in self.in_scope(scope)
                        if not r.erased and not r.uncertain and not r.deleted and r.expired(now)]
        maybe = [r for r in self.in_scope(scope)
                 if not r.erased and (r.uncertain or (r.deleted and r.expired(now)))]
        return len(live_expired), len(live_expired) + len(maybe)

    def delete_all_bounds(self, scope: int) -> tuple[int, int]:
        stored = [r for r in self.in_scope(scope) if not r.erased and not r.uncertain]
        maybe = [r for r in self.in_scope(scope) if not r.erased and r.uncertain]
        return len(stored), len(stored) + len(maybe)

    # -- effects ----------------------------------------------------------------------

    def added(self, record: ModelRecord, now: float) -> None:
        for other in self.in_scope(record.scope):
            if (other.key is not None and other.key == record.key and not other.erased
                    and not other.deleted and other.expired(now)):
                other.uncertain = True
        self.records[record.id] = record

    def purged(self, scope: int, now: float) -> None:
        for record in self.in_scope(scope):
            if record.expired(now) or record.uncertain:
                record.erased, record.uncertain = True, False

    def erased_scope(self, scope: int) -> None:
        for record in self.in_scope(scope):
            record.erased, record.uncertain = True, False
        self.idempotent_adds = [a for a in self.idempotent_adds if a.scope != scope]
