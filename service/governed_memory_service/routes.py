"""The REST routes: one handler per governed operation, each a thin translation.

A handler authenticates, reads the scope from the path and query, structures the body,
calls the manager with the principal and turns the result into JSON. Governance stays
in the manager: a scope of another tenant or user is refused by the library's scope
rule, and the answer is the manager's own error, so the service can never say more
about what exists than the manager does.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from governed_memory import GovernedMemoryManager, MemoryConflictError, Principal, Scope
from governed_memory.converter import unstructure
from governed_memory.errors import GovernedMemoryError
from governed_memory.tiers import MemoryTiers
from governed_memory.turncontext import MemoryContextBuilder
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from governed_memory_service.audit_routes import AUDIT_ENDPOINTS, AuditRoutes
from governed_memory_service.authentication import Authenticator
from governed_memory_service.block_routes import BLOCK_ENDPOINTS, BlockRoutes
from governed_memory_service.bodies import (
    AddBody,
    MultiSearchBody,
    PutBody,
    SearchBody,
    UpdateBody,
    parse_body,
)
from governed_memory_service.endpoint import Endpoint
from governed_memory_service.errors import AuthenticationError, PreconditionFailedError
from governed_memory_service.http_input import (
    SCOPE_PARAMS,
    boolean,
    etag,
    expected_revision,
    idempotency_key,
    integer,
    query_values,
    read_json,
    scope_of,
    scopes_of,
    single,
)
from governed_memory_service.problems import PROBLEM_JSON, problem_for
from governed_memory_service.readiness import RETRY_AFTER_S
from governed_memory_service.remember_routes import REMEMBER_ENDPOINTS, RememberRoutes
from governed_memory_service.tier_routes import TIER_ENDPOINTS, TierRoutes

__all__ = ["ENDPOINTS", "LONG_TERM_ENDPOINTS", "Endpoint", "MemoryRoutes", "problem_response"]

log = logging.getLogger(__name__)

T = TypeVar("T")

MEMORIES = "/v1/tenants/{tenant}/memories"
RECORD = MEMORIES + "/{record_id}"
REVIEW = "/v1/tenants/{tenant}/review"
USER = "/v1/tenants/{tenant}/users/{user_id}"
SNAPSHOT = "/v1/snapshots/{snapshot_id}"
PAGING = ("limit", "cursor")


LONG_TERM_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(path=MEMORIES, method="POST", operation_id="add", body=AddBody, status=201,
             summary="Add a memory to the scope", headers_in=("Idempotency-Key",), etag=True),
    Endpoint(path=MEMORIES, method="GET", operation_id="list",
             query=(*SCOPE_PARAMS, "limit", "cursor", "memory_type"),
             summary="List the scope's memories, a cursor page at a time"),
    Endpoint(path=MEMORIES + "/search", method="POST", operation_id="search",
             body=SearchBody, summary="Search the scope's memories"),
    Endpoint(path=RECORD, method="GET", operation_id="get", etag=True,
             summary="Get one memory; its ETag is the record revision"),
    Endpoint(path=RECORD, method="PATCH", operation_id="update", body=UpdateBody,
             headers_in=("If-Match", "Idempotency-Key"), etag=True,
             summary="Update a memory (compare-and-set with If-Match)"),
    Endpoint(path=MEMORIES + "/by-key/{key}", method="PUT", operation_id="put", body=PutBody,
             headers_in=("If-Match",), etag=True,
             summary="Write a memory under its key: added when new, else a new version "
                     "(compare-and-set with If-Match)"),
    Endpoint(path=RECORD, method="DELETE", operation_id="delete",
             query=(*SCOPE_PARAMS, "hard"), headers_in=("If-Match", "Idempotency-Key"),
             summary="Delete a memory (soft: a tombstone version; hard=true: erase it)"),
    Endpoint(path=RECORD + "/history", method="GET", operation_id="history",
             summary="Every version of a memory, oldest first"),
    Endpoint(path=MEMORIES + "/multi-search", method="POST", operation_id="multi_search",
             query=(), body=MultiSearchBody,
             summary="Search several exact scopes of the tenant in one request"),
    Endpoint(path=MEMORIES, method="DELETE", operation_id="delete_all",
             summary="Erase every memory of exactly this scope (memory:admin)"),
    Endpoint(path=MEMORIES + "/purge-expired", method="POST", operation_id="purge_expired",
             query=(*SCOPE_PARAMS, *PAGING),
             summary="Erase the scope's expired memories, a bounded sweep per call; "
                     "continue with next_cursor"),
    Endpoint(path=USER, method="DELETE", operation_id="delete_user", query=(),
             summary="Erase a data subject across the tenant; returns the erasure receipt"),
    Endpoint(path=REVIEW, method="GET", operation_id="list_pending",
             query=(*SCOPE_PARAMS, *PAGING),
             summary="The scope's review queue (memory:review), oldest first"),
    Endpoint(path=REVIEW + "/{record_id}/approve", method="POST", operation_id="approve",
             headers_in=("If-Match", "Idempotency-Key"), etag=True,
             summary="Approve a memory held for review: it becomes active"),
    Endpoint(path=REVIEW + "/{record_id}/reject", method="POST", operation_id="reject",
             headers_in=("If-Match", "Idempotency-Key"),
             summary="Reject a memory held for review: it is erased with its history"),
    Endpoint(path=SNAPSHOT + "/replay", method="GET", operation_id="replay", query=(),
             summary="Replay a past search by its snapshot_id (the credential's tenant)"),
)

ENDPOINTS: tuple[Endpoint, ...] = (LONG_TERM_ENDPOINTS + REMEMBER_ENDPOINTS + TIER_ENDPOINTS
                                   + BLOCK_ENDPOINTS + AUDIT_ENDPOINTS)
"""Every route the app mounts, long-term memories first, then the tiers, then the
auditor's (``audit_routes``)."""

