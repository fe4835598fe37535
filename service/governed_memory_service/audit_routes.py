"""The routes of an auditor: the trail's events, a subject report, verification, proofs.

They go through ``governed_memory.audit_requests.GovernedAudit`` over the trail the
app's manager writes (its ``postgres-trail`` store, else its ``[audit] path`` files),
so each read is governed like a memory operation (decision, span, ``memory.audit.*``
events) and answers what ``governed-memory audit`` answers, with its code. Every route
takes the permission ``audit:read``, which no memory permission implies (not even
``memory:admin``); the path's tenant must be the credential's, only that tenant's
events come back, and a credential bound to a user is refused. A deployment whose
profile keeps no hash-chained trail answers ``501`` (``capability_unsupported``).

Checkpoints and proofs travel as their canonical JSON text (a JSON string), exactly
as ``audit checkpoint`` prints them, so not one byte of them is re-encoded on the way.
"""

from __future__ import annotations

import attrs
from governed_memory import GovernedMemoryManager, Principal
from governed_memory.audit_requests import DEFAULT_EVENTS, AuditFilter, GovernedAudit
from governed_memory.converter import unstructure
from governed_memory.errors import MemoryValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from governed_memory_service.bodies import parse_body
from governed_memory_service.endpoint import Endpoint
from governed_memory_service.http_input import boolean, integer, query_values, read_json, single

__all__ = ["AUDIT_ENDPOINTS", "AUDIT_OPERATION_DESCRIPTIONS", "AUDIT_QUERY_DESCRIPTIONS",
           "AuditRoutes", "ConsistencyBody", "InclusionBody"]

AUDIT = "/v1/tenants/{tenant}/audit"
FILTERS = ("principal", "subject", "scope_hash", "operation", "outcome", "since", "until")


@attrs.frozen(kw_only=True)
class InclusionBody:
    """``POST .../audit/proofs/inclusion``: the event to prove and the Merkle checkpoint
    (its canonical JSON text) to prove it against."""

    event_id: str
    checkpoint: str


@attrs.frozen(kw_only=True)
class ConsistencyBody:
    """``POST .../audit/proofs/consistency``: two Merkle checkpoints of the trail (each
    its canonical JSON text), the older first."""

    first: str
    second: str


AUDIT_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(path=AUDIT + "/events", method="GET", operation_id="audit_query",
             query=(*FILTERS, "summary", "limit", "cursor", "no_verify"),
             summary="The tenant's trail events matching every filter given, in chain "
                     "order (audit:read; `audit query`); summary=principal sums them up "
                     "per principal"),
    Endpoint(path=AUDIT + "/report", method="GET", operation_id="audit_report",
             query=("subject", "no_verify"),
             summary="What the trail records about one data subject of the tenant: "
                     "written, read, deleted, erased, denied, failed (audit:read; "
                     "`audit report`)"),
    Endpoint(path=AUDIT + "/verify", method="GET", operation_id="audit_verify", query=(),
             summary="Verify the whole trail; with a Merkle checkpoint of it when it "
                     "verifies (audit:read; `audit verify`, `audit checkpoint`)"),
    Endpoint(path=AUDIT + "/proofs/inclusion", method="POST", operation_id="audit_prove",
             query=(), body=InclusionBody,
             summary="An inclusion proof of one of the tenant's events against a "
                     "checkpoint (audit:read; `audit prove`)"),
    Endpoint(path=AUDIT + "/proofs/consistency", method="POST",
             operation_id="audit_consistency", query=(), body=ConsistencyBody,
             summary="A proof that a later checkpoint's tree extends an earlier one's "
                     "(audit:read; `audit consistency`)"),
)

AUDIT_QUERY_DESCRIPTIONS: dict[str, tuple[str, str]] = {
    "principal": ("string", "only the events of this principal id, exactly"),
    "subject": ("string", "the data subject: a user id of the path's tenant (matched by "
                          "its subject hash)"),
    "scope_hash": ("string", "only the events naming this sh1:… scope hash"),
    "operation": ("string", "an operation (add, search, delete_user, …) or an event type"),
    "outcome": ("string", "committed, completed, deny, rejected, …"),
    "since": ("string", "from this time on: epoch seconds, ISO 8601 (UTC without an "
                        "offset), or a time ago (90s, 30m, 24h, 2d, 1w, '2 days ago')"),
    "until": ("string", "before this time, in the forms since takes"),
    "summary": ("string", "principal: one row per principal instead of the events"),
    "no_verify": ("boolean", "true: read without verifying the chain first"),
}
"""What the OpenAPI document says of the audit routes' query parameters."""

