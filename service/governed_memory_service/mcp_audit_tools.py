"""The MCP server's audit tools: an auditor's reads of the trail, as the REST audit routes
answer them.

Each tool is one method of :class:`~governed_memory.audit_requests.GovernedAudit` over
the trail the manager's sinks write (its ``postgres-trail`` store, else its ``[audit]
path`` files), as the principal of the call, which the transport supplies. So each read
is governed like a memory operation (decision, span, ``memory.audit.*`` events) and
refused like the REST route: without ``audit:read`` (which no memory permission
implies, ``memory:admin`` included) or to a principal bound to a user, as
``scope_denied``. The tenant is always the principal's; no tool takes one. The tools
and their arguments are the remote clients' (``audit_query``, ``audit_summary``,
``audit_report``, ``audit_verify``, ``audit_prove``, ``audit_consistency``), their
arguments the REST routes' query and body fields by the same names.

An answer is what the REST route returns (``unstructure`` of the library's answer), as
structured content and as its JSON text: events, hashes, counts and proofs, which hold
no stored content, so nothing needs quoting. Checkpoints and proofs are their canonical
JSON text, a string, not one byte re-encoded. The server lists these tools only when
the manager keeps a trail to read (as it lists the tier tools of the tiers it has);
without one, REST answers ``501`` and an agent is better off not shown them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from governed_memory import GovernedMemoryManager, Principal
from governed_memory.audit.times import ACCEPTED
from governed_memory.audit_requests import (
    DEFAULT_EVENTS,
    MAX_EVENTS,
    AuditFilter,
    GovernedAudit,
    TrailReader,
)
from governed_memory.converter import unstructure
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from governed_memory_service.mcp_toolkit import READ_ONLY, PrincipalSource, ToolGroup, ToolSpec

__all__ = ["AUDIT_DESCRIPTIONS", "AuditTools", "audit_result"]

OfPrincipal = Annotated[str | None, Field(
    description="Only the events of this principal id, exactly (whose events to read: you "
                "always act as your own credentials).")]
Subject = Annotated[str | None, Field(
    description="Only the events about this data subject: a user id of your tenant "
                "(matched by its subject hash).")]
ScopeHash = Annotated[str | None, Field(
    description="Only the events naming this scope hash (`sh1:` and 64 hex digits).")]
OperationName = Annotated[str | None, Field(
    description="Only this operation (add, search, delete_user, audit_query, ...) or event "
                "type (memory.write.committed, ...).")]
Outcome = Annotated[str | None, Field(
    description="Only this outcome: committed, completed, deny, rejected, ...")]
Since = Annotated[str | None, Field(
    description=f"Only events from this time on: {ACCEPTED}; a leading minus also means "
                "ago (-24h, -1h30m). Times ago count back from the server's clock.")]
Until = Annotated[str | None, Field(
    description="Only events before this time, in the forms `since` takes.")]
NoVerify = Annotated[bool, Field(
    description="true: read without verifying the chain first (by default a trail that "
                "does not verify is refused with code `audit_trail`).")]
Checkpoint = Annotated[str, Field(
    description="A Merkle checkpoint: its canonical JSON text, exactly as `audit_verify` "
                "returned it (a string, not an object).")]


def audit_result(answer: object) -> CallToolResult:
    """The library's answer as the REST route sends it (``unstructure``), structured and
    as its JSON text."""
    body: dict[str, Any] = unstructure(answer)
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body))],
                          structured_content=body)


class AuditTools(ToolGroup):
    """The audit tools over the trail ``manager``'s sinks write."""

    def __init__(self, manager: GovernedMemoryManager, principal_of: PrincipalSource) -> None:
        super().__init__(principal_of)
        trail = TrailReader.of_sinks(manager.activity.events.sinks)
        self._keeps_trail = trail.configured
        self._audit = GovernedAudit.of(manager.activity, trail)

    def tools(self) -> Mapping[str, ToolSpec]:
        """Every audit tool when the manager keeps a trail; none when it keeps none."""
        return AUDIT_DESCRIPTIONS if self._keeps_trail else {}

    async def audit_query(
        self, ctx: Context[Any, Any], principal: OfPrincipal = None, subject: Subject = None,
        scope_hash: ScopeHash = None, operation: OperationName = None,
        outcome: Outcome = None, since: Since = None, until: Until = None,
        limit: Annotated[int, Field(ge=1, le=MAX_EVENTS, description="Events per page.")
                         ] = DEFAULT_EVENTS,
        cursor: Annotated[int | None, Field(
            ge=0, description="The previous page's `next_cursor`, to continue.")] = None,
        no_verify: NoVerify = False,
    ) -> CallToolResult:
        async def run(auditor: Principal) -> CallToolResult:
            where = _where(principal, subject, scope_hash, operation, outcome, since, until)
            return audit_result(await self._audit.query(
                auditor, auditor.tenant_id, where=where, limit=limit, cursor=cursor,
                verify=not no_verify))

        return await self._governed("audit_query", ctx, run)

    async def audit_summary(
        self, ctx: Context[Any, Any], principal: OfPrincipal = None, subject: Subject = None,
        scope_hash: ScopeHash = None, operation: OperationName = None,
        outcome: Outcome = None, since: Since = None, until: Until = None,
        limit: Annotated[int | None, Field(
            ge=1, le=MAX_EVENTS, description="At most this many principals, the most "
                                             "operations first (the totals count "
                                             "all).")] = None,
        no_verify: NoVerify = False,
    ) -> CallToolResult:
        async def run(auditor: Principal) -> CallToolResult:
            where = _where(principal, subject, scope_hash, operation, outcome, since, until)
            return audit_result(await self._audit.summary(
                auditor, auditor.tenant_id, where=where, limit=limit, verify=not no_verify))

        return await self._governed("audit_summary", ctx, run)

    async def audit_report(
        self, ctx: Context[Any, Any],
        subject: Annotated[str, Field(description="The data subject: a user id of your "
                                                  "tenant.")],
        no_verify: NoVerify = False,
    ) -> CallToolResult:
        async def run(auditor: Principal) -> CallToolResult:
            return audit_result(await self._audit.report(
                auditor, auditor.tenant_id, subject, verify=not no_verify))

        return await self._governed("audit_report", ctx, run)

    async def audit_verify(self, ctx: Context[Any, Any]) -> CallToolResult:
        async def run(auditor: Principal) -> CallToolResult:
            return audit_result(await self._audit.verify(auditor, auditor.tenant_id))

        return await self._governed("audit_verify", ctx, run)

    async def audit_prove(
        self, ctx: Context[Any, Any],
        event_id: Annotated[str, Field(description="The event's `event_id`, as "
                                                   "`audit_query` showed it.")],
        checkpoint: Checkpoint,
    ) -> CallToolResult:
        async def run(auditor: Principal) -> CallToolResult:
            return audit_result(await self._audit.prove(auditor, auditor.tenant_id,
                                                        event_id, checkpoint))

        return await self._governed("audit_prove", ctx, run)

    async def audit_consistency(
        self, ctx: Context[Any, Any],
        first: Annotated[str, Field(description="The older checkpoint's canonical JSON "
                                                "text, as `audit_verify` returned it.")],
        second: Annotated[str, Field(description="The newer checkpoint's canonical JSON "
                                                 "text.")],
    ) -> CallToolResult:
        async def run(auditor: Principal) -> CallToolResult:
            return audit_result(await self._audit.consistency(auditor, auditor.tenant_id,
                                                              first, second))

        return await self._governed("audit_consistency", ctx, run)


