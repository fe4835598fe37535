"""Memory blocks through both remote clients, against the real app: each call returns
what the in-process ``MemoryBlocks`` call returns (the library's ``Block``, ``Block``
tuples and ``BlockHistory``), and a refusal (a stale version's 409, a bad edit's 422, an
undeclared block's 404, another tenant's 403, a server without blocks' 501) is raised
as the typed library error the in-process call raises, with its field and message.

The app, the manager and the block store run on one event loop in a thread (anyio's
blocking portal): the async client is awaited there, the sync client reaches the app
through a small transport that hands it each request, and the in-process calls are
made there too, as the principal the credential stands for."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio.from_thread
import attrs
import httpx
import pytest
from anyio.from_thread import BlockingPortal
from governed_memory import (
    GovernedMemoryError,
    GovernedMemoryManager,
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryScopeError,
    MemoryValidationError,
    Permission,
    Principal,
    PrincipalKind,
    Scope,
)
from governed_memory.errors import MemoryCapabilityUnsupportedError
from governed_memory.profiles.blocks import BlockSection
from governed_memory.scope import ScopeLevel
from governed_memory.tiers import Block, BlockHistory, InMemoryBlockStore, MemoryTiers
from governed_memory_service import (
    ApiKeyStore,
    AsyncMemoryClient,
    BearerAuthenticator,
    MemoryClient,
    create_app,
)
from service_support import ALL

SPECS = {"persona": BlockSection(limit=100, initial="I am Sam.", level=ScopeLevel.SESSION),
         "human": BlockSection(limit=60, description="What we know about the user")}
SESSION = Scope("acme", user_id="alice", session_id="s1")
ALICE = Principal("user:alice", PrincipalKind.USER, "acme", "alice", frozenset(ALL))
LOCAL = {"read_blocks": "read", "append_block": "append", "replace_block": "replace",
         "rethink_block": "rethink", "block_history": "history"}
"""Each client operation and the ``MemoryBlocks`` method it stands for."""


class PortalTransport(httpx.BaseTransport):
    """Sends each sync request to an ASGI app on the portal's event loop."""

    def __init__(self, portal: BlockingPortal, app: object) -> None:
        self._portal = portal
        self._inner = httpx.ASGITransport(app=app)  # type: ignore[arg-type]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()

        async def send() -> httpx.Response:
            forwarded = httpx.Request(request.method, request.url, headers=request.headers,
                                      content=body)
            response = await self._inner.handle_async_request(forwarded)
            content = await response.aread()
            return httpx.Response(response.status_code, headers=response.headers,
                                  content=content, request=request)

        return self._portal.call(send)


@attrs.frozen
class Surfaces:
    """One client (async or sync) and the in-process blocks behind its app."""

    portal: BlockingPortal
    client: AsyncMemoryClient | MemoryClient
    tiers: MemoryTiers
    other_tenant: AsyncMemoryClient | MemoryClient

    def remote(self, operation: str, *args: Any, client: object = None, **kwargs: Any) -> Any:
        method = getattr(client or self.client, operation)
        if isinstance(client or self.client, AsyncMemoryClient):
            return self.portal.call(lambda: method(*args, **kwargs))
        return method(*args, **kwargs)

    def local(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self.tiers.blocks, LOCAL[operation])
        return self.portal.call(lambda: method(ALICE, *args, **kwargs))


def _client(kind: str, portal: BlockingPortal, app: object,
            token: str) -> AsyncMemoryClient | MemoryClient:
    if kind == "async":
        return AsyncMemoryClient("http://service.test", token,
                                 transport=httpx.ASGITransport(app=app))  # type: ignore[arg-type]
    return MemoryClient("http://service.test", token, transport=PortalTransport(portal, app))


def _close(portal: BlockingPortal, client: AsyncMemoryClient | MemoryClient) -> None:
    if isinstance(client, AsyncMemoryClient):
        portal.call(client.aclose)
    else:
        client.close()


@pytest.fixture(params=["async", "sync"])
def surfaces(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Surfaces]:
    with anyio.from_thread.start_blocking_portal() as portal:
        manager = GovernedMemoryManager.from_plugins(
            "native", {"backend": "sqlite", "path": str(tmp_path / "memory.db")})
        keys = ApiKeyStore(tmp_path / "keys.db")
        tiers = MemoryTiers(long_term=manager, blocks=InMemoryBlockStore(),
                            block_specs=SPECS)
        portal.call(tiers.start)
        try:
            alice = portal.call(lambda: keys.create(
                tenant_id="acme", kind="user", user_id="alice", permissions=ALL))
            globex = portal.call(lambda: keys.create(
                tenant_id="globex", kind="user", user_id="bob", permissions=ALL))
            app = create_app(manager, BearerAuthenticator(keys), tiers=tiers)
            client = _client(request.param, portal, app, alice.token)
            other = _client(request.param, portal, app, globex.token)
            try:
                yield Surfaces(portal, client, tiers, other)
            finally:
                _close(portal, client)
                _close(portal, other)
        finally:
            portal.call(keys.close)
            portal.call(tiers.close)


def _refusal(call: Callable[[], Any]) -> GovernedMemoryError:
    with pytest.raises(GovernedMemoryError) as caught:
        call()
    return caught.value