AUDIT_OPERATION_DESCRIPTIONS: dict[tuple[str, str], tuple[str, str]] = {
    ("audit_query", "limit"): ("integer", "events per page (1 to 1000, default 100)"),
    ("audit_query", "cursor"): ("integer", "the previous page's next_cursor (an entry "
                                           "sequence number)"),
    ("audit_report", "subject"): ("string", "required: the data subject, a user id of "
                                            "the path's tenant"),
}
"""Where an audit route's parameter means something else than the same name elsewhere."""

_QUERY = {e.operation_id: e.query for e in AUDIT_ENDPOINTS}


class AuditRoutes:
    """The audit handlers; mixed into the route class that binds the principal."""

    manager: GovernedMemoryManager
    max_body_bytes: int
    _governed_audit: GovernedAudit | None = None

    def _audit(self) -> GovernedAudit:
        """The audit reads over the manager's own trail, built on first use."""
        if self._governed_audit is None:
            self._governed_audit = GovernedAudit.of(self.manager.activity)
        return self._governed_audit

    async def audit_query(self, request: Request, principal: Principal) -> Response:
        values = query_values(request, _QUERY["audit_query"])
        tenant = request.path_params["tenant"]
        where = AuditFilter(
            principal_id=single(values, "principal"), user_id=single(values, "subject"),
            scope_hash=single(values, "scope_hash"), operation=single(values, "operation"),
            outcome=single(values, "outcome"), since=single(values, "since"),
            until=single(values, "until"))
        verify = not boolean(values, "no_verify")
        limit = integer(values, "limit")
        cursor = integer(values, "cursor")
        summary = single(values, "summary")
        if summary is None:
            events = await self._audit().query(
                principal, tenant, where=where,
                limit=DEFAULT_EVENTS if limit is None else limit, cursor=cursor,
                verify=verify)
            return JSONResponse(unstructure(events))
        if summary != "principal":
            raise MemoryValidationError("summary must be principal", field="query.summary")
        if cursor is not None:
            raise MemoryValidationError("a summary is one page: cursor pages events",
                                        field="query.cursor")
        rows = await self._audit().summary(principal, tenant, where=where, limit=limit,
                                           verify=verify)
        return JSONResponse(unstructure(rows))

    async def audit_report(self, request: Request, principal: Principal) -> Response:
        values = query_values(request, _QUERY["audit_report"])
        subject = single(values, "subject")
        if subject is None:
            raise MemoryValidationError("subject (the data subject's user id) is required",
                                        field="query.subject")
        found = await self._audit().report(principal, request.path_params["tenant"],
                                           subject, verify=not boolean(values, "no_verify"))
        return JSONResponse(unstructure(found))

    async def audit_verify(self, request: Request, principal: Principal) -> Response:
        query_values(request, _QUERY["audit_verify"])  # takes no query: refuse any
        checked = await self._audit().verify(principal, request.path_params["tenant"])
        return JSONResponse(unstructure(checked))

    async def audit_prove(self, request: Request, principal: Principal) -> Response:
        query_values(request, _QUERY["audit_prove"])
        body = parse_body(await read_json(request, self.max_body_bytes), InclusionBody)
        answer = await self._audit().prove(principal, request.path_params["tenant"],
                                           body.event_id, body.checkpoint)
        return JSONResponse(unstructure(answer))

    async def audit_consistency(self, request: Request, principal: Principal) -> Response:
        query_values(request, _QUERY["audit_consistency"])
        body = parse_body(await read_json(request, self.max_body_bytes), ConsistencyBody)
        answer = await self._audit().consistency(principal, request.path_params["tenant"],
                                                 body.first, body.second)
        return JSONResponse(unstructure(answer))
