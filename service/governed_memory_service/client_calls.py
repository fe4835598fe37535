"""Each operation of the remote clients, written once: the HTTP request its arguments
make and the value its response carries.

The async and the sync client (:mod:`governed_memory_service.client`) differ only in
how they send a request, so neither restates an operation: each of their methods is an
operation of :class:`Calls`, whose signature it keeps for type checkers (``ParamSpec``)
and for ``help()`` and ``inspect``. A keyword the in-process method takes is declared
here once, with its type and default, and reaches both clients.

A scope is sent exactly: one without ``user_id`` travels with ``shared=true``, so it
names the shared scope on the server as in process, even with a credential bound to a
user (whose requests that leave ``user_id`` out otherwise mean its own user).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import attrs
from governed_memory import (
    DeleteResult,
    ErasureReceipt,
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    Page,
    Provenance,
    Scope,
    SearchResult,
    Visibility,
)
from governed_memory.arguments import optional_member, string_tuple
from governed_memory.audit_requests import (
    DEFAULT_EVENTS,
    AuditEvents,
    AuditFilter,
    AuditSummary,
    ConsistencyAnswer,
    InclusionAnswer,
    SubjectAudit,
    TrailCheck,
)
from governed_memory.converter import unstructure
from governed_memory.errors import MemoryValidationError
from governed_memory.ranking_options import RankingOptions
from governed_memory.records import CleanupPage
from governed_memory.remembering import (
    DEFAULT_CONFIDENCE_FLOOR,
    DEFAULT_WINDOW,
    Message,
    RememberResult,
)
from governed_memory.replay import ReplayResult
from governed_memory.tiers import Block, BlockHistory, Turn, TurnDraft, WorkingState
from governed_memory.turncontext import MemoryContext

from governed_memory_service.bodies import (
    AddBody,
    ContextBody,
    MultiSearchBody,
    PutBody,
    ScopeBody,
    SearchBody,
    TurnBody,
    UpdateBody,
    WorkingStateBody,
)
from governed_memory_service.client_wire import Call, RemoteOperation, Reply, replies

__all__ = ["Call", "Calls", "RemoteOperation", "Reply"]



def _scope_params(scope: Scope) -> list[tuple[str, str]]:
    """The scope as the query string names it: exactly, so a scope without a user is
    sent as ``shared=true`` (a credential bound to a user would otherwise mean its
    user), and the remote client reaches the scopes the in-process manager would."""
    params = [(k, v) for k, v in scope.dimensions().items() if k != "tenant_id"]
    return params if scope.user_id is not None else [*params, ("shared", "true")]


def _base(scope: Scope) -> str:
    return f"/v1/tenants/{quote(scope.tenant_id, safe='')}/memories"


def _record(scope: Scope, record_id: str) -> str:
    return f"{_base(scope)}/{quote(record_id, safe='')}"


def _tenant(tenant_id: str) -> str:
    return f"/v1/tenants/{quote(tenant_id, safe='')}"


def _review(scope: Scope, record_id: str, decision: str) -> str:
    return f"{_tenant(scope.tenant_id)}/review/{quote(record_id, safe='')}/{decision}"


def _block(scope: Scope, name: str) -> str:
    return f"{_tenant(scope.tenant_id)}/blocks/{quote(name, safe='')}"


def _block_edit(scope: Scope, name: str, edit: str, expected_version: int | None,
                **fields: str) -> Call:
    body: dict[str, Any] = {"edit": edit, **fields}
    if expected_version is not None:
        body["expected_version"] = expected_version
    return Call(method="POST", path=_block(scope, name) + "/edits",
                params=tuple(_scope_params(scope)), body=body)


def _paging(limit: int, cursor: str | None) -> list[tuple[str, str]]:
    return [("limit", str(limit))] + ([] if cursor is None else [("cursor", cursor)])


def _scope_body(scope: Scope) -> ScopeBody:
    dimensions = {k: v for k, v in scope.dimensions().items() if k != "tenant_id"}
    return ScopeBody(**dimensions, shared=scope.user_id is None)


def _body(value: Any) -> dict[str, Any]:
    """Only the fields set away from their defaults, so the server's defaults apply."""
    data: dict[str, Any] = unstructure(value)
    defaults = {f.name: f.default for f in attrs.fields(type(value))}
    return {k: v for k, v in data.items()
            if k not in defaults or defaults[k] is attrs.NOTHING
            or unstructure(defaults[k]) != v}


