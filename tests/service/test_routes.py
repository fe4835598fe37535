"""Every route through the remote client and raw HTTP, governed by the manager."""

from __future__ import annotations

import pytest
from governed_memory import MemoryNotFoundError, MemoryScopeError, Scope
from governed_memory.errors import MemoryConflictError, MemoryValidationError
from governed_memory_service import PreconditionFailedError
from governed_memory_service.openapi import OPERATIONAL_PATHS, openapi_document
from governed_memory_service.routes import ENDPOINTS
from service_support import Service

ALICE = Scope("acme", user_id="alice")


async def test_the_client_covers_every_route(service: Service) -> None:
    async with service.client(service.alice) as client:
        record = await client.add(ALICE, "Alice prefers dark mode", memory_type="preference",
                                  metadata={"ui": "dark"})
        assert (await client.get(ALICE, record.id)) == record
        page = await client.list(ALICE, limit=1)
        assert [r.id for r in page.items] == [record.id]
        result = await client.search(ALICE, "dark mode")
        assert [h.record.id for h in result.hits] == [record.id]
        updated = await client.update(ALICE, record.id, expected_revision=record.revision,
                                      content="Alice prefers dark mode, high contrast")
        assert updated.version == 2
        versions = await client.history(ALICE, record.id)
        assert [v.record.version for v in versions] == [1, 2]
        deleted = await client.delete(ALICE, record.id, expected_revision=updated.revision)
        assert deleted.record_id == record.id
        with pytest.raises(MemoryNotFoundError):
            await client.get(ALICE, record.id)


async def test_list_pages_with_a_cursor(service: Service) -> None:
    async with service.client(service.alice) as client:
        ids = [(await client.add(ALICE, f"note {i}")).id for i in range(5)]
        seen, cursor = [], None
        while True:
            page = await client.list(ALICE, limit=2, cursor=cursor)
            seen += [r.id for r in page.items]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert sorted(seen) == sorted(ids)


async def test_etag_and_if_match(service: Service) -> None:
    async with service.http(service.alice) as http:
        created = await http.post("/v1/tenants/acme/memories", params={"user_id": "alice"},
                                  json={"content": "first"})
        assert created.status_code == 201
        etag = created.headers["etag"]
        assert etag == f'"{created.json()["revision"]}"'
        path = f"/v1/tenants/acme/memories/{created.json()['id']}"
        got = await http.get(path, params={"user_id": "alice"})
        assert got.headers["etag"] == etag
        ok = await http.patch(path, params={"user_id": "alice"}, json={"content": "second"},
                              headers={"If-Match": etag})
        assert ok.status_code == 200 and ok.headers["etag"] != etag
        stale = await http.patch(path, params={"user_id": "alice"}, json={"content": "third"},
                                 headers={"If-Match": etag})
        assert stale.status_code == 412
        assert stale.headers["content-type"] == "application/problem+json"
        assert stale.json()["code"] == "precondition_failed"
        stale_delete = await http.delete(path, params={"user_id": "alice"},
                                         headers={"If-Match": etag})
        assert stale_delete.status_code == 412
    async with service.client(service.alice) as client:
        record = await client.get(ALICE, created.json()["id"])
        assert record.content == "second"
        with pytest.raises(PreconditionFailedError) as caught:
            await client.update(ALICE, record.id, expected_revision="r-stale", content="x")
        assert isinstance(caught.value, MemoryConflictError)


async def test_idempotent_retry_returns_the_first_result(service: Service) -> None:
    async with service.http(service.alice) as http:
        headers = {"Idempotency-Key": "retry-1"}
        first = await http.post("/v1/tenants/acme/memories", params={"user_id": "alice"},
                                json={"content": "once"}, headers=headers)
        again = await http.post("/v1/tenants/acme/memories", params={"user_id": "alice"},
                                json={"content": "once"}, headers=headers)
        assert first.status_code == again.status_code == 201
        assert first.json() == again.json()
        other = await http.post("/v1/tenants/acme/memories", params={"user_id": "alice"},
                                json={"content": "different"}, headers=headers)
        assert other.status_code == 409 and other.json()["code"] == "conflict"
    async with service.client(service.alice) as client:
        assert len((await client.list(ALICE)).items) == 1


async def test_openapi_lists_every_route(service: Service) -> None:
    document = openapi_document()
    routes = service.app.routes  # type: ignore[attr-defined]
    assert len(routes) >= len(ENDPOINTS) + len(OPERATIONAL_PATHS)
    described = {(path, method) for path, ops in document["paths"].items() for method in ops}
    assert {(e.path, e.method.lower()) for e in ENDPOINTS} <= described
    for route in routes:
        for method in set(route.methods) - {"HEAD"}:
            assert method.lower() in document["paths"][route.path], (method, route.path)
    async with service.http() as http:
        served = await http.get("/openapi.json")
        assert served.json() == document


async def test_health_and_readiness(service: Service) -> None:
    async with service.http() as http:
        assert (await http.get("/healthz")).json() == {"status": "ok"}
        ready = await http.get("/readyz")
        assert ready.status_code == 200 and ready.json()["provider"] == "native"


async def test_validation_errors_name_the_field(service: Service) -> None:
    async with service.client(service.alice) as client:
        with pytest.raises(MemoryValidationError) as caught:
            await client.add(ALICE, "x" * 3000 * 2)
        assert caught.value.field == "body"
    async with service.http(service.alice) as http:
        wrong = await http.post("/v1/tenants/acme/memories", params={"user_id": "alice"},
                                json={"content": "x", "importance": "high"})
        assert wrong.status_code == 422 and wrong.json()["field"] == "body.importance"
        bad_query = await http.get("/v1/tenants/acme/memories", params={"usr_id": "alice"})
        assert bad_query.status_code == 422 and bad_query.json()["field"] == "query.usr_id"


async def test_a_read_only_key_cannot_write(service: Service) -> None:
    async with service.client(service.reader) as client:
        with pytest.raises(MemoryScopeError):
            await client.add(ALICE, "reader may not write")


def test_the_framework_never_imports_the_service() -> None:
    from pathlib import Path

    framework = Path(__file__).resolve().parents[2] / "framework"
    offenders = [str(p) for p in framework.rglob("*.py")
                 if "governed_memory_service" in p.read_text(encoding="utf-8")]
    assert offenders == []


async def test_a_search_carries_its_ranking_options(service: Service) -> None:
    from governed_memory import MemoryValidationError, Scope
    from governed_memory.ranking_options import RankingOptions

    scope = Scope("acme", user_id="alice")
    async with service.client(service.alice) as client:
        record = await client.add(scope, "Alice moved to Lisbon")
        found = await client.search(scope, "Lisbon",
                                    ranking=RankingOptions(weights={"importance": 0.5}))
        assert found.hits[0].record.id == record.id
        replayed = await client.replay(found.snapshot_id)  # type: ignore[arg-type]
        assert replayed.ranking["weights"]["importance"] == 0.5
        with pytest.raises(MemoryValidationError) as refused:
            await client.search([scope], "Lisbon",
                                ranking=RankingOptions(weights={"lexical": 9.0}))
        assert refused.value.field == "ranking.weights.lexical"
