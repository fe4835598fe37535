"""What the trail says about one data subject: written, read, denied, erased, and when.

Events name the subject by ``subject_hash(tenant, user)`` (see ``events.py``), so the
report needs the user id only to compute that hash and to check erasure receipts, and
prints no content because the trail holds none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import attrs

from governed_memory.audit.query import EventFilter, query
from governed_memory.audit.verify import Source
from governed_memory.events import RECEIPT_EVENT, subject_hash
from governed_memory.records import ErasureReceipt

CATEGORIES: Final = ("written", "read", "deleted", "erased", "denied", "failed")

_DELETING: Final = frozenset({"delete", "delete_all", "purge_expired", "reject"})


@attrs.frozen(slots=True)
class SubjectActivity:
    category: str
    occurred_at: float
    operation: str
    outcome: str | None
    operation_id: str
    principal_id: str
    record_ids: tuple[str, ...]
    count: int | None
    reasons: tuple[str, ...]
    seq: int


@attrs.frozen(slots=True)
class Erasure:
    """One erasure of the subject, as its receipt event recorded it."""

    request_id: str
    occurred_at: float
    principal_id: str
    counts: dict[str, int]
    started_at: float
    completed_at: float
    receipt_hash: str
    receipt_verified: bool
    """The receipt hash recomputed from the trail's fields and the user id matches:
    the receipt the caller holds is the one the trail recorded."""
    scope_hashes: tuple[str, ...]

    @property
    def nothing_left(self) -> bool:
        """The erasure found nothing to remove (a repeated request)."""
        return not any(self.counts.values())


@attrs.frozen(slots=True)
class SubjectReport:
    tenant_id: str
    subject_hash: str
    activities: tuple[SubjectActivity, ...]
    erasures: tuple[Erasure, ...]

    def by_category(self) -> dict[str, list[SubjectActivity]]:
        grouped: dict[str, list[SubjectActivity]] = {name: [] for name in CATEGORIES}
        for activity in self.activities:
            grouped[activity.category].append(activity)
        return grouped

    def summary(self) -> dict[str, int]:
        return {name: len(items) for name, items in self.by_category().items()}


def _category(event: dict[str, Any]) -> str | None:
    kind = str(event.get("type", "")).rsplit(".", 1)[-1]
    operation = event.get("operation")
    if kind == "rejected":
        return "denied" if event.get("error_code") in (None, "scope_denied",
                                                      "policy_denied") else "failed"
    if kind == "failed":
        return "failed"
    if kind == "completed":
        return "read"
    if kind == "committed":
        if operation == "delete_user":
            return "erased"
        return "deleted" if operation in _DELETING else "written"
    return None  # requested, cache and receipt events are not activities of their own


def subject_report(paths: Sequence[Source], tenant_id: str, user_id: str) -> SubjectReport:
    subject = subject_hash(tenant_id, user_id)
    activities: list[SubjectActivity] = []
    receipts: dict[str, tuple[float, dict[str, Any], dict[str, Any]]] = {}
    for entry in query(paths, EventFilter(tenant=tenant_id, subject_hash=subject)):
        event = entry.event
        erasure = event.get("erasure")
        if isinstance(erasure, dict) and isinstance(erasure.get("request_id"), str):
            # The dedicated receipt event (final counts) wins over the committed one.
            request_id = erasure["request_id"]
            if (request_id not in receipts
                    or event.get("type") == RECEIPT_EVENT):
                receipts[request_id] = (entry.occurred_at, event, erasure)
        category = _category(event)
        if category is None:
            continue
        activities.append(SubjectActivity(
            category, entry.occurred_at, str(event.get("operation", "")),
            event.get("outcome"), str(event.get("operation_id", "")),
            str(event.get("principal_id", "")), tuple(event.get("record_ids") or ()),
            event.get("count"), tuple(event.get("reasons") or ()), entry.seq))
    erasures = tuple(_erasure(tenant_id, user_id, *item) for item in receipts.values())
    return SubjectReport(tenant_id, subject, tuple(activities),
                         tuple(sorted(erasures, key=lambda e: e.occurred_at)))


def _erasure(tenant_id: str, user_id: str, occurred_at: float, event: dict[str, Any],
             evidence: dict[str, Any]) -> Erasure:
    counts = {str(k): int(v) for k, v in (evidence.get("counts") or {}).items()}
    scope_hashes = tuple(event.get("scope_hashes") or ())
    started = float(evidence.get("started_at", 0.0))
    completed = float(evidence.get("completed_at", 0.0))
    receipt_hash = str(evidence.get("receipt_hash", ""))
    recomputed = ErasureReceipt(str(evidence["request_id"]), tenant_id, user_id, counts,
                                scope_hashes, started, completed).sealed().receipt_hash
    return Erasure(str(evidence["request_id"]), occurred_at, str(event.get("principal_id", "")),
                   counts, started, completed, receipt_hash, recomputed == receipt_hash,
                   scope_hashes)
