"""Trace context across the wire, and credentials kept out of every span, event and log
line a request produces."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import httpx
import jwt
import pytest
from governed_memory import GovernedMemoryManager
from governed_memory.converter import unstructure
from governed_memory.events import InMemoryEventSink
from governed_memory.tiers import InMemoryTurnStore, InMemoryWorkingStateStore, MemoryTiers
from governed_memory_service import ApiKeyStore, BearerAuthenticator, JwtVerifier, create_app
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from service_support import ALL, JWT, JWT_SECRET

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


@attrs.frozen
class Traced:
    app: object
    spans: InMemorySpanExporter
    sink: InMemoryEventSink
    key: str
    key_secret: str


@pytest.fixture
async def traced(tmp_path: Path) -> AsyncIterator[Traced]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    sink = InMemoryEventSink()
    manager = GovernedMemoryManager.from_plugins(
        "native", {"backend": "sqlite", "path": str(tmp_path / "m.db")}, sinks=[sink],
        tracer_provider=provider)
    async with manager, ApiKeyStore(tmp_path / "keys.db") as keys:
        issued = await keys.create(tenant_id="acme", kind="user", user_id="alice",
                                   permissions=ALL)
        tiers = MemoryTiers(long_term=manager, turns=InMemoryTurnStore(),
                            working=InMemoryWorkingStateStore())
        app = create_app(manager, BearerAuthenticator(keys, JwtVerifier(JWT)), tiers=tiers)
        yield Traced(app=app, spans=spans, sink=sink, key=issued.token,
                     key_secret=issued.token.rpartition("_")[2])


def _http(app: object, credential: str, **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url="http://service.test",
                             headers={"Authorization": f"Bearer {credential}", **headers},
                             transport=httpx.ASGITransport(app=app))  # type: ignore[arg-type]


def _operation_spans(spans: InMemorySpanExporter) -> list[object]:
    return [s for s in spans.get_finished_spans()
            if s.parent is None or (s.parent.span_id != 0 and s.name != "x")]


async def test_an_incoming_traceparent_parents_the_operations_span(traced: Traced) -> None:
    header = f"00-{TRACE_ID}-{PARENT_ID}-01"
    async with _http(traced.app, traced.key, traceparent=header) as http:
        response = await http.post("/v1/tenants/acme/memories", params={"user_id": "alice"},
                                   json={"content": "traced write"})
    assert response.status_code == 201
    finished = traced.spans.get_finished_spans()
    roots = [s for s in finished if s.parent is not None and s.parent.is_remote]
    assert len(roots) == 1, [s.name for s in finished]
    operation = roots[0]
    assert format(operation.context.trace_id, "032x") == TRACE_ID
    assert format(operation.parent.span_id, "016x") == PARENT_ID  # type: ignore[union-attr]
    # Its children (the policy decision, ...) are in the same trace.
    assert {format(s.context.trace_id, "032x") for s in finished} == {TRACE_ID}


@pytest.mark.parametrize("header", [None, "garbage", f"00-{'0' * 32}-{PARENT_ID}-01"])
async def test_without_a_valid_traceparent_the_operation_starts_a_trace(
        traced: Traced, header: str | None) -> None:
    extra = {} if header is None else {"traceparent": header}
    async with _http(traced.app, traced.key, **extra) as http:
        response = await http.get("/v1/tenants/acme/memories", params={"user_id": "alice"})
    assert response.status_code == 200
    finished = traced.spans.get_finished_spans()
    assert finished and all(s.parent is None or not s.parent.is_remote for s in finished)
    assert all(format(s.context.trace_id, "032x") != TRACE_ID for s in finished)


async def test_requests_span_the_same_trace_only_while_they_run(traced: Traced) -> None:
    async with _http(traced.app, traced.key,
                     traceparent=f"00-{TRACE_ID}-{PARENT_ID}-01") as http:
        await http.get("/v1/tenants/acme/memories", params={"user_id": "alice"})
    traced.spans.clear()
    async with _http(traced.app, traced.key) as http:
        await http.get("/v1/tenants/acme/memories", params={"user_id": "alice"})
    assert all(format(s.context.trace_id, "032x") != TRACE_ID
               for s in traced.spans.get_finished_spans()), "the context leaked"


async def test_no_credential_reaches_spans_events_or_logs(
        traced: Traced, caplog: pytest.LogCaptureFixture) -> None:
    token = jwt.encode({"iss": JWT.issuer, "aud": JWT.audience, "sub": "user:alice",
                        "tenant_id": "acme", "user_id": "alice",
                        "permissions": "memory:read memory:write memory:delete",
                        "exp": int(time.time()) + 300}, JWT_SECRET, algorithm="HS256")
    expired = jwt.encode({"iss": JWT.issuer, "aud": JWT.audience, "sub": "user:alice",
                          "tenant_id": "acme", "exp": int(time.time()) - 60}, JWT_SECRET,
                         algorithm="HS256")
    scope = {"user_id": "alice"}
    caplog.set_level(logging.DEBUG)
    for credential in (traced.key, token, expired, traced.key + "x"):
        async with _http(traced.app, credential) as http:
            added = await http.post("/v1/tenants/acme/memories", params=scope,
                                    json={"content": "a plain memory"})
            if added.status_code == 201:
                record_id = added.json()["id"]
                await http.post("/v1/tenants/acme/memories/search", params=scope,
                                json={"query": "plain"})
                await http.patch(f"/v1/tenants/acme/memories/{record_id}", params=scope,
                                 json={"content": "changed"})
                await http.post("/v1/tenants/acme/turns",
                                params={**scope, "session_id": "s"},
                                json={"role": "user", "content": "hi"})
                await http.delete(f"/v1/tenants/acme/memories/{record_id}", params=scope)
    recorded = json.dumps([
        [s.name, dict(s.attributes or {}), [dict(e.attributes or {}) for e in s.events]]
        for s in traced.spans.get_finished_spans()], default=str)
    recorded += json.dumps([unstructure(e) for e in traced.sink.events], default=str)
    recorded += "\n".join(r.getMessage() + repr(r.args) for r in caplog.records)
    assert traced.spans.get_finished_spans() and traced.sink.events
    for secret in (traced.key, traced.key_secret, token, expired, JWT_SECRET,
                   token.split(".")[2]):
        assert secret not in recorded