def test_blocks_read_edit_and_history_return_the_librarys_values(surfaces: Surfaces) -> None:
    blocks = surfaces.remote("read_blocks", SESSION)
    assert isinstance(blocks, tuple) and all(isinstance(b, Block) for b in blocks)
    assert [(b.name, b.version, b.value) for b in blocks] == [
        ("persona", 0, "I am Sam."), ("human", 0, "")]
    assert blocks == surfaces.local("read_blocks", SESSION)

    appended = surfaces.remote("append_block", SESSION, "human", "Name: Alice")
    assert isinstance(appended, Block) and (appended.version, appended.chars) == (1, 11)
    replaced = surfaces.remote("replace_block", SESSION, "human", "Alice", "Ali",
                               expected_version=1)
    assert (replaced.version, replaced.value) == (2, "Name: Ali")
    rethought = surfaces.remote("rethink_block", SESSION, "persona", "I am Sam, a guide.",
                                expected_version=0)
    assert (rethought.version, rethought.value) == (1, "I am Sam, a guide.")
    (human,) = surfaces.remote("read_blocks", SESSION, ["human", "human"])
    assert human == replaced == surfaces.local("read_blocks", SESSION, ["human"])[0]

    history = surfaces.remote("block_history", SESSION, "human")
    assert isinstance(history, BlockHistory)
    assert [(v.version, v.edit, v.value) for v in history.versions] == [
        (2, "replace", "Name: Ali"), (1, "append", "Name: Alice")]
    assert history == surfaces.local("block_history", SESSION, "human")
    page = surfaces.remote("block_history", SESSION, "human", before_version=2, limit=1)
    assert [v.version for v in page.versions] == [1]
    assert page == surfaces.local("block_history", SESSION, "human", before_version=2,
                                  limit=1)


def test_a_stale_version_is_the_same_conflict_and_writes_nothing(surfaces: Surfaces) -> None:
    surfaces.remote("append_block", SESSION, "human", "one")
    remote = _refusal(lambda: surfaces.remote("rethink_block", SESSION, "human", "lost",
                                              expected_version=0))
    local = _refusal(lambda: surfaces.local("rethink_block", SESSION, "human", "lost",
                                            expected_version=0))
    assert type(remote) is type(local) is MemoryConflictError
    assert str(remote) == str(local) and "version 1, not 0" in str(remote)
    (human,) = surfaces.remote("read_blocks", SESSION, ["human"])
    assert (human.version, human.value) == (1, "one")
    # Without a version the edit is re-applied on the newest text, as in process.
    assert surfaces.remote("append_block", SESSION, "human", "two").value == "one\ntwo"


@pytest.mark.parametrize(("operation", "args", "kwargs", "kind", "field"), [
    ("append_block", ("human", "x" * 61), {}, MemoryValidationError, "value"),
    ("replace_block", ("human", "absent", "x"), {}, MemoryValidationError, "old"),
    ("append_block", ("human", "x"), {"expected_version": -1}, MemoryValidationError,
     "expected_version"),
    ("rethink_block", ("No Such", "x"), {}, MemoryValidationError, "name"),
    ("block_history", ("human",), {"limit": 101}, MemoryValidationError, "limit"),
    ("read_blocks", ([],), {}, MemoryValidationError, "names"),
    ("append_block", ("notes", "x"), {}, MemoryNotFoundError, None),
], ids=["over-limit", "absent-passage", "negative-version", "bad-name", "history-page",
        "no-names", "undeclared"])
def test_a_refusal_is_the_in_process_error(surfaces: Surfaces, operation: str,
                                           args: tuple[Any, ...], kwargs: dict[str, Any],
                                           kind: type[GovernedMemoryError],
                                           field: str | None) -> None:
    remote = _refusal(lambda: surfaces.remote(operation, SESSION, *args, **kwargs))
    local = _refusal(lambda: surfaces.local(operation, SESSION, *args, **kwargs))
    assert type(remote) is type(local) is kind
    assert getattr(remote, "field", None) == getattr(local, "field", None) == field
    assert str(remote) == str(local)
    assert [b.version for b in surfaces.remote("read_blocks", SESSION)] == [0, 0]


def test_another_tenants_credential_is_refused(surfaces: Surfaces) -> None:
    refused = _refusal(lambda: surfaces.remote("append_block", SESSION, "human", "x",
                                               client=surfaces.other_tenant))
    assert isinstance(refused, MemoryScopeError)
    assert surfaces.remote("read_blocks", SESSION)[1].version == 0


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_a_server_without_blocks_is_capability_unsupported(kind: str, tmp_path: Path) -> None:
    with anyio.from_thread.start_blocking_portal() as portal:
        manager = GovernedMemoryManager.from_plugins("native", {"backend": "memory"})
        keys = ApiKeyStore(tmp_path / "keys.db")
        portal.call(manager.start)
        try:
            issued = portal.call(lambda: keys.create(
                tenant_id="acme", kind="user", user_id="alice",
                permissions=[Permission.READ, Permission.WRITE]))
            app = create_app(manager, BearerAuthenticator(keys),
                             tiers=MemoryTiers(long_term=manager))
            client = _client(kind, portal, app, issued.token)
            try:
                surfaces = Surfaces(portal, client, MemoryTiers(long_term=manager), client)
                for operation, args in (("read_blocks", ()),
                                        ("append_block", ("human", "x")),
                                        ("block_history", ("human",))):
                    refused = _refusal(functools.partial(surfaces.remote, operation,
                                                         SESSION, *args))
                    assert isinstance(refused, MemoryCapabilityUnsupportedError), operation
                    assert "[blocks.<name>]" in str(refused)
            finally:
                _close(portal, client)
        finally:
            portal.call(keys.close)
            portal.call(manager.close)