def _write_headers(idempotency_key: str | None = None,
                   expected_revision: str | None = None) -> dict[str, str]:
    headers = {}
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    if expected_revision is not None:
        headers["If-Match"] = f'"{expected_revision}"'
    return headers


_WORKING_STATE_OR_NONE: type[WorkingState | None] = WorkingState | None  # type: ignore[assignment]
"""A union is a form the converter reads, not a class; annotated as the type it stands
for, so ``working_state`` is declared to return ``WorkingState | None``."""


class Calls:
    """Every operation of the clients: the request its arguments make and the value its
    response carries. Each takes what the in-process method of its name takes after the
    principal (``GovernedMemoryManager``; ``MemoryTiers`` for the turns and the working
    state, ``update_working_state`` being its ``update``; ``MemoryContextBuilder.build``
    for ``build_context``; ``MemoryBlocks``' ``read``, ``append``, ``replace``,
    ``rethink`` and ``history`` for ``read_blocks``, ``append_block``, ``replace_block``,
    ``rethink_block`` and ``block_history``), with the same keywords, types and
    defaults, as far as the routes go: ``get`` finds a record by id, not by key, and
    ``clear`` always erases the session's summary too."""

    @staticmethod
    @replies(MemoryRecord)
    def add(scope: Scope, content: str, *, memory_type: MemoryType | str = MemoryType.NOTE,
            key: str | None = None, metadata: Mapping[str, Any] | None = None,
            provenance: Provenance | Mapping[str, str] | None = None,
            visibility: Visibility | str = Visibility.PRIVATE, importance: float = 0.5,
            entity_ids: Iterable[str] = (), valid_from: float | None = None,
            invalid_at: float | None = None, supersedes: str | None = None,
            expires_at: float | None = None, idempotency_key: str | None = None,
            occurred_at: float | None = None) -> Call:
        if isinstance(provenance, Mapping):
            provenance = Provenance(**provenance)
        body = AddBody(content=content, memory_type=MemoryType(memory_type), key=key,
                       metadata=metadata, provenance=provenance,
                       visibility=Visibility(visibility), importance=importance,
                       entity_ids=tuple(entity_ids), valid_from=valid_from,
                       invalid_at=invalid_at, supersedes=supersedes, expires_at=expires_at,
                       occurred_at=occurred_at)
        return Call(method="POST", path=_base(scope), params=tuple(_scope_params(scope)),
                    body=_body(body), headers=_write_headers(idempotency_key))

    @staticmethod
    @replies(RememberResult)
    def remember(scope: Scope, messages: Iterable[Message | Mapping[str, Any]], *,
                 window: int = DEFAULT_WINDOW,
                 confidence_floor: float = DEFAULT_CONFIDENCE_FLOOR) -> Call:
        """``POST .../memories/from-messages``; the server checks every message."""
        listed = [{k: v for k, v in unstructure(m).items() if v is not None}
                  if isinstance(m, Message) else dict(m) for m in messages]
        body: dict[str, Any] = {"messages": listed}
        if window != DEFAULT_WINDOW:
            body["window"] = window
        if confidence_floor != DEFAULT_CONFIDENCE_FLOOR:
            body["confidence_floor"] = confidence_floor
        return Call(method="POST", path=_base(scope) + "/from-messages",
                    params=tuple(_scope_params(scope)), body=body)

    @staticmethod
    @replies(MemoryRecord)
    def get(scope: Scope, record_id: str) -> Call:
        return Call(method="GET", path=_record(scope, record_id),
                    params=tuple(_scope_params(scope)))

    @staticmethod
    @replies(Page[MemoryRecord])
    def list(scope: Scope, *, limit: int = 20, cursor: str | None = None,
             memory_types: Iterable[MemoryType | str] | None = None) -> Call:
        params = [*_scope_params(scope), ("limit", str(limit))]
        if cursor is not None:
            params.append(("cursor", cursor))
        params += [("memory_type", MemoryType(t).value) for t in memory_types or ()]
        return Call(method="GET", path=_base(scope), params=tuple(params))

    @staticmethod
    @replies(SearchResult)
    def search(scopes: Scope | Sequence[Scope], query: str, *, limit: int | None = None,
               memory_types: Iterable[MemoryType | str] | None = None,
               metadata_filter: Mapping[str, Any] | None = None,
               entity_ids: Iterable[str] = (),
               ranking: RankingOptions | None = None,
               occurred_since: float | None = None, occurred_before: float | None = None,
               as_of: float | None = None,
               visibility: Visibility | str | None = None,
               source_types: Iterable[str] = (),
               sensitivity: Iterable[str] = (),
               exclude_sensitivity: Iterable[str] = (),
               cursor: str | None = None) -> Call:
        """One scope goes to ``.../search`` (its dimensions in the query, like every
        other route); several go to ``.../multi-search`` as a list in the body."""
        types = tuple(MemoryType(t) for t in memory_types or ())
        filters: dict[str, Any] = {
            "visibility": optional_member(Visibility, visibility, "visibility"),
            "source_types": string_tuple(source_types, "source_types"),
            "sensitivity": string_tuple(sensitivity, "sensitivity"),
            "exclude_sensitivity": string_tuple(exclude_sensitivity, "exclude_sensitivity"),
            "cursor": cursor}
        if isinstance(scopes, Scope):
            body = SearchBody(query=query, limit=limit, memory_types=types,
                              metadata_filter=metadata_filter, entity_ids=tuple(entity_ids),
                              ranking=ranking, occurred_since=occurred_since,
                              occurred_before=occurred_before, as_of=as_of, **filters)
            return Call(method="POST", path=_base(scopes) + "/search",
                        params=tuple(_scope_params(scopes)), body=_body(body))
        listed = tuple(scopes)
        tenants = {scope.tenant_id for scope in listed}
        if len(tenants) != 1:
            # The URL names one tenant; scopes of several cannot be encoded, and
            # guessing one of them would send the others' names somewhere else.
            raise MemoryValidationError("a search request names the scopes of exactly one "
                                        "tenant", field="scopes")
        multi = MultiSearchBody(scopes=tuple(_scope_body(s) for s in listed), query=query,
                                limit=limit, memory_types=types,
                                metadata_filter=metadata_filter,
                                entity_ids=tuple(entity_ids), ranking=ranking,
                                occurred_since=occurred_since,
                                occurred_before=occurred_before, as_of=as_of, **filters)
        data = _body(multi)
        data["scopes"] = [_body(scope) for scope in multi.scopes]
        return Call(method="POST", path=_base(listed[0]) + "/multi-search", body=data)

    @staticmethod
    @replies(MemoryRecord)
    def update(scope: Scope, record_id: str, *, expected_revision: str | None = None,
               content: str | None = None, memory_type: MemoryType | str | None = None,
               metadata: Mapping[str, Any] | None = None, importance: float | None = None,
               visibility: Visibility | str | None = None,
               entity_ids: Iterable[str] | None = None, expires_at: float | None = None,
               clear_expires_at: bool = False, invalid_at: float | None = None,
               idempotency_key: str | None = None,
               superseded_by: str | None = None, occurred_at: float | None = None) -> Call:
        body = UpdateBody(
            content=content,
            memory_type=None if memory_type is None else MemoryType(memory_type),
            metadata=metadata, importance=importance,
            visibility=None if visibility is None else Visibility(visibility),
            entity_ids=None if entity_ids is None else tuple(entity_ids),
            expires_at=expires_at, clear_expires_at=clear_expires_at,
            invalid_at=invalid_at, superseded_by=superseded_by, occurred_at=occurred_at)
        return Call(method="PATCH", path=_record(scope, record_id),
                    params=tuple(_scope_params(scope)), body=_body(body),
                    headers=_write_headers(idempotency_key, expected_revision))

    @staticmethod
    @replies(MemoryRecord)
    def put(scope: Scope, key: str, content: str, *, expected_revision: str | None = None,
            memory_type: MemoryType | str | None = None,
            metadata: Mapping[str, Any] | None = None, importance: float | None = None,
            visibility: Visibility | str | None = None,
            entity_ids: Iterable[str] | None = None,
            expires_at: float | None = None) -> Call:
        body = PutBody(
            content=content,
            memory_type=None if memory_type is None else MemoryType(memory_type),
            metadata=metadata, importance=importance,
            visibility=None if visibility is None else Visibility(visibility),
            entity_ids=None if entity_ids is None else tuple(entity_ids),
            expires_at=expires_at)
        return Call(method="PUT", path=f"{_base(scope)}/by-key/{quote(key, safe='')}",
                    params=tuple(_scope_params(scope)), body=_body(body),
                    headers=_write_headers(None, expected_revision))

    @staticmethod
    @replies(DeleteResult)
    def delete(scope: Scope, record_id: str, *, expected_revision: str | None = None,
               hard: bool = False, idempotency_key: str | None = None) -> Call:
        params = _scope_params(scope)
        if hard:
            params.append(("hard", "true"))
        return Call(method="DELETE", path=_record(scope, record_id), params=tuple(params),
                    headers=_write_headers(idempotency_key, expected_revision))

    @staticmethod
    @replies(tuple[MemoryVersion, ...], field="versions")
    def history(scope: Scope, record_id: str) -> Call:
        return Call(method="GET", path=_record(scope, record_id) + "/history",
                    params=tuple(_scope_params(scope)))

    @staticmethod
    @replies(int, field="deleted")
    def delete_all(scope: Scope) -> Call:
        return Call(method="DELETE", path=_base(scope), params=tuple(_scope_params(scope)))

    @staticmethod
    @replies(ErasureReceipt)
    def delete_user(tenant_id: str, user_id: str) -> Call:
        return Call(method="DELETE",
                    path=f"{_tenant(tenant_id)}/users/{quote(user_id, safe='')}")

    @staticmethod
    @replies(CleanupPage)
    def purge_expired(scope: Scope, *, limit: int = 100, after: str | None = None) -> Call:
        return Call(method="POST", path=_base(scope) + "/purge-expired",
                    params=(*_scope_params(scope), *_paging(limit, after)))

    @staticmethod
    @replies(Page[MemoryRecord])
    def list_pending(scope: Scope, *, limit: int = 20, cursor: str | None = None) -> Call:
        return Call(method="GET", path=_tenant(scope.tenant_id) + "/review",
                    params=(*_scope_params(scope), *_paging(limit, cursor)))

    @staticmethod
    @replies(MemoryRecord)
    def approve(scope: Scope, record_id: str, *, expected_revision: str | None = None,
                idempotency_key: str | None = None) -> Call:
        return Call(method="POST", path=_review(scope, record_id, "approve"),
                    params=tuple(_scope_params(scope)),
                    headers=_write_headers(idempotency_key, expected_revision))

    @staticmethod
    @replies(DeleteResult)
    def reject(scope: Scope, record_id: str, *, expected_revision: str | None = None,
               idempotency_key: str | None = None) -> Call:
        return Call(method="POST", path=_review(scope, record_id, "reject"),
                    params=tuple(_scope_params(scope)),
                    headers=_write_headers(idempotency_key, expected_revision))

    @staticmethod
    @replies(ReplayResult)
    def replay(snapshot_id: str) -> Call:
        return Call(method="GET", path=f"/v1/snapshots/{quote(snapshot_id, safe='')}/replay")

    # -- the tiers and the per-turn context ---------------------------------------------

    @staticmethod
    @replies(Turn)
    def append(scope: Scope, turn: TurnDraft) -> Call:
        body = TurnBody(role=turn.role, content=turn.content, name=turn.name,
                        tool_call_id=turn.tool_call_id, tool_calls=turn.tool_calls,
                        metadata=dict(turn.metadata) or None, turn_id=turn.turn_id)
        return Call(method="POST", path=_tenant(scope.tenant_id) + "/turns",
                    params=tuple(_scope_params(scope)), body=_body(body))

    @staticmethod
    @replies(tuple[Turn, ...], field="turns")
    def recent(scope: Scope, *, limit: int | None = None) -> Call:
        params = _scope_params(scope) + ([] if limit is None else [("limit", str(limit))])
        return Call(method="GET", path=_tenant(scope.tenant_id) + "/turns",
                    params=tuple(params))

    @staticmethod
    @replies(tuple[Turn, ...], field="turns")
    def turns_after(scope: Scope, after_seq: int, *, limit: int = 50) -> Call:
        return Call(method="GET", path=_tenant(scope.tenant_id) + "/turns",
                    params=(*_scope_params(scope), ("after_seq", str(after_seq)),
                            ("limit", str(limit))))

    @staticmethod
    @replies(int, field="removed")
    def clear(scope: Scope) -> Call:
        return Call(method="DELETE", path=_tenant(scope.tenant_id) + "/turns",
                    params=tuple(_scope_params(scope)))

    @staticmethod
    @replies(_WORKING_STATE_OR_NONE, field="working_state")
    def working_state(scope: Scope) -> Call:
        return Call(method="GET", path=_tenant(scope.tenant_id) + "/working-state",
                    params=tuple(_scope_params(scope)))

    @staticmethod
    @replies(WorkingState)
    def update_working_state(scope: Scope, state: Mapping[str, Any], *,
                             ttl_seconds: float | None = None, replace: bool = False) -> Call:
        body = WorkingStateBody(state=state, ttl_seconds=ttl_seconds, replace=replace)
        data = _body(body)
        data["state"] = dict(state)  # the state is data, sent whole even when empty
        return Call(method="PATCH", path=_tenant(scope.tenant_id) + "/working-state",
                    params=tuple(_scope_params(scope)), body=data)

    @staticmethod
    @replies(bool, field="removed")
    def clear_working(scope: Scope) -> Call:
        return Call(method="DELETE", path=_tenant(scope.tenant_id) + "/working-state",
                    params=tuple(_scope_params(scope)))

    @staticmethod
    @replies(MemoryContext)
    def build_context(scope: Scope, question: str, *,
                      anchor_entity_ids: Iterable[str] = ()) -> Call:
        body = ContextBody(question=question, anchor_entity_ids=tuple(anchor_entity_ids))
        return Call(method="POST", path=_tenant(scope.tenant_id) + "/context",
                    params=tuple(_scope_params(scope)), body=_body(body))

    # -- the memory blocks ---------------------------------------------------------------
    # A block lives at the level its profile declares: the server narrows the scope
    # sent to it, as MemoryBlocks does in process.

    @staticmethod
    @replies(tuple[Block, ...], field="blocks", derived=("chars",))
    def read_blocks(scope: Scope, names: Iterable[str] | None = None) -> Call:
        """Every declared block the scope can address, or the ones ``names`` names
        (in the profile's order)."""
        params = _scope_params(scope)
        if names is not None:
            wanted = list(dict.fromkeys(names))
            if not wanted:
                # The route would read every block: refused here, as in process.
                raise MemoryValidationError("names must name at least one block",
                                            field="names")
            params += [("name", name) for name in wanted]
        return Call(method="GET", path=_tenant(scope.tenant_id) + "/blocks",
                    params=tuple(params))

    @staticmethod
    @replies(Block, derived=("chars",))
    def append_block(scope: Scope, name: str, text: str, *,
                     expected_version: int | None = None) -> Call:
        """``text`` as a new line at the end of block ``name``."""
        return _block_edit(scope, name, "append", expected_version, text=text)

    @staticmethod
    @replies(Block, derived=("chars",))
    def replace_block(scope: Scope, name: str, old: str, new: str, *,
                      expected_version: int | None = None) -> Call:
        """The one occurrence of ``old`` in block ``name`` swapped for ``new``."""
        return _block_edit(scope, name, "replace", expected_version, old=old, new=new)

    @staticmethod
    @replies(Block, derived=("chars",))
    def rethink_block(scope: Scope, name: str, value: str, *,
                      expected_version: int | None = None) -> Call:
        """Block ``name`` written anew as ``value``."""
        return _block_edit(scope, name, "rethink", expected_version, value=value)

    @staticmethod
    @replies(BlockHistory)
    def block_history(scope: Scope, name: str, *, before_version: int | None = None,
                      limit: int = 20) -> Call:
        """The stored versions of block ``name``, newest first."""
        params = [*_scope_params(scope), ("limit", str(limit))]
        if before_version is not None:
            params.append(("before_version", str(before_version)))
        return Call(method="GET", path=_block(scope, name) + "/history",
                    params=tuple(params))

    # -- the audit trail (an auditor's: audit:read) -------------------------------------
    # What governed_memory.audit_requests.GovernedAudit's methods take after the
    # principal, each one route of audit_routes.

    @staticmethod
    @replies(AuditEvents)
    def audit_query(tenant_id: str, *, where: AuditFilter | None = None,
                    limit: int = DEFAULT_EVENTS, cursor: int | None = None,
                    verify: bool = True) -> Call:
        params = [*_audit_filter(where), ("limit", str(limit))]
        if cursor is not None:
            params.append(("cursor", str(cursor)))
        return Call(method="GET", path=_tenant(tenant_id) + "/audit/events",
                    params=(*params, *_no_verify(verify)))

    @staticmethod
    @replies(AuditSummary)
    def audit_summary(tenant_id: str, *, where: AuditFilter | None = None,
                      limit: int | None = None, verify: bool = True) -> Call:
        params = [*_audit_filter(where), ("summary", "principal")]
        if limit is not None:
            params.append(("limit", str(limit)))
        return Call(method="GET", path=_tenant(tenant_id) + "/audit/events",
                    params=(*params, *_no_verify(verify)))

    @staticmethod
    @replies(SubjectAudit)
    def audit_report(tenant_id: str, user_id: str, *, verify: bool = True) -> Call:
        return Call(method="GET", path=_tenant(tenant_id) + "/audit/report",
                    params=(("subject", user_id), *_no_verify(verify)))

    @staticmethod
    @replies(TrailCheck)
    def audit_verify(tenant_id: str) -> Call:
        return Call(method="GET", path=_tenant(tenant_id) + "/audit/verify")

    @staticmethod
    @replies(InclusionAnswer)
    def audit_prove(tenant_id: str, event_id: str, checkpoint: str) -> Call:
        return Call(method="POST", path=_tenant(tenant_id) + "/audit/proofs/inclusion",
                    body={"event_id": event_id, "checkpoint": checkpoint})

    @staticmethod
    @replies(ConsistencyAnswer)
    def audit_consistency(tenant_id: str, first: str, second: str) -> Call:
        return Call(method="POST", path=_tenant(tenant_id) + "/audit/proofs/consistency",
                    body={"first": first, "second": second})


def _audit_filter(where: AuditFilter | None) -> list[tuple[str, str]]:
    """An audit query's filters as the query string names them."""
    if where is None:
        return []
    names = {"principal_id": "principal", "user_id": "subject"}
    return [(names.get(name, name), value) for name, value in attrs.asdict(where).items()
            if value is not None]


def _no_verify(verify: bool) -> tuple[tuple[str, str], ...]:
    return () if verify else (("no_verify", "true"),)