_QUERY: dict[str, tuple[str, ...]] = {e.operation_id: e.query for e in ENDPOINTS}
"""The query parameters each operation takes, looked up once per request."""


def problem_response(error: GovernedMemoryError) -> Response:
    problem = problem_for(error)
    headers: dict[str, str] = {}
    if isinstance(error, AuthenticationError):
        challenge = 'Bearer realm="governed-memory"'
        if error.credentials_given:
            challenge += ', error="invalid_token"'
        headers["WWW-Authenticate"] = challenge
    if problem["status"] == 503:
        # Storage, the audit trail or the key store is down for now: say when to retry.
        headers["Retry-After"] = str(RETRY_AFTER_S)
    return JSONResponse(problem, status_code=problem["status"], headers=headers,
                        media_type=PROBLEM_JSON)


Handler = Callable[[Request, Principal], Awaitable[Response]]


class MemoryRoutes(TierRoutes, BlockRoutes, AuditRoutes, RememberRoutes):
    """The handlers, bound to one manager (and the tiers and context builder over it),
    authenticator and body limit."""

    def __init__(self, manager: GovernedMemoryManager, authenticator: Authenticator,
                 max_body_bytes: int, *, tiers: MemoryTiers,
                 builder: MemoryContextBuilder) -> None:
        self.manager = manager
        self.authenticator = authenticator
        self.max_body_bytes = max_body_bytes
        self.tiers = tiers
        self.builder = builder

    def handler(self, endpoint: Endpoint) -> Callable[[Request], Awaitable[Response]]:
        """The ASGI endpoint for ``endpoint``: authentication first (so an
        unauthenticated caller learns nothing from body or scope checks), then the
        handler, with every library error rendered as a problem."""
        inner: Handler = getattr(self, endpoint.operation_id)

        async def endpoint_fn(request: Request) -> Response:
            try:
                principal = await self.authenticator.authenticate(
                    request.headers.get("authorization"))
                return await inner(request, principal)
            except GovernedMemoryError as error:
                return problem_response(error)
            except Exception as exc:
                # The type only: an exception's message might quote a request.
                log.error("%s failed unexpectedly: %s", endpoint.operation_id,
                          type(exc).__name__)
                problem = {"type": "about:blank", "title": "Internal error", "status": 500,
                           "detail": "the service failed; nothing more is said",
                           "code": "internal"}
                return JSONResponse(problem, status_code=500, media_type=PROBLEM_JSON)

        endpoint_fn.__name__ = endpoint.operation_id
        return endpoint_fn

    def _query(self, request: Request, operation_id: str) -> dict[str, list[str]]:
        return query_values(request, _QUERY[operation_id])

    async def _body(self, request: Request, kind: type[Any]) -> Any:
        return parse_body(await read_json(request, self.max_body_bytes), kind)

    # -- operations ---------------------------------------------------------------------

    async def add(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, self._query(request, "add"), principal)
        body: AddBody = await self._body(request, AddBody)
        record = await self.manager.add(
            principal, scope, body.content, memory_type=body.memory_type, key=body.key,
            metadata=body.metadata, provenance=body.provenance, visibility=body.visibility,
            importance=body.importance, entity_ids=body.entity_ids,
            valid_from=body.valid_from, invalid_at=body.invalid_at,
            supersedes=body.supersedes, expires_at=body.expires_at,
            occurred_at=body.occurred_at, idempotency_key=idempotency_key(request))
        location = str(request.url_for("get", tenant=scope.tenant_id, record_id=record.id))
        return JSONResponse(unstructure(record), status_code=201,
                            headers={**etag(record.revision), "Location": location})

    async def list(self, request: Request, principal: Principal) -> Response:
        values = self._query(request, "list")
        limit = integer(values, "limit")
        page = await self.manager.list(
            principal, scope_of(request, values, principal), limit=20 if limit is None else limit,
            cursor=single(values, "cursor"), memory_types=values.get("memory_type"))
        return JSONResponse(unstructure(page))

    async def search(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, self._query(request, "search"), principal)
        body: SearchBody = await self._body(request, SearchBody)
        return await self._search(principal, scope, body)

    async def get(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, self._query(request, "get"), principal)
        record = await self.manager.get(principal, scope, request.path_params["record_id"])
        return JSONResponse(unstructure(record), headers=etag(record.revision))

    async def update(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, self._query(request, "update"), principal)
        record_id = request.path_params["record_id"]
        expected = expected_revision(request)
        body: UpdateBody = await self._body(request, UpdateBody)
        record = await self._compare_and_set(principal, scope, record_id, expected,
                                             lambda: self.manager.update(
            principal, scope, record_id, expected_revision=expected,
            content=body.content, memory_type=body.memory_type, metadata=body.metadata,
            importance=body.importance, visibility=body.visibility,
            entity_ids=body.entity_ids, expires_at=body.expires_at,
            clear_expires_at=body.clear_expires_at, invalid_at=body.invalid_at,
            idempotency_key=idempotency_key(request), superseded_by=body.superseded_by,
            occurred_at=body.occurred_at))
        return JSONResponse(unstructure(record), headers=etag(record.revision))

    async def put(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, self._query(request, "put"), principal)
        expected = expected_revision(request)
        body: PutBody = await self._body(request, PutBody)
        try:
            record = await self.manager.put(
                principal, scope, request.path_params["key"], body.content,
                expected_revision=expected, memory_type=body.memory_type,
                metadata=body.metadata, importance=body.importance,
                visibility=body.visibility, entity_ids=body.entity_ids,
                expires_at=body.expires_at)
        except MemoryConflictError:
            if expected is None:
                raise
            # A put given a revision conflicts only when the key's holder is not at it.
            raise PreconditionFailedError("the key's record is not at the revision If-Match "
                                          "names; re-read it and retry") from None
        return JSONResponse(unstructure(record), headers=etag(record.revision))

    async def delete(self, request: Request, principal: Principal) -> Response:
        values = self._query(request, "delete")
        scope = scope_of(request, values, principal)
        record_id = request.path_params["record_id"]
        expected = expected_revision(request)
        result = await self._compare_and_set(principal, scope, record_id, expected,
                                             lambda: self.manager.delete(
            principal, scope, record_id, expected_revision=expected,
            hard=boolean(values, "hard"), idempotency_key=idempotency_key(request)))
        return JSONResponse(unstructure(result), headers=etag(result.revision))

    async def history(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, self._query(request, "history"), principal)
        versions = await self.manager.history(principal, scope,
                                              request.path_params["record_id"])
        return JSONResponse({"versions": unstructure(versions)})

    async def multi_search(self, request: Request, principal: Principal) -> Response:
        self._query(request, "multi_search")  # takes no query: refuse any
        body: MultiSearchBody = await self._body(request, MultiSearchBody)
        return await self._search(principal, scopes_of(request, body.scopes, principal), body)

    async def delete_all(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, self._query(request, "delete_all"), principal)
        deleted = await self.manager.delete_all(principal, scope)
        return JSONResponse({"deleted": deleted})

    async def purge_expired(self, request: Request, principal: Principal) -> Response:
        values = self._query(request, "purge_expired")
        limit = integer(values, "limit")
        page = await self.manager.purge_expired(
            principal, scope_of(request, values, principal), limit=100 if limit is None else limit,
            after=single(values, "cursor"))
        return JSONResponse(unstructure(page))

    async def delete_user(self, request: Request, principal: Principal) -> Response:
        self._query(request, "delete_user")
        # Every tier the server keeps (turns, memory blocks), then the memories, each a
        # governed erasure; the answer is the memories' receipt.
        erasure = await self.tiers.delete_user(principal, request.path_params["tenant"],
                                               request.path_params["user_id"])
        assert erasure.memories is not None  # the tiers' long-term tier is the manager
        return JSONResponse(unstructure(erasure.memories))

    async def list_pending(self, request: Request, principal: Principal) -> Response:
        values = self._query(request, "list_pending")
        limit = integer(values, "limit")
        page = await self.manager.list_pending(
            principal, scope_of(request, values, principal), limit=20 if limit is None else limit,
            cursor=single(values, "cursor"))
        return JSONResponse(unstructure(page))

    async def approve(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, self._query(request, "approve"), principal)
        record_id = request.path_params["record_id"]
        expected = expected_revision(request)
        record = await self._compare_and_set(principal, scope, record_id, expected,
                                             lambda: self.manager.approve(
            principal, scope, record_id, expected_revision=expected,
            idempotency_key=idempotency_key(request)))
        return JSONResponse(unstructure(record), headers=etag(record.revision))

    async def reject(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, self._query(request, "reject"), principal)
        record_id = request.path_params["record_id"]
        expected = expected_revision(request)
        result = await self._compare_and_set(principal, scope, record_id, expected,
                                             lambda: self.manager.reject(
            principal, scope, record_id, expected_revision=expected,
            idempotency_key=idempotency_key(request)))
        return JSONResponse(unstructure(result))

    async def replay(self, request: Request, principal: Principal) -> Response:
        self._query(request, "replay")
        result = await self.manager.replay(principal, request.path_params["snapshot_id"])
        return JSONResponse(unstructure(result))

    async def _search(self, principal: Principal, scopes: Scope | tuple[Scope, ...],
                      body: SearchBody) -> Response:
        result = await self.manager.search(
            principal, scopes, body.query, limit=body.limit, memory_types=body.memory_types,
            metadata_filter=body.metadata_filter, entity_ids=body.entity_ids,
            ranking=body.ranking, occurred_since=body.occurred_since,
            occurred_before=body.occurred_before, as_of=body.as_of,
            visibility=body.visibility, source_types=body.source_types,
            sensitivity=body.sensitivity, exclude_sensitivity=body.exclude_sensitivity,
            cursor=body.cursor)
        return JSONResponse(unstructure(result))

    async def _compare_and_set(self, principal: Principal, scope: Scope, record_id: str,
                               expected: str | None, write: Callable[[], Awaitable[T]]) -> T:
        """Run a write addressed to one record, its conflict answered as 412 when it is
        the ``If-Match`` revision that is stale (see :meth:`_precondition`)."""
        try:
            return await write()
        except MemoryConflictError as conflict:
            raise await self._precondition(principal, scope, record_id, conflict,
                                          expected) from None

    async def _precondition(self, principal: Principal, scope: Scope, record_id: str,
                            conflict: MemoryConflictError,
                            expected: str | None) -> GovernedMemoryError:
        """412 when the conflict is the ``If-Match`` revision being stale.

        The library's conflict also covers a reused idempotency key, so the record is
        re-read (a governed read by the same principal, so it reveals nothing the
        caller could not read anyway): if its revision is not the one named, the
        precondition failed; otherwise the conflict was something else and stays 409.
        A record held for review is invisible to reads, so a conflicting review
        decision with ``If-Match`` whose record cannot be read is a 412 too: the
        revision named is not one the caller can see now.
        """
        if expected is None:
            return conflict
        try:
            current = await self.manager.lookup(principal, scope, record_id)
        except GovernedMemoryError:
            return conflict
        if current is None or current.revision != expected:
            return PreconditionFailedError("the record's revision is not the one If-Match "
                                           "names; re-read it and retry")
        return conflict
