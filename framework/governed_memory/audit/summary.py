"""Who touched it: the events of an audit query, summed up per principal.

An auditor asking about a tenant, a user (a subject hash) or a scope first wants the
principals that acted on it, how often, and how many of those operations were allowed
or denied; the event list is the detail behind that. So the summary counts
*operations*, each by the event that closed it (``…committed``, ``…completed``,
``…rejected``, ``…failed``), never the ``…requested`` event before it: an operation
counts once. Other events (requested, the erasure receipt, a dropped scope violation)
are counted in ``events`` but are no operation of their own.

Events are read as the JSON the chain hashed (see :mod:`governed_memory.audit.query`), so
a field this version does not know is ignored rather than refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import attrs

from governed_memory.audit.query import TrailEntry

CLOSING: Final = frozenset({"committed", "completed", "rejected", "failed"})
"""The last part of the type of an event that closes an operation."""
_AUTHORIZATION: Final = frozenset({"scope_denied", "policy_denied"})


@attrs.frozen(slots=True)
class PrincipalActivity:
    """What one principal did among the events summed up."""

    principal_id: str
    tenant_ids: tuple[str, ...]
    """Every tenant its events named (a principal is bound to one; more would be worth
    a look)."""
    operations: int
    allowed: int
    """Committed writes and completed reads."""
    denied: int
    """Refused by scope authorization or a policy."""
    rejected: int
    """Refused otherwise: an invalid request, a stale revision, a record not found."""
    failed: int
    """Failed or cancelled (storage, a timeout, the caller gone)."""
    by_operation: dict[str, dict[str, int]]
    """Operation (``add``, ``search``, …) → outcome (``committed``, ``deny``, …) → count."""
    first_at: float
    last_at: float
    events: int
    """Every event of this principal summed up, ``requested`` ones included."""


@attrs.define
class _Tally:
    tenants: set[str] = attrs.field(factory=set)
    counts: dict[str, int] = attrs.field(factory=lambda: dict.fromkeys(
        ("operations", "allowed", "denied", "rejected", "failed"), 0))
    by_operation: dict[str, dict[str, int]] = attrs.field(factory=dict)
    first_at: float = float("inf")
    last_at: float = float("-inf")
    events: int = 0


def category(event: dict[str, Any]) -> str | None:
    """``allowed``, ``denied``, ``rejected`` or ``failed`` for an event that closes an
    operation; ``None`` for any other event."""
    kind = str(event.get("type", "")).rsplit(".", 1)[-1]
    if kind not in CLOSING:
        return None
    if kind in ("committed", "completed"):
        return "allowed"
    if kind == "failed":
        return "failed"
    if event.get("error_code") in _AUTHORIZATION or event.get("outcome") == "deny":
        return "denied"
    return "rejected"


def principal_summary(entries: Iterable[TrailEntry]) -> tuple[PrincipalActivity, ...]:
    """One :class:`PrincipalActivity` per principal in ``entries`` (already filtered,
    say by :func:`~governed_memory.audit.query.query`), the most operations first."""
    tallies: dict[str, _Tally] = {}
    for entry in entries:
        event = entry.event
        tally = tallies.setdefault(str(event.get("principal_id", "")), _Tally())
        tally.events += 1
        tally.first_at = min(tally.first_at, entry.occurred_at)
        tally.last_at = max(tally.last_at, entry.occurred_at)
        if isinstance(event.get("tenant_id"), str):
            tally.tenants.add(event["tenant_id"])
        kind = category(event)
        if kind is None:
            continue
        tally.counts["operations"] += 1
        tally.counts[kind] += 1
        outcomes = tally.by_operation.setdefault(str(event.get("operation", "")), {})
        outcome = str(event.get("outcome") or str(event.get("type", "")).rsplit(".", 1)[-1])
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    rows = [PrincipalActivity(
        principal, tuple(sorted(t.tenants)), t.counts["operations"], t.counts["allowed"],
        t.counts["denied"], t.counts["rejected"], t.counts["failed"],
        {op: dict(sorted(outcomes.items())) for op, outcomes in sorted(t.by_operation.items())},
        t.first_at, t.last_at, t.events) for principal, t in tallies.items()]
    return tuple(sorted(rows, key=lambda row: (-row.operations, row.principal_id)))
