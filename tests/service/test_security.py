"""Authentication and isolation over the wire: 401 for every route without valid
credentials, the manager's own refusal for another tenant, bodies refused by size and
shape, and no credential in logs or events."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator

import jwt
import pytest
from governed_memory import GovernedMemoryManager, MemoryScopeError, Principal, Scope
from governed_memory.converter import unstructure
from governed_memory_service import AuthenticationError
from governed_memory_service.routes import ENDPOINTS
from service_support import JWT, JWT_SECRET, Service

ALICE = Scope("acme", user_id="alice")
BODIES = {"add": {"content": "x"}, "search": {"query": "plan"}, "update": {"content": "x"}}
RECORD_FAMILY = [e for e in ENDPOINTS if e.operation_id in
                 ("add", "list", "search", "get", "update", "delete", "history")]
"""The routes of one record scope; the other long-term routes (review, erasure, replay,
multi-scope search) are checked against the manager's own refusal, which is not always
a 403, in test_long_term_routes.py."""


def _path(template: str, record_id: str = "01ABCDEF") -> str:
    return (template.replace("{tenant}", "acme").replace("{record_id}", record_id)
            .replace("{user_id}", "alice").replace("{snapshot_id}", "snap_x"))


def token(**overrides: object) -> str:
    claims: dict[str, object] = {"iss": JWT.issuer, "aud": JWT.audience, "sub": "user:alice",
                                 "tenant_id": "acme", "user_id": "alice",
                                 "permissions": "memory:read memory:write openid",
                                 "exp": int(time.time()) + 300}
    key = str(overrides.pop("key", JWT_SECRET))
    algorithm = str(overrides.pop("algorithm", "HS256"))
    claims.update(overrides)
    return jwt.encode({k: v for k, v in claims.items() if v is not None}, key,
                      algorithm=algorithm)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=[e.operation_id for e in ENDPOINTS])
@pytest.mark.parametrize("credential", [None, "gmk_0123456789abcdef_wrong", "not-a-token",
                                        "a.b.c"])
async def test_every_route_refuses_missing_or_bad_credentials(
        service: Service, endpoint: object, credential: str | None) -> None:
    async with service.http(credential) as http:
        response = await http.request(endpoint.method, _path(endpoint.path),  # type: ignore[attr-defined]
                                       json={"content": "x", "query": "x"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith('Bearer realm="governed-memory"')
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "unauthenticated"
    assert response.json()["detail"] == "valid credentials are required"


async def test_unknown_revoked_and_wrong_secret_keys_look_the_same(service: Service) -> None:
    issued = await service.keys.create(tenant_id="acme", kind="service",
                                       permissions=["memory:read"])
    key_id = issued.key.key_id
    wrong_secret = f"gmk_{key_id}_" + "x" * 43
    assert await service.keys.revoke(key_id)
    bodies = []
    for credential in (issued.token, wrong_secret, "gmk_ffffffffffffffff_" + "y" * 43):
        async with service.http(credential) as http:
            response = await http.get("/v1/tenants/acme/memories")
        bodies.append((response.status_code, response.json(),
                       response.headers["www-authenticate"]))
    assert bodies[0] == bodies[1] == bodies[2]
    assert bodies[0][0] == 401


@pytest.mark.parametrize("endpoint", RECORD_FAMILY,
                         ids=[e.operation_id for e in RECORD_FAMILY])
async def test_another_tenants_key_gets_the_managers_refusal(service: Service,
                                                             endpoint: object) -> None:
    record = await service.manager.add(
        Principal("user:alice", "user", tenant_id="acme", user_id="alice",
                  permissions=["memory:write"]), ALICE, "acme's secret plan")
    bob = Principal("user:bob", "user", tenant_id="globex", user_id="bob",
                    permissions=["memory:read", "memory:write", "memory:delete"])
    with pytest.raises(MemoryScopeError) as managers:
        await service.manager.get(bob, ALICE, record.id)
    answers = []
    for record_id in (record.id, "01NOSUCHRECORD0000000000000"):
        async with service.http(service.bob_other_tenant) as http:
            response = await http.request(
                endpoint.method, _path(endpoint.path, record_id),  # type: ignore[attr-defined]
                params={"user_id": "alice"}, json=BODIES.get(endpoint.operation_id))  # type: ignore[attr-defined]
        answers.append((response.status_code, response.json()))
    assert answers[0] == answers[1], "existence must not change the answer"
    status, problem = answers[0]
    assert status == 403 and problem["code"] == "scope_denied"
    assert problem["detail"] == str(managers.value)
    assert "secret plan" not in json.dumps(problem)


async def test_jwt_bearer_maps_claims_to_the_principal(service: Service) -> None:
    async with service.client(token()) as client:
        record = await client.add(ALICE, "from a token")
        assert (await client.get(ALICE, record.id)).content == "from a token"
        # The token grants no memory:delete (openid is ignored, not an error).
        with pytest.raises(MemoryScopeError):
            await client.delete(ALICE, record.id)


@pytest.mark.parametrize("bad", [
    token(aud="someone-else"),
    token(exp=int(time.time()) - 60),
    token(iss="https://evil.test"),
    token(key="another-secret-" + "k" * 64),
    token(exp=None),
    token(tenant_id=None),
    token(algorithm="HS512"),
    token(kind="overlord"),
], ids=["audience", "expired", "issuer", "signature", "no-exp", "no-tenant", "algorithm",
        "bad-kind"])
async def test_bad_tokens_are_refused(service: Service, bad: str) -> None:
    async with service.client(bad) as client:
        with pytest.raises(AuthenticationError):
            await client.list(ALICE)


async def test_a_token_for_another_tenant_gets_the_managers_refusal(service: Service) -> None:
    async with service.client(token(tenant_id="globex", user_id="bob")) as client:
        with pytest.raises(MemoryScopeError):
            await client.list(ALICE)


async def test_a_body_over_the_limit_is_413_even_without_content_length(
        service: Service) -> None:
    big = json.dumps({"content": "x" * 10_000}).encode()

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(big), 1000):
            yield big[start:start + 1000]

    async with service.http(service.alice) as http:
        declared = await http.post("/v1/tenants/acme/memories", params={"user_id": "alice"},
                                   content=big, headers={"content-type": "application/json"})
        streamed = await http.post("/v1/tenants/acme/memories", params={"user_id": "alice"},
                                   content=chunks(),
                                   headers={"content-type": "application/json"})
    for response in (declared, streamed):
        assert response.status_code == 413
        assert response.json()["code"] == "payload_too_large"
    assert "content-length" not in streamed.request.headers
    assert (await service.manager.list(_alice(), ALICE)).items == ()


@pytest.mark.parametrize(("body", "field"), [
    (b"{not json", "body"),
    (b"[1, 2]", "body"),
    (b'{"content": 5}', "body.content"),
    (b'{"content": "x", "entity_ids": "abc"}', "body.entity_ids"),
    (b'{"content": "x", "memory_type": "gossip"}', "body.memory_type"),
    (b'{"content": "x", "surprise": true}', "body"),
    (b'{}', "body.content"),
])
async def test_malformed_bodies_are_422_naming_the_field(service: Service, body: bytes,
                                                         field: str) -> None:
    async with service.http(service.alice) as http:
        response = await http.post("/v1/tenants/acme/memories", params={"user_id": "alice"},
                                   content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["code"] == "validation"
    assert response.json()["field"] == field


async def test_no_credential_reaches_logs_or_events(service: Service,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    issued = await service.keys.create(tenant_id="acme", kind="user", user_id="alice",
                                       permissions=["memory:read", "memory:write"])
    bearer = token()
    secrets = [issued.token, issued.token.rsplit("_", 1)[1], service.alice, bearer]
    for credential in (issued.token, bearer, "gmk_0123456789abcdef_nope"):
        async with service.client(credential) as client:
            try:
                record = await client.add(ALICE, "remember this")
                await client.search(ALICE, "remember")
                await client.get(ALICE, record.id)
            except AuthenticationError:
                pass
    assert issued.token not in repr(issued)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    events = json.dumps([unstructure(e) for e in service.sink.events], default=str)
    assert service.sink.events
    for secret in secrets:
        assert secret not in logged
        assert secret not in events


def _alice() -> Principal:
    return Principal("user:alice", "user", tenant_id="acme", user_id="alice",
                     permissions=["memory:read"])


async def test_keys_list_and_revoke(service: Service) -> None:
    issued = await service.keys.create(tenant_id="acme", kind="service",
                                       permissions=["memory:read"], label="indexer")
    listed = {k.key_id: k for k in await service.keys.list(tenant_id="acme")}
    assert listed[issued.key.key_id].label == "indexer"
    assert all(k.tenant_id == "acme" for k in listed.values())
    assert await service.keys.verify(issued.token) is not None
    assert await service.keys.revoke(issued.key.key_id)
    assert not await service.keys.revoke(issued.key.key_id)
    assert await service.keys.verify(issued.token) is None


def test_manager_type_is_the_librarys() -> None:
    assert GovernedMemoryManager.__module__ == "governed_memory.manager"
