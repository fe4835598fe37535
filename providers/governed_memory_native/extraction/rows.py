"""One extraction job as a row, and the statements SQLite and PostgreSQL share.

A row holds identifiers and counters: the owner scope's dimensions, the enqueuing
principal (its id, kind, tenant, user and the permissions a job keeps), the turn ids and
their sequence numbers. Never a turn's text. ``tenant_id`` and ``user_id`` are columns
of their own so an erasure of a user finds the user's jobs by index.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from governed_memory.errors import MemoryStorageError
from governed_memory.extraction_jobs import (
    ExtractionJob,
    ExtractionJobState,
    Settlement,
    SettleOutcome,
)
from governed_memory.principal import Principal
from governed_memory.scope import Scope

TABLE: Final = "extraction_jobs"
FIELDS: Final = ("job_id", "tenant_id", "user_id", "scope_hash", "owner", "principal",
                 "turn_ids", "first_seq", "last_seq", "state", "attempts",
                 "next_attempt_at", "created_at", "lease_owner", "lease_expires_at",
                 "last_error_code")
COLUMNS: Final = ", ".join(FIELDS)

# Statements with ``?`` placeholders (PostgreSQL's module swaps in ``%s``).
INSERT: Final = (f"INSERT INTO {TABLE} ({COLUMNS}) VALUES ({', '.join('?' * len(FIELDS))})"
                 " ON CONFLICT (job_id) DO NOTHING")
STATE_OF: Final = f"SELECT state FROM {TABLE} WHERE job_id = ?"
DUE: Final = ("(state = 'pending' AND next_attempt_at <= ?)"
              " OR (state = 'leased' AND lease_expires_at <= ?)")
HELD: Final = "job_id = ? AND state = 'leased' AND lease_owner = ? AND attempts = ?"
SETTLE: Final = (f"UPDATE {TABLE} SET state = ?, next_attempt_at = coalesce(?, next_attempt_at),"
                 " lease_owner = NULL, lease_expires_at = NULL, last_error_code = ?,"
                 f" finished_at = ? WHERE {HELD}")
COUNTS: Final = f"SELECT state, count(*) FROM {TABLE} GROUP BY state"
OLDEST: Final = f"SELECT min(created_at) FROM {TABLE} WHERE state = 'pending'"
IN_STATE: Final = f"SELECT {COLUMNS} FROM {TABLE} WHERE state = ? ORDER BY seq LIMIT ?"
REQUEUE: Final = (f"UPDATE {TABLE} SET state = 'pending', attempts = 0, next_attempt_at = ?,"
                  " last_error_code = NULL WHERE state = 'dead'")
ERASE_USER: Final = f"DELETE FROM {TABLE} WHERE tenant_id = ? AND user_id = ?"


def encode(job: ExtractionJob) -> tuple[Any, ...]:
    """The row's values, in :data:`FIELDS` order."""
    principal = job.principal
    return (job.job_id, job.owner.tenant_id, job.owner.user_id, job.owner.scope_hash,
            _json(job.owner.dimensions()),
            _json({"principal_id": principal.principal_id, "kind": principal.kind.value,
                   "tenant_id": principal.tenant_id, "user_id": principal.user_id,
                   "permissions": sorted(p.value for p in principal.permissions)}),
            _json(list(job.turn_ids)), job.first_seq, job.last_seq, job.state.value,
            job.attempts, job.next_attempt_at, job.created_at, job.lease_owner,
            job.lease_expires_at, job.last_error_code)


def decode(row: Sequence[Any]) -> ExtractionJob:
    """A job from a row in :data:`FIELDS` order; a row that does not decode is storage
    damage, reported without its values."""
    values = dict(zip(FIELDS, row, strict=True))
    try:
        owner = Scope.from_dimensions(json.loads(values["owner"]))
        stored = json.loads(values["principal"])
        principal = Principal(stored["principal_id"], stored["kind"], stored["tenant_id"],
                              stored["user_id"], stored["permissions"])
        turn_ids = tuple(str(t) for t in json.loads(values["turn_ids"]))
        return ExtractionJob(
            job_id=str(values["job_id"]), owner=owner, principal=principal,
            turn_ids=turn_ids, first_seq=int(values["first_seq"]),
            last_seq=int(values["last_seq"]), state=ExtractionJobState(values["state"]),
            attempts=int(values["attempts"]),
            next_attempt_at=float(values["next_attempt_at"]),
            created_at=float(values["created_at"]), lease_owner=values["lease_owner"],
            lease_expires_at=_optional_float(values["lease_expires_at"]),
            last_error_code=values["last_error_code"])
    except (ValueError, TypeError, KeyError) as exc:
        raise MemoryStorageError(
            f"an extraction job row does not decode ({type(exc).__name__})") from None


def settle_values(settlement: Settlement, now: float) -> tuple[Any, ...]:
    """The parameters of :data:`SETTLE` for one settlement."""
    outcome = SettleOutcome(settlement.outcome)
    state = {SettleOutcome.DONE: ExtractionJobState.DONE,
             SettleOutcome.RETRY: ExtractionJobState.PENDING,
             SettleOutcome.DEAD: ExtractionJobState.DEAD}[outcome]
    finished = now if outcome is not SettleOutcome.RETRY else None
    return (state.value, settlement.next_attempt_at, settlement.error_code, finished,
            settlement.job_id, settlement.lease_owner, settlement.attempts)


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)