def _where(principal: str | None, subject: str | None, scope_hash: str | None,
           operation: str | None, outcome: str | None, since: str | None,
           until: str | None) -> AuditFilter:
    """The filter the arguments name (validated by the governed read, as over REST)."""
    return AuditFilter(principal_id=principal, user_id=subject, scope_hash=scope_hash,
                       operation=operation, outcome=outcome, since=since, until=until)


_FOR_AUDITORS = ("For an auditor (permission audit:read, bound to no user): reading the "
                 "trail is itself recorded in it. ")

AUDIT_DESCRIPTIONS: dict[str, ToolSpec] = {
    "audit_query": ("Query the audit trail", (
        f"{_FOR_AUDITORS}Your tenant's audit events matching every filter given, in chain "
        "order, one page at a time (pass `next_cursor` as `cursor` to continue): "
        "`{events: [{seq, event}], next_cursor}`. Events hold ids, hashes, counts and "
        "outcomes, never memory content. The chain is verified first."), READ_ONLY),
    "audit_summary": ("Summarise the audit trail by principal", (
        f"{_FOR_AUDITORS}The events `audit_query` would return, summed up per principal "
        "(operations allowed, denied, rejected and failed, by operation), the most "
        "operations first, with the totals: "
        "`{principals, operations, events}`."), READ_ONLY),
    "audit_report": ("Report on a data subject", (
        f"{_FOR_AUDITORS}What the trail records about one data subject of your tenant: "
        "each activity and the count per category (written, read, deleted, erased, "
        "denied, failed): `{report, summary}`. This read is listed in the subject's next "
        "report."), READ_ONLY),
    "audit_verify": ("Verify the audit trail", (
        f"{_FOR_AUDITORS}Verify every entry and link of the whole trail and say where it "
        "first breaks, if it does: `{verification, ok, status, waiting, checkpoint}`. A "
        "trail that verifies comes with an unsigned Merkle checkpoint (canonical JSON "
        "text) to prove events and later checkpoints against: keep it."), READ_ONLY),
    "audit_prove": ("Prove an event is in the trail", (
        f"{_FOR_AUDITORS}An inclusion proof of one of your tenant's events against a "
        "checkpoint from `audit_verify`: `{proof, event}` (the proof as canonical JSON "
        "text). An event of another tenant is answered as one that is not there "
        "(`not_found`)."), READ_ONLY),
    "audit_consistency": ("Prove the trail only grew", (
        f"{_FOR_AUDITORS}A proof that a later checkpoint's tree extends an earlier one's "
        "(nothing recorded between them was changed or dropped): give both checkpoints' "
        "JSON text, the older first; returns `{proof}`."), READ_ONLY),
}
