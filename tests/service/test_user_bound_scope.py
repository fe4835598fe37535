"""A key bound to a user that leaves ``user_id`` out works in its own user's scope, on
every REST route that takes a scope, as the MCP tools and the tier routes do.

The outside trial: alice's key searched without ``?user_id=`` and silently found
nothing, because the query named the tenant's shared scope, while the MCP ``recall``
with the same key found her memories. Naming another user is still refused.
"""

from __future__ import annotations

from typing import Any

import httpx
from governed_memory import Permission, Principal, PrincipalKind, Scope
from service_support import Service

MEMORIES = "/v1/tenants/acme/memories"
ALICE = Scope("acme", user_id="alice")


async def test_without_user_id_a_user_key_reads_and_writes_its_own_scope(
        service: Service) -> None:
    async with service.http(service.alice) as http:
        created = await http.post(MEMORIES, json={"content": "Alice likes green tea"})
        assert created.status_code == 201, created.text
        record = created.json()
        assert record["scope"] == {"tenant_id": "acme", "user_id": "alice"}
        rid = record["id"]

        async def ok(response: httpx.Response) -> Any:
            assert response.status_code in (200, 201), response.text
            return response.json()

        assert [r["id"] for r in (await ok(await http.get(MEMORIES)))["items"]] == [rid]
        found = await ok(await http.post(MEMORIES + "/search", json={"query": "green tea"}))
        assert [h["record"]["id"] for h in found["hits"]] == [rid]
        multi = await ok(await http.post(MEMORIES + "/multi-search",
                                         json={"scopes": [{}], "query": "green tea"}))
        assert [h["record"]["id"] for h in multi["hits"]] == [rid]
        got = await ok(await http.get(f"{MEMORIES}/{rid}"))
        updated = await ok(await http.patch(f"{MEMORIES}/{rid}", json={"importance": 0.9},
                                            headers={"If-Match": f'"{got["revision"]}"'}))
        assert updated["version"] == 2
        assert len((await ok(await http.get(f"{MEMORIES}/{rid}/history")))["versions"]) == 2
        assert (await ok(await http.delete(f"{MEMORIES}/{rid}")))["record_id"] == rid
    # The same scope as naming the user explicitly, in process.
    reader = Principal("user:alice", PrincipalKind.USER, "acme", "alice",
                       frozenset({Permission.READ}))
    versions = await service.manager.history(reader, ALICE, rid)
    assert [v.record.version for v in versions] == [1, 2, 3]


async def test_naming_another_user_is_still_refused(service: Service) -> None:
    async with service.http(service.alice) as http:
        for response in (
                await http.get(MEMORIES, params={"user_id": "bob"}),
                await http.post(MEMORIES, params={"user_id": "bob"}, json={"content": "x"}),
                await http.post(MEMORIES + "/search", params={"user_id": "bob"},
                                json={"query": "x"}),
                await http.post(MEMORIES + "/multi-search",
                                json={"scopes": [{}, {"user_id": "bob"}], "query": "x"}),
                await http.get("/v1/tenants/acme/turns",
                               params={"user_id": "bob", "session_id": "s1"})):
            assert response.status_code == 403, response.text
            assert response.json()["code"] == "scope_denied"


async def test_a_key_bound_to_no_user_keeps_the_tenant_scope(service: Service) -> None:
    """No default without a bound user: an operator's key without ``user_id`` names the
    tenant-level scope, exactly as in process."""
    operator = await service.keys.create(tenant_id="acme", kind="service",
                                         principal_id="service:ops",
                                         permissions=[Permission.READ, Permission.WRITE,
                                                      Permission.ADMIN])
    async with service.http(operator.token) as http:
        created = await http.post(MEMORIES, json={"content": "the office opens at nine"})
        assert created.status_code == 201, created.text
        assert created.json()["scope"] == {"tenant_id": "acme"}
    async with service.http(service.alice) as http:
        # alice's own scope does not hold the tenant's memory ...
        assert (await http.get(MEMORIES)).json()["items"] == []


async def test_rest_and_mcp_agree_on_the_default(service: Service) -> None:
    """What alice stores over REST without ``user_id`` is what MCP's ``recall`` (whose
    ``user_id`` defaults to the key's user) finds, and the other way round."""
    app: Any = service.app
    async with app.router.lifespan_context(app), service.http(service.alice) as http:
        assert (await http.post(MEMORIES, json={"content": "REST note on kites"})
                ).status_code == 201
        headers = {"accept": "application/json, text/event-stream",
                   "mcp-protocol-version": "2025-06-18"}
        stored = await http.post("/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "remember", "arguments": {"content": "MCP note on kites"}}})
        assert stored.status_code == 200, stored.text
        recalled = await http.post("/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "recall", "arguments": {"query": "kites"}}})
        block = recalled.json()["result"]["content"][0]["text"]
        assert "REST note on kites" in block and "MCP note on kites" in block
        listed = (await http.get(MEMORIES)).json()["items"]
        assert {r["content"] for r in listed} == {"REST note on kites", "MCP note on kites"}


async def test_a_user_key_reaches_the_shared_scope_when_it_says_so(service: Service) -> None:
    """``shared=true`` (or ``"shared": true`` in a multi-search scope) names the scope
    without a user, which the scope rule lets a user read; the remote client sends it
    for every scope without a user, so a ``Scope`` means over HTTP what it does in
    process."""
    operator = await service.keys.create(tenant_id="acme", kind="service",
                                         principal_id="service:ops",
                                         permissions=[Permission.READ, Permission.WRITE,
                                                      Permission.ADMIN])
    async with service.http(operator.token) as http:
        shared = await http.post(MEMORIES, params={"project_id": "kites"},
                                 json={"content": "the team flies kites on Fridays"})
        assert shared.status_code == 201, shared.text
    async with service.http(service.alice) as http:
        mine = await http.post(MEMORIES, params={"project_id": "kites"},
                               json={"content": "alice flies a red kite"})
        assert mine.status_code == 201 and mine.json()["scope"]["user_id"] == "alice"
        listed = await http.get(MEMORIES, params={"project_id": "kites", "shared": "true"})
        assert [r["content"] for r in listed.json()["items"]] == [
            "the team flies kites on Fridays"]
        both = await http.post(MEMORIES + "/multi-search", json={
            "scopes": [{"project_id": "kites"}, {"project_id": "kites", "shared": True}],
            "query": "kites"})
        assert both.status_code == 200, both.text
        assert {h["record"]["content"] for h in both.json()["hits"]} == {
            "alice flies a red kite", "the team flies kites on Fridays"}
        clash = await http.get(MEMORIES, params={"shared": "true", "user_id": "alice"})
        assert clash.status_code == 422 and clash.json()["field"] == "query.shared"
        # Writing the shared scope still takes memory:admin.
        refused = await http.post(MEMORIES, params={"project_id": "kites", "shared": "true"},
                                  json={"content": "not alice's to share"})
        assert refused.status_code == 403, refused.text
    async with service.client(service.alice) as client:
        found = await client.search(Scope("acme", project_id="kites"), "kites")
        assert [hit.record.content for hit in found.hits] == [
            "the team flies kites on Fridays"]
        mine_only = await client.search(Scope("acme", project_id="kites", user_id="alice"),
                                        "kites")
        assert [hit.record.content for hit in mine_only.hits] == ["alice flies a red kite"]
