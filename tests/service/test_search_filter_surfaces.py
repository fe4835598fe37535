"""The read-time filters (visibility, provenance source, sensitivity) on every remote
surface: the REST search and multi-search bodies, the remote client, and the MCP
``recall`` tool, each answering what the manager answers, with malformed filters
refused naming their field."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from governed_memory import Principal, PrincipalKind, Provenance, Scope, Visibility
from governed_memory.errors import MemoryValidationError
from governed_memory.records import MemoryRecord
from governed_memory.turncontext.render import CLOSE, OPEN
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from service_support import Service

ALICE = Scope("acme", user_id="alice")
WORK = Scope("acme", user_id="alice", project_id="work")
ALICE_P = Principal("user:alice", PrincipalKind.USER, "acme", "alice")


async def _stored(service: Service) -> dict[str, MemoryRecord]:
    """Noise that outranks the others and matches no filter, then one record per filter."""
    add = service.manager.add
    for _ in range(4):
        await add(ALICE_P, ALICE, "harbour harbour harbour harbour",
                  provenance=Provenance(source_type="user"),
                  metadata={"sensitivity": "restricted"})
    return {
        "shared": await add(ALICE_P, ALICE, "the harbour opens at dawn for the ferry crews",
                            visibility=Visibility.SHARED,
                            provenance=Provenance(source_type="user"),
                            metadata={"sensitivity": "restricted"}),
        "tool": await add(ALICE_P, ALICE, "a harbour tide table imported from the tool feed",
                          provenance=Provenance(source_type="tool"),
                          metadata={"sensitivity": "restricted"}),
        "public": await add(ALICE_P, ALICE, "the harbour festival poster for the town square",
                            provenance=Provenance(source_type="user"),
                            metadata={"sensitivity": "public"}),
        "work": await add(ALICE_P, WORK, "the harbour project budget for the quarter",
                          visibility=Visibility.SHARED,
                          provenance=Provenance(source_type="tool"),
                          metadata={"sensitivity": "public"}),
    }


FILTERS: list[tuple[dict[str, Any], str]] = [
    ({"visibility": "shared"}, "shared"),
    ({"source_types": ["tool"]}, "tool"),
    ({"sensitivity": ["public"]}, "public"),
]


async def test_the_client_and_the_routes_filter_before_the_top_k(service: Service) -> None:
    stored = await _stored(service)
    async with service.client(service.alice) as alice, service.http(service.alice) as http:
        for filters, wanted in FILTERS:
            one = await alice.search(ALICE, "harbour", limit=1, **filters)
            assert [hit.record.id for hit in one.hits] == [stored[wanted].id], filters
            raw = await http.post("/v1/tenants/acme/memories/search?user_id=alice",
                                  json={"query": "harbour", "limit": 1, **filters})
            assert raw.status_code == 200, raw.text
            assert [hit["record"]["id"] for hit in raw.json()["hits"]] == [stored[wanted].id]
        both = await alice.search([ALICE, WORK], "harbour", limit=2, visibility="shared",
                                  sensitivity=["public"])
        assert [hit.record.id for hit in both.hits] == [stored["work"].id]
        kept = await alice.search([ALICE, WORK], "harbour", limit=3,
                                  exclude_sensitivity=["restricted"])
        assert {hit.record.id for hit in kept.hits} == {stored["public"].id,
                                                         stored["work"].id}
        direct = await service.manager.search(ALICE_P, [ALICE, WORK], "harbour", limit=3,
                                              exclude_sensitivity=["restricted"])
        assert [hit.record.id for hit in kept.hits] == [hit.record.id for hit in direct.hits]
        with pytest.raises(MemoryValidationError) as refused:
            await alice.search(ALICE, "harbour", sensitivity=["x"], exclude_sensitivity=["x"])
        assert refused.value.field == "exclude_sensitivity"
        with pytest.raises(MemoryValidationError) as refused:
            await alice.search(ALICE, "harbour", visibility="public")
        assert refused.value.field == "visibility"
        answer = await http.post("/v1/tenants/acme/memories/search?user_id=alice",
                                 json={"query": "harbour", "visibility": "public"})
        assert answer.status_code == 422 and "visibility" in answer.text
        answer = await http.post("/v1/tenants/acme/memories/multi-search",
                                 json={"query": "harbour", "scopes": [{}],
                                       "source_types": [""]})
        assert answer.status_code == 422
        assert answer.json()["field"] == "source_types[0]", answer.text


@asynccontextmanager
async def _mcp(service: Service) -> AsyncIterator[Client]:
    app: Any = service.app
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app),
                              headers={"Authorization": f"Bearer {service.alice}"})
    transport = streamable_http_client("http://service.test/mcp", http_client=http)
    async with app.router.lifespan_context(app), http, Client(transport, cache=None) as client:
        yield client


def _recalled(result: CallToolResult) -> list[str]:
    assert not result.is_error, result.content
    (block,) = result.content
    assert block.type == "text"
    lines = block.text.split("\n")
    if OPEN not in lines:
        return []
    return [json.loads(line)["id"] for line in lines[2:lines.index(CLOSE)]]


async def test_the_recall_tool_takes_the_filters(service: Service) -> None:
    stored = await _stored(service)
    async with _mcp(service) as client:
        for filters, wanted in FILTERS:
            found = await client.call_tool("recall", {"query": "harbour", "limit": 1,
                                                      **filters})
            assert _recalled(found) == [stored[wanted].id], filters
        kept = await client.call_tool("recall", {"query": "harbour", "limit": 5,
                                                 "exclude_sensitivity": ["restricted"]})
        assert _recalled(kept) == [stored["public"].id]
        refused = await client.call_tool("recall", {"query": "harbour",
                                                    "visibility": "public"})
        assert refused.is_error
        assert isinstance(refused.structured_content, dict)
        assert refused.structured_content["field"] == "arguments.visibility"
