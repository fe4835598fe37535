"""Memory blocks over the wire: read, edit by each verb, compare-and-set as a 409, the
history, typed refusals for bad input, another tenant's key refused, and a server
without blocks answering 501."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from governed_memory import GovernedMemoryManager, Permission
from governed_memory.events import InMemoryEventSink
from governed_memory.profiles.blocks import BlockSection
from governed_memory.scope import ScopeLevel
from governed_memory.tiers import InMemoryBlockStore, MemoryTiers
from governed_memory_service import ApiKeyStore, BearerAuthenticator, JwtVerifier, create_app
from service_support import JWT, issue_credentials

SPECS = {"persona": BlockSection(limit=100, initial="I am Sam.", level=ScopeLevel.SESSION),
         "human": BlockSection(limit=60, description="What we know about the user")}
BLOCKS = "/v1/tenants/acme/blocks"
SESSION = {"session_id": "s1"}


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    sink = InMemoryEventSink()
    manager = GovernedMemoryManager.from_plugins("native", {"backend": "memory"}, sinks=[sink])
    keys = ApiKeyStore(tmp_path / "keys.db")
    async with manager, keys:
        credentials = await issue_credentials(keys)
        tiers = MemoryTiers(long_term=manager, blocks=InMemoryBlockStore(), block_specs=SPECS)
        await tiers.start()
        app = create_app(manager, BearerAuthenticator(keys, JwtVerifier(JWT)),
                         max_body_bytes=4096, tiers=tiers)
        admin = await keys.create(tenant_id="acme", kind="service",
                                  principal_id="svc:admin", permissions=list(Permission))
        tokens = {"alice": credentials.alice, "globex": credentials.bob_other_tenant,
                  "reader": credentials.reader, "admin": admin.token}
        async with httpx.AsyncClient(base_url="http://service.test",
                                     transport=httpx.ASGITransport(app=app)) as client:
            client.headers["Authorization"] = f"Bearer {credentials.alice}"
            yield client, tokens


async def test_blocks_are_read_edited_and_versioned(
        http: tuple[httpx.AsyncClient, dict[str, str]]) -> None:
    client, _ = http
    read = await client.get(BLOCKS, params=SESSION)
    assert read.status_code == 200
    assert [(b["name"], b["version"], b["value"]) for b in read.json()["blocks"]] == [
        ("persona", 0, "I am Sam."), ("human", 0, "")]
    appended = await client.post(BLOCKS + "/human/edits", params=SESSION,
                                 json={"edit": "append", "text": "Name: Alice"})
    assert appended.status_code == 200 and appended.json()["version"] == 1
    replaced = await client.post(BLOCKS + "/human/edits", params=SESSION,
                                 json={"edit": "replace", "old": "Alice", "new": "Ali",
                                       "expected_version": 1})
    assert replaced.json()["value"] == "Name: Ali" and replaced.json()["chars"] == 9
    stale = await client.post(BLOCKS + "/human/edits", params=SESSION,
                              json={"edit": "rethink", "value": "x", "expected_version": 1})
    assert stale.status_code == 409 and stale.json()["code"] == "conflict"
    history = await client.get(BLOCKS + "/human/history", params={**SESSION, "limit": "5"})
    assert [(v["version"], v["edit"]) for v in history.json()["versions"]] == [
        (2, "replace"), (1, "append")]
    only = await client.get(BLOCKS, params={**SESSION, "name": "human"})
    assert [b["name"] for b in only.json()["blocks"]] == ["human"]


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"edit": "append"}, 422, "text"),
    ({"edit": "append", "text": "x", "value": "y"}, 422, "value"),
    ({"edit": "shout", "text": "x"}, 422, "edit"),
    ({"edit": "append", "text": "x" * 61}, 422, "value"),
    ({"edit": "replace", "old": "absent", "new": "x"}, 422, "old"),
    ({"edit": "append", "text": 5}, 422, "body.text"),
    ({"edit": "append", "text": "x", "expected_version": -1}, 422, "expected_version"),
    ({"edit": "append", "text": "x", "colour": "red"}, 422, "body"),
])
async def test_bad_edits_are_typed_422s(http: tuple[httpx.AsyncClient, dict[str, str]],
                                        body: dict[str, object], status: int,
                                        field: str) -> None:
    client, _ = http
    response = await client.post(BLOCKS + "/human/edits", params=SESSION, json=body)
    assert response.status_code == status, response.text
    assert response.json()["field"] == field
    assert (await client.get(BLOCKS, params=SESSION)).json()["blocks"][1]["version"] == 0


async def test_unknown_blocks_and_other_callers_are_refused(
        http: tuple[httpx.AsyncClient, dict[str, str]]) -> None:
    client, tokens = http
    missing = await client.post(BLOCKS + "/notes/edits", params=SESSION,
                                json={"edit": "append", "text": "x"})
    assert missing.status_code == 404
    bad_name = await client.get(BLOCKS, params={**SESSION, "name": "No Such"})
    assert bad_name.status_code == 422
    reader = await client.post(BLOCKS + "/human/edits", params=SESSION,
                               json={"edit": "append", "text": "x"},
                               headers={"Authorization": f"Bearer {tokens['reader']}"})
    assert reader.status_code == 403
    other = await client.get(BLOCKS, params=SESSION,
                             headers={"Authorization": f"Bearer {tokens['globex']}"})
    assert other.status_code == 403
    unknown = await client.get(BLOCKS, params={**SESSION, "colour": "red"})
    assert unknown.status_code == 422


async def test_a_server_without_blocks_answers_501(tmp_path: Path) -> None:
    manager = GovernedMemoryManager.from_plugins("native", {"backend": "memory"})
    keys = ApiKeyStore(tmp_path / "keys.db")
    async with manager, keys:
        credentials = await issue_credentials(keys)
        app = create_app(manager, BearerAuthenticator(keys, JwtVerifier(JWT)),
                         max_body_bytes=4096, tiers=MemoryTiers(long_term=manager))
        async with httpx.AsyncClient(base_url="http://service.test",
                                     transport=httpx.ASGITransport(app=app)) as client:
            response = await client.get(BLOCKS, params=SESSION, headers={
                "Authorization": f"Bearer {credentials.alice}"})
    assert response.status_code == 501
    assert response.json()["code"] == "capability_unsupported"


async def test_erasing_a_user_over_rest_erases_their_blocks(
        http: tuple[httpx.AsyncClient, dict[str, str]]) -> None:
    client, tokens = http
    await client.post(BLOCKS + "/human/edits", params=SESSION,
                      json={"edit": "append", "text": "Name: Alice"})
    erased = await client.delete("/v1/tenants/acme/users/alice",
                                 headers={"Authorization": f"Bearer {tokens['admin']}"})
    assert erased.status_code == 200, erased.text
    assert erased.json()["user_id"] == "alice"
    after = await client.get(BLOCKS, params=SESSION)
    assert [b["version"] for b in after.json()["blocks"]] == [0, 0]
