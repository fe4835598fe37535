"""MCP tools refuse arguments they do not declare, as REST refuses unknown query
parameters, on both transports.

The outside trial: ``recall`` with ``tenant_id``, ``principal`` or ``scope`` ran in the
caller's own scope as if the argument had been honoured (the SDK ignores arguments a
tool does not declare), while the REST routes answered 422. Now each is a validation
error naming the argument, before the tool runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
from governed_memory import Permission, Principal, PrincipalKind, Scope
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from service_support import Service

CALLS: dict[str, dict[str, Any]] = {
    "remember": {"content": "a note"},
    "recall": {"query": "note"},
    "update": {"memory_id": "01NOSUCHMEMORY", "content": "new"},
    "forget": {"memory_id": "01NOSUCHMEMORY"},
    "list_memories": {},
}
UNKNOWN: dict[str, Any] = {"tenant_id": "globex", "principal": "user:bob",
                           "scope": {"tenant_id": "globex"}, "userid": "bob"}


def refusal(result: CallToolResult, name: str) -> dict[str, Any]:
    assert result.is_error, result.content
    problem = result.structured_content
    assert isinstance(problem, dict)
    assert problem["code"] == "validation", problem
    assert problem["field"] == f"arguments.{name}", problem
    assert f'"{name}"' in problem["detail"], problem
    return problem


async def refuses_every_unknown_argument(client: Client) -> None:
    for tool in (await client.list_tools()).tools:
        assert tool.input_schema.get("additionalProperties") is False, tool.name
    for tool, arguments in CALLS.items():
        for name, value in UNKNOWN.items():
            problem = refusal(await client.call_tool(tool, {**arguments, name: value}), name)
            if name in ("tenant_id", "principal"):
                assert "credentials" in problem["detail"]
    # Two at once: both are named in the detail, the first in the field.
    both = await client.call_tool("recall", {"query": "x", "tenant_id": "g", "agentid": "a"})
    assert '"agentid"' in refusal(both, "agentid")["detail"]
    # Nothing ran: no memory was written by any refused remember.
    listed = await client.call_tool("list_memories", {})
    assert not listed.is_error
    assert "a note" not in listed.content[0].text  # type: ignore[union-attr]


@asynccontextmanager
async def http_client(service: Service) -> AsyncIterator[Client]:
    app: Any = service.app
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app),
                              headers={"Authorization": f"Bearer {service.alice}"})
    transport = streamable_http_client("http://service.test/mcp", http_client=http)
    async with app.router.lifespan_context(app), http, Client(transport, cache=None) as client:
        yield client


async def test_unknown_arguments_are_refused_over_http(service: Service) -> None:
    async with http_client(service) as client:
        await refuses_every_unknown_argument(client)
    alice = Principal("user:alice", PrincipalKind.USER, "acme", "alice",
                      frozenset({Permission.READ}))
    assert (await service.manager.list(alice, Scope("acme", user_id="alice"))).items == ()


async def test_unknown_arguments_are_refused_over_stdio(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "governed_memory_service", "mcp", "--profile", "local@1.0.0",
              "--db", str(tmp_path / "memory.db"), "--tenant", "acme", "--user", "alice"],
        env={**os.environ, "GOVERNED_MEMORY_HOME": str(tmp_path)})
    async with Client(params, cache=None) as client:
        await refuses_every_unknown_argument(client)


async def test_shared_reaches_the_scope_without_a_user(service: Service) -> None:
    """``shared: true`` is MCP's spelling of REST's ``shared=true``: the project's shared
    memories, which a user may read; with ``user_id`` it is refused."""
    operator = await service.keys.create(tenant_id="acme", kind="service",
                                         principal_id="service:ops",
                                         permissions=[Permission.READ, Permission.WRITE,
                                                      Permission.ADMIN])
    async with service.http(operator.token) as http:
        stored = await http.post("/v1/tenants/acme/memories", params={"project_id": "kites"},
                                 json={"content": "the team flies kites on Fridays"})
        assert stored.status_code == 201, stored.text
    async with http_client(service) as client:
        own = await client.call_tool("recall", {"query": "kites", "project_id": "kites"})
        assert "Fridays" not in own.content[0].text  # type: ignore[union-attr]
        shared = await client.call_tool("recall", {"query": "kites", "project_id": "kites",
                                                   "shared": True})
        assert not shared.is_error
        assert "Fridays" in shared.content[0].text  # type: ignore[union-attr]
        clash = await client.call_tool("recall", {"query": "kites", "shared": True,
                                                  "user_id": "alice"})
        assert clash.is_error and clash.structured_content is not None
        assert clash.structured_content["field"] == "arguments.shared"
