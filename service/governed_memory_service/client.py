"""Remote clients with the manager's surface: ``add/get/list/search/update/delete/
history``, ``delete_all/delete_user/purge_expired``, the review queue
(``list_pending/approve/reject``) and ``replay``; the tiers' ``append/recent/
turns_after/clear``, ``working_state/update_working_state/clear_working`` and the
per-turn ``build_context``. Each takes the same scopes and keyword arguments as the
manager, ``MemoryTiers`` or ``MemoryContextBuilder``, returns the same value objects and
raises the same typed errors.

An application moves from in-process to remote by changing how it builds the object;
the principal is no argument here, since the credential the client holds *is* the
principal (the server derives it, never the caller). A scope is sent exactly: one
without ``user_id`` travels with ``shared=true``, so it names the shared scope on the
server as in process, even with a credential bound to a user (whose requests that leave
``user_id`` out otherwise mean its own user).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

import attrs
import httpx
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
from governed_memory.converter import structure, unstructure
from governed_memory.errors import GovernedMemoryError, MemoryValidationError
from governed_memory.ranking_options import RankingOptions
from governed_memory.records import CleanupPage
from governed_memory.replay import ReplayResult
from governed_memory.tiers import Turn, TurnDraft, WorkingState
from governed_memory.turncontext import MemoryContext

from governed_memory_service.bodies import (
    AddBody,
    ContextBody,
    MultiSearchBody,
    ScopeBody,
    SearchBody,
    TurnBody,
    UpdateBody,
    WorkingStateBody,
)
from governed_memory_service.problems import error_from_problem

__all__ = ["AsyncMemoryClient", "Call", "MemoryClient"]

T = TypeVar("T")


@attrs.frozen(kw_only=True)
class Call:
    """One HTTP request, built once and sent by either client."""

    method: str
    path: str
    params: tuple[tuple[str, str], ...] = ()
    body: Any = None
    headers: Mapping[str, str] = attrs.field(factory=dict)


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


class _Calls:
    """The request each operation makes: shared by the async and the sync client."""

    @staticmethod
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
    def get(scope: Scope, record_id: str) -> Call:
        return Call(method="GET", path=_record(scope, record_id),
                    params=tuple(_scope_params(scope)))

    @staticmethod
    def list(scope: Scope, *, limit: int = 20, cursor: str | None = None,
             memory_types: Iterable[MemoryType | str] | None = None) -> Call:
        params = [*_scope_params(scope), ("limit", str(limit))]
        if cursor is not None:
            params.append(("cursor", cursor))
        params += [("memory_type", MemoryType(t).value) for t in memory_types or ()]
        return Call(method="GET", path=_base(scope), params=tuple(params))

    @staticmethod
    def search(scopes: Scope | Sequence[Scope], query: str, *, limit: int | None = None,
               memory_types: Iterable[MemoryType | str] | None = None,
               metadata_filter: Mapping[str, Any] | None = None,
               entity_ids: Iterable[str] = (),
               ranking: RankingOptions | None = None,
               occurred_since: float | None = None, occurred_before: float | None = None,
               as_of: float | None = None) -> Call:
        """One scope goes to ``.../search`` (its dimensions in the query, like every
        other route); several go to ``.../multi-search`` as a list in the body."""
        types = tuple(MemoryType(t) for t in memory_types or ())
        if isinstance(scopes, Scope):
            body = SearchBody(query=query, limit=limit, memory_types=types,
                              metadata_filter=metadata_filter, entity_ids=tuple(entity_ids),
                              ranking=ranking, occurred_since=occurred_since,
                              occurred_before=occurred_before, as_of=as_of)
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
                                occurred_before=occurred_before, as_of=as_of)
        data = _body(multi)
        data["scopes"] = [_body(scope) for scope in multi.scopes]
        return Call(method="POST", path=_base(listed[0]) + "/multi-search", body=data)

    @staticmethod
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
    def delete(scope: Scope, record_id: str, *, expected_revision: str | None = None,
               hard: bool = False, idempotency_key: str | None = None) -> Call:
        params = _scope_params(scope)
        if hard:
            params.append(("hard", "true"))
        return Call(method="DELETE", path=_record(scope, record_id), params=tuple(params),
                    headers=_write_headers(idempotency_key, expected_revision))

    @staticmethod
    def history(scope: Scope, record_id: str) -> Call:
        return Call(method="GET", path=_record(scope, record_id) + "/history",
                    params=tuple(_scope_params(scope)))


    @staticmethod
    def delete_all(scope: Scope) -> Call:
        return Call(method="DELETE", path=_base(scope), params=tuple(_scope_params(scope)))

    @staticmethod
    def delete_user(tenant_id: str, user_id: str) -> Call:
        return Call(method="DELETE",
                    path=f"{_tenant(tenant_id)}/users/{quote(user_id, safe='')}")

    @staticmethod
    def purge_expired(scope: Scope, *, limit: int = 100, after: str | None = None) -> Call:
        return Call(method="POST", path=_base(scope) + "/purge-expired",
                    params=(*_scope_params(scope), *_paging(limit, after)))

    @staticmethod
    def list_pending(scope: Scope, *, limit: int = 20, cursor: str | None = None) -> Call:
        return Call(method="GET", path=_tenant(scope.tenant_id) + "/review",
                    params=(*_scope_params(scope), *_paging(limit, cursor)))

    @staticmethod
    def approve(scope: Scope, record_id: str, *, expected_revision: str | None = None,
                idempotency_key: str | None = None) -> Call:
        return Call(method="POST", path=_review(scope, record_id, "approve"),
                    params=tuple(_scope_params(scope)),
                    headers=_write_headers(idempotency_key, expected_revision))

    @staticmethod
    def reject(scope: Scope, record_id: str, *, expected_revision: str | None = None,
               idempotency_key: str | None = None) -> Call:
        return Call(method="POST", path=_review(scope, record_id, "reject"),
                    params=tuple(_scope_params(scope)),
                    headers=_write_headers(idempotency_key, expected_revision))

    @staticmethod
    def replay(snapshot_id: str) -> Call:
        return Call(method="GET", path=f"/v1/snapshots/{quote(snapshot_id, safe='')}/replay")

    # -- the tiers and the per-turn context ---------------------------------------------

    @staticmethod
    def append(scope: Scope, turn: TurnDraft) -> Call:
        body = TurnBody(role=turn.role, content=turn.content, name=turn.name,
                        tool_call_id=turn.tool_call_id, tool_calls=turn.tool_calls,
                        metadata=dict(turn.metadata) or None, turn_id=turn.turn_id)
        return Call(method="POST", path=_tenant(scope.tenant_id) + "/turns",
                    params=tuple(_scope_params(scope)), body=_body(body))

    @staticmethod
    def recent(scope: Scope, *, limit: int | None = None) -> Call:
        params = _scope_params(scope) + ([] if limit is None else [("limit", str(limit))])
        return Call(method="GET", path=_tenant(scope.tenant_id) + "/turns",
                    params=tuple(params))

    @staticmethod
    def turns_after(scope: Scope, after_seq: int, *, limit: int = 50) -> Call:
        return Call(method="GET", path=_tenant(scope.tenant_id) + "/turns",
                    params=(*_scope_params(scope), ("after_seq", str(after_seq)),
                            ("limit", str(limit))))

    @staticmethod
    def clear(scope: Scope) -> Call:
        return Call(method="DELETE", path=_tenant(scope.tenant_id) + "/turns",
                    params=tuple(_scope_params(scope)))

    @staticmethod
    def working_state(scope: Scope) -> Call:
        return Call(method="GET", path=_tenant(scope.tenant_id) + "/working-state",
                    params=tuple(_scope_params(scope)))

    @staticmethod
    def update_working_state(scope: Scope, state: Mapping[str, Any], *,
                             ttl_seconds: float | None = None, replace: bool = False) -> Call:
        body = WorkingStateBody(state=state, ttl_seconds=ttl_seconds, replace=replace)
        data = _body(body)
        data["state"] = dict(state)  # the state is data, sent whole even when empty
        return Call(method="PATCH", path=_tenant(scope.tenant_id) + "/working-state",
                    params=tuple(_scope_params(scope)), body=data)

    @staticmethod
    def clear_working(scope: Scope) -> Call:
        return Call(method="DELETE", path=_tenant(scope.tenant_id) + "/working-state",
                    params=tuple(_scope_params(scope)))

    @staticmethod
    def build_context(scope: Scope, question: str, *,
                      anchor_entity_ids: Iterable[str] = ()) -> Call:
        body = ContextBody(question=question, anchor_entity_ids=tuple(anchor_entity_ids))
        return Call(method="POST", path=_tenant(scope.tenant_id) + "/context",
                    params=tuple(_scope_params(scope)), body=_body(body))


def _decode(response: httpx.Response, kind: type[T]) -> T:
    """The value the response carries, or the typed error its problem names."""
    if response.is_success:
        return structure(response.json(), kind)
    raise _error(response)


def _error(response: httpx.Response) -> GovernedMemoryError:
    try:
        problem = response.json()
    except ValueError:
        problem = {}
    return error_from_problem(response.status_code,
                              problem if isinstance(problem, dict) else {})


def _field(response: httpx.Response, name: str, kind: type[T]) -> T:
    """One named field of a JSON object response (``{"deleted": 3}``), or the error."""
    if not response.is_success:
        raise _error(response)
    data = response.json()
    return structure(data.get(name) if isinstance(data, dict) else None, kind)


def _headers(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}", "Accept": "application/json"}


class AsyncMemoryClient:
    """The HTTP API over httpx, async. ``credential`` is an API key or a JWT; pass
    ``transport=httpx.ASGITransport(app)`` to call an app in process."""

    def __init__(self, base_url: str, credential: str, *,
                 transport: httpx.AsyncBaseTransport | None = None,
                 timeout_s: float = 30.0) -> None:
        self._http = httpx.AsyncClient(base_url=base_url, transport=transport,
                                       headers=_headers(credential), timeout=timeout_s)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:  # never the credential
        return f"AsyncMemoryClient({str(self._http.base_url)!r})"

    async def _send(self, call: Call) -> httpx.Response:
        return await self._http.request(call.method, call.path, params=list(call.params),
                                        json=call.body, headers=dict(call.headers))

    async def add(self, scope: Scope, content: str, **kwargs: Any) -> MemoryRecord:
        return _decode(await self._send(_Calls.add(scope, content, **kwargs)), MemoryRecord)

    async def get(self, scope: Scope, record_id: str) -> MemoryRecord:
        return _decode(await self._send(_Calls.get(scope, record_id)), MemoryRecord)

    async def list(self, scope: Scope, **kwargs: Any) -> Page[MemoryRecord]:
        return _decode(await self._send(_Calls.list(scope, **kwargs)),
                       Page[MemoryRecord])

    async def search(self, scopes: Scope | Sequence[Scope], query: str,
                     **kwargs: Any) -> SearchResult:
        return _decode(await self._send(_Calls.search(scopes, query, **kwargs)),
                       SearchResult)

    async def update(self, scope: Scope, record_id: str, **kwargs: Any) -> MemoryRecord:
        return _decode(await self._send(_Calls.update(scope, record_id, **kwargs)),
                       MemoryRecord)

    async def delete(self, scope: Scope, record_id: str, **kwargs: Any) -> DeleteResult:
        return _decode(await self._send(_Calls.delete(scope, record_id, **kwargs)),
                       DeleteResult)

    async def history(self, scope: Scope, record_id: str) -> tuple[MemoryVersion, ...]:
        return _field(await self._send(_Calls.history(scope, record_id)), "versions",
                      tuple[MemoryVersion, ...])

    async def delete_all(self, scope: Scope) -> int:
        return _field(await self._send(_Calls.delete_all(scope)), "deleted", int)

    async def delete_user(self, tenant_id: str, user_id: str) -> ErasureReceipt:
        return _decode(await self._send(_Calls.delete_user(tenant_id, user_id)),
                       ErasureReceipt)

    async def purge_expired(self, scope: Scope, **kwargs: Any) -> CleanupPage:
        return _decode(await self._send(_Calls.purge_expired(scope, **kwargs)), CleanupPage)

    async def list_pending(self, scope: Scope, **kwargs: Any) -> Page[MemoryRecord]:
        return _decode(await self._send(_Calls.list_pending(scope, **kwargs)),
                       Page[MemoryRecord])

    async def approve(self, scope: Scope, record_id: str, **kwargs: Any) -> MemoryRecord:
        return _decode(await self._send(_Calls.approve(scope, record_id, **kwargs)),
                       MemoryRecord)

    async def reject(self, scope: Scope, record_id: str, **kwargs: Any) -> DeleteResult:
        return _decode(await self._send(_Calls.reject(scope, record_id, **kwargs)),
                       DeleteResult)

    async def replay(self, snapshot_id: str) -> ReplayResult:
        return _decode(await self._send(_Calls.replay(snapshot_id)), ReplayResult)

    async def append(self, scope: Scope, turn: TurnDraft) -> Turn:
        return _decode(await self._send(_Calls.append(scope, turn)), Turn)

    async def recent(self, scope: Scope, **kwargs: Any) -> tuple[Turn, ...]:
        return _field(await self._send(_Calls.recent(scope, **kwargs)), "turns",
                      tuple[Turn, ...])

    async def turns_after(self, scope: Scope, after_seq: int,
                          **kwargs: Any) -> tuple[Turn, ...]:
        return _field(await self._send(_Calls.turns_after(scope, after_seq, **kwargs)),
                      "turns", tuple[Turn, ...])

    async def clear(self, scope: Scope) -> int:
        return _field(await self._send(_Calls.clear(scope)), "removed", int)

    async def working_state(self, scope: Scope) -> WorkingState | None:
        return _field(await self._send(_Calls.working_state(scope)), "working_state",
                      WorkingState | None)  # type: ignore[arg-type]

    async def update_working_state(self, scope: Scope, state: Mapping[str, Any],
                                   **kwargs: Any) -> WorkingState:
        return _decode(await self._send(_Calls.update_working_state(scope, state, **kwargs)),
                       WorkingState)

    async def clear_working(self, scope: Scope) -> bool:
        return _field(await self._send(_Calls.clear_working(scope)), "removed", bool)

    async def build_context(self, scope: Scope, question: str,
                            **kwargs: Any) -> MemoryContext:
        return _decode(await self._send(_Calls.build_context(scope, question, **kwargs)),
                       MemoryContext)


class MemoryClient:
    """The same surface, synchronous, over ``httpx.Client`` (no event loop of its own:
    for scripts and threaded applications)."""

    def __init__(self, base_url: str, credential: str, *,
                 transport: httpx.BaseTransport | None = None,
                 timeout_s: float = 30.0) -> None:
        self._http = httpx.Client(base_url=base_url, transport=transport,
                                  headers=_headers(credential), timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:  # never the credential
        return f"MemoryClient({str(self._http.base_url)!r})"

    def _send(self, call: Call) -> httpx.Response:
        return self._http.request(call.method, call.path, params=list(call.params),
                                  json=call.body, headers=dict(call.headers))

    def add(self, scope: Scope, content: str, **kwargs: Any) -> MemoryRecord:
        return _decode(self._send(_Calls.add(scope, content, **kwargs)), MemoryRecord)

    def get(self, scope: Scope, record_id: str) -> MemoryRecord:
        return _decode(self._send(_Calls.get(scope, record_id)), MemoryRecord)

    def list(self, scope: Scope, **kwargs: Any) -> Page[MemoryRecord]:
        return _decode(self._send(_Calls.list(scope, **kwargs)),
                       Page[MemoryRecord])

    def search(self, scopes: Scope | Sequence[Scope], query: str,
               **kwargs: Any) -> SearchResult:
        return _decode(self._send(_Calls.search(scopes, query, **kwargs)), SearchResult)

    def update(self, scope: Scope, record_id: str, **kwargs: Any) -> MemoryRecord:
        return _decode(self._send(_Calls.update(scope, record_id, **kwargs)), MemoryRecord)

    def delete(self, scope: Scope, record_id: str, **kwargs: Any) -> DeleteResult:
        return _decode(self._send(_Calls.delete(scope, record_id, **kwargs)), DeleteResult)

    def history(self, scope: Scope, record_id: str) -> tuple[MemoryVersion, ...]:
        return _field(self._send(_Calls.history(scope, record_id)), "versions",
                      tuple[MemoryVersion, ...])

    def delete_all(self, scope: Scope) -> int:
        return _field(self._send(_Calls.delete_all(scope)), "deleted", int)

    def delete_user(self, tenant_id: str, user_id: str) -> ErasureReceipt:
        return _decode(self._send(_Calls.delete_user(tenant_id, user_id)), ErasureReceipt)

    def purge_expired(self, scope: Scope, **kwargs: Any) -> CleanupPage:
        return _decode(self._send(_Calls.purge_expired(scope, **kwargs)), CleanupPage)

    def list_pending(self, scope: Scope, **kwargs: Any) -> Page[MemoryRecord]:
        return _decode(self._send(_Calls.list_pending(scope, **kwargs)), Page[MemoryRecord])

    def approve(self, scope: Scope, record_id: str, **kwargs: Any) -> MemoryRecord:
        return _decode(self._send(_Calls.approve(scope, record_id, **kwargs)), MemoryRecord)

    def reject(self, scope: Scope, record_id: str, **kwargs: Any) -> DeleteResult:
        return _decode(self._send(_Calls.reject(scope, record_id, **kwargs)), DeleteResult)

    def replay(self, snapshot_id: str) -> ReplayResult:
        return _decode(self._send(_Calls.replay(snapshot_id)), ReplayResult)

    def append(self, scope: Scope, turn: TurnDraft) -> Turn:
        return _decode(self._send(_Calls.append(scope, turn)), Turn)

    def recent(self, scope: Scope, **kwargs: Any) -> tuple[Turn, ...]:
        return _field(self._send(_Calls.recent(scope, **kwargs)), "turns",
                      tuple[Turn, ...])

    def turns_after(self, scope: Scope, after_seq: int, **kwargs: Any) -> tuple[Turn, ...]:
        return _field(self._send(_Calls.turns_after(scope, after_seq, **kwargs)), "turns",
                      tuple[Turn, ...])

    def clear(self, scope: Scope) -> int:
        return _field(self._send(_Calls.clear(scope)), "removed", int)

    def working_state(self, scope: Scope) -> WorkingState | None:
        return _field(self._send(_Calls.working_state(scope)), "working_state",
                      WorkingState | None)  # type: ignore[arg-type]

    def update_working_state(self, scope: Scope, state: Mapping[str, Any],
                             **kwargs: Any) -> WorkingState:
        return _decode(self._send(_Calls.update_working_state(scope, state, **kwargs)),
                       WorkingState)

    def clear_working(self, scope: Scope) -> bool:
        return _field(self._send(_Calls.clear_working(scope)), "removed", bool)

    def build_context(self, scope: Scope, question: str, **kwargs: Any) -> MemoryContext:
        return _decode(self._send(_Calls.build_context(scope, question, **kwargs)),
                       MemoryContext)
