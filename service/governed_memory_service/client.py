"""Remote clients with the manager's surface: ``add/get/list/search/update/delete/
history``, ``delete_all/delete_user/purge_expired``, the review queue
(``list_pending/approve/reject``) and ``replay``; the tiers' ``append/recent/
turns_after/clear``, ``working_state/update_working_state/clear_working``, the
per-turn ``build_context`` and the memory blocks (``read_blocks/append_block/
replace_block/rethink_block/block_history``). Each takes the same scopes and keyword
arguments as the manager, ``MemoryTiers``, ``MemoryBlocks`` or ``MemoryContextBuilder``,
returns the same value objects and raises the same typed errors.

An application moves from in-process to remote by changing how it builds the object;
the principal is no argument here, since the credential the client holds *is* the
principal (the server derives it, never the caller). A scope is sent exactly, as the
manager would read it (:mod:`governed_memory_service.client_calls`).

The two clients differ only in how they send: each method is an operation of
:class:`~governed_memory_service.client_calls.Calls`, awaited by one and blocking in
the other, with the operation's signature (``ParamSpec`` for type checkers,
``__signature__`` for ``help()`` and ``inspect``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import httpx

from governed_memory_service.client_calls import Call, Calls, RemoteOperation

__all__ = ["AsyncMemoryClient", "Call", "MemoryClient"]

P = ParamSpec("P")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class _Sends(Protocol):
    async def _send(self, call: Call) -> httpx.Response: ...


class _SendsBlocking(Protocol):
    def _send(self, call: Call) -> httpx.Response: ...


def _presented(method: F, operation: RemoteOperation[Any, Any]) -> F:
    """``method`` named and documented as ``operation``, and with its signature (a
    method's: ``self`` first, returning what the reply carries)."""
    parameters = inspect.signature(operation.request).parameters.values()
    method.__name__ = method.__qualname__ = operation.__name__
    method.__doc__ = operation.__doc__
    method.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD), *parameters],
        return_annotation=operation.reply.kind)
    return method


def _awaited(operation: RemoteOperation[P, T]
             ) -> Callable[Concatenate[_Sends, P], Coroutine[Any, Any, T]]:
    async def method(self: _Sends, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return operation.reply.read(await self._send(operation(*args, **kwargs)))

    return _presented(method, operation)


def _blocking(operation: RemoteOperation[P, T]) -> Callable[Concatenate[_SendsBlocking, P], T]:
    def method(self: _SendsBlocking, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return operation.reply.read(self._send(operation(*args, **kwargs)))

    return _presented(method, operation)


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

    add = _awaited(Calls.add)
    remember = _awaited(Calls.remember)
    get = _awaited(Calls.get)
    list = _awaited(Calls.list)
    search = _awaited(Calls.search)
    update = _awaited(Calls.update)
    put = _awaited(Calls.put)
    delete = _awaited(Calls.delete)
    history = _awaited(Calls.history)
    delete_all = _awaited(Calls.delete_all)
    delete_user = _awaited(Calls.delete_user)
    purge_expired = _awaited(Calls.purge_expired)
    list_pending = _awaited(Calls.list_pending)
    approve = _awaited(Calls.approve)
    reject = _awaited(Calls.reject)
    replay = _awaited(Calls.replay)
    append = _awaited(Calls.append)
    recent = _awaited(Calls.recent)
    turns_after = _awaited(Calls.turns_after)
    clear = _awaited(Calls.clear)
    working_state = _awaited(Calls.working_state)
    update_working_state = _awaited(Calls.update_working_state)
    clear_working = _awaited(Calls.clear_working)
    build_context = _awaited(Calls.build_context)
    read_blocks = _awaited(Calls.read_blocks)
    append_block = _awaited(Calls.append_block)
    replace_block = _awaited(Calls.replace_block)
    rethink_block = _awaited(Calls.rethink_block)
    block_history = _awaited(Calls.block_history)
    audit_query = _awaited(Calls.audit_query)
    audit_summary = _awaited(Calls.audit_summary)
    audit_report = _awaited(Calls.audit_report)
    audit_verify = _awaited(Calls.audit_verify)
    audit_prove = _awaited(Calls.audit_prove)
    audit_consistency = _awaited(Calls.audit_consistency)


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

    add = _blocking(Calls.add)
    remember = _blocking(Calls.remember)
    get = _blocking(Calls.get)
    list = _blocking(Calls.list)
    search = _blocking(Calls.search)
    update = _blocking(Calls.update)
    put = _blocking(Calls.put)
    delete = _blocking(Calls.delete)
    history = _blocking(Calls.history)
    delete_all = _blocking(Calls.delete_all)
    delete_user = _blocking(Calls.delete_user)
    purge_expired = _blocking(Calls.purge_expired)
    list_pending = _blocking(Calls.list_pending)
    approve = _blocking(Calls.approve)
    reject = _blocking(Calls.reject)
    replay = _blocking(Calls.replay)
    append = _blocking(Calls.append)
    recent = _blocking(Calls.recent)
    turns_after = _blocking(Calls.turns_after)
    clear = _blocking(Calls.clear)
    working_state = _blocking(Calls.working_state)
    update_working_state = _blocking(Calls.update_working_state)
    clear_working = _blocking(Calls.clear_working)
    build_context = _blocking(Calls.build_context)
    read_blocks = _blocking(Calls.read_blocks)
    append_block = _blocking(Calls.append_block)
    replace_block = _blocking(Calls.replace_block)
    rethink_block = _blocking(Calls.rethink_block)
    block_history = _blocking(Calls.block_history)
    audit_query = _blocking(Calls.audit_query)
    audit_summary = _blocking(Calls.audit_summary)
    audit_report = _blocking(Calls.audit_report)
    audit_verify = _blocking(Calls.audit_verify)
    audit_prove = _blocking(Calls.audit_prove)
    audit_consistency = _blocking(Calls.audit_consistency)
