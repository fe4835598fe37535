"""Property: over any sequence of requests by three principals (two users of one tenant
and a user of another), across every kind of route and any scope named in the URL, no
response carries memory, turn or working-state content of another principal, and no
write lands outside the writer's own tenant and user.

Every stored text carries a marker naming its writer (``zq<tenant><user>k<n>``), so a
leak is a marker of someone else in a response body, whatever route let it out.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from governed_memory import GovernedMemoryManager, Permission
from governed_memory.tiers import InMemoryTurnStore, InMemoryWorkingStateStore, MemoryTiers
from governed_memory_service import ApiKeyStore, BearerAuthenticator, create_app
from hypothesis import given
from hypothesis import strategies as st

MARKER = re.compile(r"zq([a-z]+)_([a-z]+)k\d+")
ACTORS = {"alice": ("acme", "alice"), "carol": ("acme", "carol"), "bob": ("globex", "bob")}
ALL = [Permission.READ, Permission.WRITE, Permission.DELETE]


@attrs.define
class World:
    runner: asyncio.Runner
    app: Any
    tokens: dict[str, str]
    record_ids: list[str] = attrs.Factory(list)
    snapshot_ids: list[str] = attrs.Factory(list)
    counter: int = 0


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp: Path = tmp_path_factory.mktemp("isolation")
    runner = asyncio.Runner()
    manager = GovernedMemoryManager.from_plugins("native", {"backend": "memory"})
    keys = ApiKeyStore(tmp / "keys.db")

    async def setup() -> dict[str, str]:
        await manager.start()
        tokens = {}
        for name, (tenant, user) in ACTORS.items():
            issued = await keys.create(tenant_id=tenant, kind="user", user_id=user,
                                       permissions=ALL)
            tokens[name] = issued.token
        return tokens

    with runner:
        tokens = runner.run(setup())
        tiers = MemoryTiers(long_term=manager, turns=InMemoryTurnStore(),
                            working=InMemoryWorkingStateStore())
        app = create_app(manager, BearerAuthenticator(keys), tiers=tiers)
        yield World(runner=runner, app=app, tokens=tokens)
        runner.run(keys.close())
        runner.run(manager.close())


ROUTES = ["add", "list", "search", "get", "update", "delete", "history", "multi_search",
          "append_turn", "recent_turns", "update_working_state", "read_working_state",
          "build_context", "replay", "list_pending"]

requests = st.lists(st.tuples(st.sampled_from(sorted(ACTORS)), st.sampled_from(ROUTES),
                              st.sampled_from(["acme", "globex"]),
                              st.sampled_from(["alice", "carol", "bob", None]),
                              st.integers(min_value=0, max_value=50)),
                    min_size=1, max_size=12)


def _send(world: World, actor: str, route: str, tenant: str, user: str | None,
          pick: int) -> tuple[httpx.Response, bool]:
    """One request; returns it and whether it was a write of a new marker."""
    world.counter += 1
    writer_tenant, writer_user = ACTORS[actor]
    marker = f"zq{writer_tenant}_{writer_user}k{world.counter}"
    query: dict[str, str] = {} if user is None else {"user_id": user}
    base = f"/v1/tenants/{tenant}"
    record = world.record_ids[pick % len(world.record_ids)] if world.record_ids else "01X"
    snapshot = (world.snapshot_ids[pick % len(world.snapshot_ids)] if world.snapshot_ids
                else "snap")
    session = {**query, "session_id": "s"}
    run = {**query, "run_id": "r"}
    content = f"memory {marker} note"
    calls: dict[str, tuple[str, str, dict[str, str], Any, bool]] = {
        "add": ("POST", f"{base}/memories", query, {"content": content}, True),
        "list": ("GET", f"{base}/memories", query, None, False),
        "search": ("POST", f"{base}/memories/search", query, {"query": "memory note"},
                   False),
        "get": ("GET", f"{base}/memories/{record}", query, None, False),
        "update": ("PATCH", f"{base}/memories/{record}", query, {"content": content}, True),
        "delete": ("DELETE", f"{base}/memories/{record}", query, None, False),
        "history": ("GET", f"{base}/memories/{record}/history", query, None, False),
        "multi_search": ("POST", f"{base}/memories/multi-search", {},
                         {"scopes": [{"user_id": u} for u in ("alice", "carol", "bob")],
                          "query": "memory note"}, False),
        "append_turn": ("POST", f"{base}/turns", session,
                        {"role": "user", "content": content}, True),
        "recent_turns": ("GET", f"{base}/turns", session, None, False),
        "update_working_state": ("PATCH", f"{base}/working-state", run,
                                 {"state": {"note": content}}, True),
        "read_working_state": ("GET", f"{base}/working-state", run, None, False),
        "build_context": ("POST", f"{base}/context", session, {"question": "memory note"},
                          False),
        "replay": ("GET", f"/v1/snapshots/{snapshot}/replay", {}, None, False),
        "list_pending": ("GET", f"{base}/review", query, None, False),
    }
    method, path, params, body, writes = calls[route]

    async def go() -> httpx.Response:
        async with httpx.AsyncClient(
                base_url="http://service.test", transport=httpx.ASGITransport(app=world.app),
                headers={"Authorization": f"Bearer {world.tokens[actor]}"}) as http:
            return await http.request(method, path, params=params, json=body)

    return world.runner.run(go()), writes


@given(requests)
def test_no_response_carries_another_principals_content(
        world: World, steps: list[tuple[str, str, str, str | None, int]]) -> None:
    for actor, route, tenant, user, pick in steps:
        response, writes = _send(world, actor, route, tenant, user, pick)
        reader_tenant, reader_user = ACTORS[actor]
        for found_tenant, found_user in MARKER.findall(response.text):
            assert (found_tenant, found_user) == (reader_tenant, reader_user), (
                f"{actor} read {found_tenant}/{found_user}'s content through {route} "
                f"({tenant}, user {user}): {response.status_code}")
        if response.is_success and writes:
            assert tenant == reader_tenant and user in (reader_user, None), (
                f"{actor} wrote into {tenant}/{user} through {route}")
        if response.is_success and route == "add":
            world.record_ids.append(response.json()["id"])
        if response.is_success and route in ("search", "multi_search"):
            world.snapshot_ids.append(response.json()["snapshot_id"])
