"""The audit tools over MCP: an auditor's reads of the trail, answered as the REST audit
routes answer them, governed and recorded the same way, refused the same way.

An auditor (``audit:read``, bound to no user) reads its tenant's events, a subject
report, the verification with its checkpoint and both proofs, over streamable HTTP with
a real key; the answers equal REST's for the same question; a principal holding every
memory permission but not ``audit:read`` is refused with REST's ``scope_denied``; bad
input is a typed validation error naming the argument; a time ago with a leading minus
(``-24h``) reads the same window through Python, REST and MCP.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import httpx2
import pytest
from governed_memory import GovernedMemoryManager, Principal, Scope
from governed_memory.audit import AuditSink, EventFilter, query
from governed_memory.audit.proofs import (
    ConsistencyProof,
    InclusionProof,
    TreeCheckpoint,
    verify_consistency,
    verify_inclusion,
)
from governed_memory.audit_requests import AuditFilter, GovernedAudit
from governed_memory.clock import ManualClock
from governed_memory.events import InMemoryEventSink
from governed_memory_service import ApiKeyStore, BearerAuthenticator, create_app
from governed_memory_service.audit_routes import AUDIT_ENDPOINTS
from governed_memory_service.client_calls import Calls
from governed_memory_service.mcp_audit_tools import AUDIT_DESCRIPTIONS
from governed_memory_service.mcp_tools import build_mcp_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

AUDIT_TOOLS = {"audit_query", "audit_summary", "audit_report", "audit_verify", "audit_prove",
               "audit_consistency"}
ALICE = Principal("user:alice", "user", tenant_id="acme", user_id="alice",
                  permissions=["memory:read", "memory:write"])
BOB = Principal("user:bob", "user", tenant_id="globex", user_id="bob",
                permissions=["memory:read", "memory:write"])
AUDITOR = Principal("svc:auditor", "service", tenant_id="acme", permissions=["audit:read"])
ALICE_SCOPE = Scope("acme", user_id="alice")
SECRET = "prefers oolong tea from the Wuyi mountains"
DAY = 86_400.0


@attrs.frozen(kw_only=True)
class Audited:
    manager: GovernedMemoryManager
    clock: ManualClock
    trail: Path
    app: Any
    auditor: str
    admin: str
    user_auditor: str

    def http(self, credential: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url="http://service.test",
                                 headers={"Authorization": f"Bearer {credential}"},
                                 transport=httpx.ASGITransport(app=self.app))

    @asynccontextmanager
    async def mcp(self, credential: str) -> AsyncIterator[Client]:
        """The app's ``/mcp``, as an agent holding ``credential`` reaches it."""
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=self.app),
                                  headers={"Authorization": f"Bearer {credential}"})
        transport = streamable_http_client("http://service.test/mcp", http_client=http)
        async with (self.app.router.lifespan_context(self.app), http,
                    Client(transport, cache=None) as client):
            yield client


@pytest.fixture
async def audited(tmp_path: Path) -> AsyncIterator[Audited]:
    clock = ManualClock()
    trail = tmp_path / "trail"
    manager = GovernedMemoryManager.from_plugins("native", {"backend": "memory"},
                                                 sinks=[AuditSink(trail)], clock=clock)
    async with manager, ApiKeyStore(tmp_path / "keys.db") as keys:
        auditor = await keys.create(tenant_id="acme", kind="service",
                                    principal_id="svc:auditor", permissions=["audit:read"])
        admin = await keys.create(tenant_id="acme", kind="service", principal_id="svc:admin",
                                  permissions=["memory:admin"])
        user_auditor = await keys.create(tenant_id="acme", kind="user", user_id="alice",
                                         permissions=["audit:read", "memory:read"])
        yield Audited(manager=manager, clock=clock, trail=trail,
                      app=create_app(manager, BearerAuthenticator(keys)),
                      auditor=auditor.token, admin=admin.token,
                      user_auditor=user_auditor.token)


async def record(manager: GovernedMemoryManager, trail: Path) -> dict[str, str]:
    """Memory operations of two tenants; an event id of each."""
    await manager.add(ALICE, ALICE_SCOPE, SECRET, key="tea")
    await manager.search(ALICE, ALICE_SCOPE, "oolong")
    await manager.add(BOB, Scope("globex", user_id="bob"), "globex's launch plan")
    events = [entry.event for entry in query([trail], EventFilter())]
    acme = next(e for e in events if e["tenant_id"] == "acme"
                and e["type"] == "memory.write.committed")
    globex = next(e for e in events if e["tenant_id"] == "globex")
    return {"acme": acme["event_id"], "globex": globex["event_id"]}


def answer(result: CallToolResult) -> dict[str, Any]:
    """A tool's answer, checking its text is the same JSON as its structured content."""
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    (block,) = result.content
    assert block.type == "text" and json.loads(block.text) == result.structured_content
    return result.structured_content


def problem(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


# -- the tool list ---------------------------------------------------------------------------


async def test_the_audit_tools_are_listed_read_only_with_strict_schemas(
        audited: Audited) -> None:
    async with audited.mcp(audited.auditor) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) >= AUDIT_TOOLS
    for name in AUDIT_TOOLS:
        tool = listed[name]
        assert tool.description and len(tool.description) > 80, name
        assert "audit:read" in tool.description, name
        schema = tool.input_schema
        assert schema["additionalProperties"] is False and "ctx" not in schema["properties"]
        assert "tenant_id" not in schema["properties"], name  # the credential's tenant
        for argument, prop in schema["properties"].items():
            assert prop.get("description"), (name, argument)
        hints = tool.annotations
        assert hints is not None and hints.read_only_hint and not hints.destructive_hint
    assert {name: sorted(listed[name].input_schema.get("required", [])) for name in
            AUDIT_TOOLS} == {"audit_query": [], "audit_summary": [],
                             "audit_report": ["subject"], "audit_verify": [],
                             "audit_prove": ["checkpoint", "event_id"],
                             "audit_consistency": ["first", "second"]}


def test_every_audit_read_is_a_tool_a_route_and_a_client_call() -> None:
    """One name per read on every surface: GovernedAudit's method ``m`` is the MCP tool
    and the client call ``audit_m``, and every REST audit route's operation is a tool."""
    reads = {name for name, _ in inspect.getmembers(GovernedAudit, inspect.iscoroutinefunction)
             if not name.startswith("_")}
    assert {f"audit_{name}" for name in reads} == AUDIT_TOOLS == set(AUDIT_DESCRIPTIONS)
    assert {endpoint.operation_id for endpoint in AUDIT_ENDPOINTS} <= AUDIT_TOOLS
    assert all(hasattr(Calls, name) for name in AUDIT_TOOLS)


async def test_a_server_over_no_trail_lists_no_audit_tools() -> None:
    """As REST answers 501 there, the server does not offer reads that cannot answer."""
    for sinks in ([], [InMemoryEventSink()]):
        manager = GovernedMemoryManager.from_plugins("native", {"backend": "memory"},
                                                     sinks=sinks)
        async with manager:
            server = build_mcp_server(manager, lambda ctx: AUDITOR)
            async with Client(server, cache=None) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert names and not names & AUDIT_TOOLS
                assert (await client.call_tool("audit_verify", {})).is_error


# -- an auditor's reads ------------------------------------------------------------------------


async def test_an_auditor_queries_reports_verifies_and_proves_over_mcp(
        audited: Audited) -> None:
    ids = await record(audited.manager, audited.trail)
    async with audited.mcp(audited.auditor) as client:
        events = answer(await client.call_tool("audit_query", {}))
        direct = [entry.event for entry in query([audited.trail], EventFilter(tenant="acme"))]
        shown = [item["event"] for item in events["events"]]
        assert shown == direct[:len(shown)] and events["next_cursor"] is None
        assert shown[-1]["type"] == "memory.audit.requested"  # this read's own
        assert {e["tenant_id"] for e in shown} == {"acme"}

        page = answer(await client.call_tool("audit_query", {"limit": 2}))
        rest = answer(await client.call_tool("audit_query", {
            "cursor": page["next_cursor"], "no_verify": True, "limit": 1000}))
        assert len(page["events"]) == 2 and rest["events"][0]["seq"] > page["next_cursor"]

        summary = answer(await client.call_tool("audit_summary", {"operation": "add"}))
        assert [(row["principal_id"], row["operations"]) for row in summary["principals"]
                ] == [("user:alice", 1)]

        report = answer(await client.call_tool("audit_report", {"subject": "alice"}))
        assert report["summary"]["written"] == 1 and report["summary"]["read"] == 1

        checked = answer(await client.call_tool("audit_verify", {}))
        assert checked["ok"] and checked["status"] == "ok"
        assert checked["verification"]["files"] == ["audit-000001.jsonl"]
        first = TreeCheckpoint.from_json(checked["checkpoint"])

        proven = answer(await client.call_tool("audit_prove", {
            "event_id": ids["acme"], "checkpoint": checked["checkpoint"]}))
        verify_inclusion(proven["event"], InclusionProof.from_json(proven["proof"]), first)
        assert proven["event"]["event_id"] == ids["acme"]

        later = answer(await client.call_tool("audit_verify", {}))
        second = TreeCheckpoint.from_json(later["checkpoint"])
        assert second.tree_size > first.tree_size
        extended = answer(await client.call_tool("audit_consistency", {
            "first": checked["checkpoint"], "second": later["checkpoint"]}))
        verify_consistency(first, second, ConsistencyProof.from_json(extended["proof"]))

        # Another tenant's event is answered as one that is not there.
        foreign = problem(await client.call_tool("audit_prove", {
            "event_id": ids["globex"], "checkpoint": checked["checkpoint"]}))
        missing = problem(await client.call_tool("audit_prove", {
            "event_id": "evt_nosuchevent.0", "checkpoint": checked["checkpoint"]}))
        assert foreign["code"] == missing["code"] == "not_found"
        assert (foreign["detail"].replace(ids["globex"], "ID")
                == missing["detail"].replace("evt_nosuchevent.0", "ID"))

    # Each read is a governed operation of the auditor's, in the trail.
    audits = [entry.event for entry in query([audited.trail], EventFilter(tenant="acme"))
              if entry.event["type"] == "memory.audit.completed"]
    assert [e["operation"] for e in audits] == [
        "audit_query", "audit_query", "audit_query", "audit_query", "audit_report",
        "audit_verify", "audit_prove", "audit_verify", "audit_prove"]
    assert {e["principal_id"] for e in audits} == {"svc:auditor"}
    # Nothing any answer held was memory content.
    text = json.dumps([events, summary, report, checked, proven])
    assert SECRET not in text and "oolong" not in text and "launch plan" not in text


async def test_the_answers_are_the_rest_routes_answers(audited: Audited) -> None:
    """The same question through REST and MCP gets the same JSON: a query of a window
    that ends before either read, and proofs of one event against fixed checkpoints."""
    ids = await record(audited.manager, audited.trail)
    until = str(audited.clock.now() + 1)
    audited.clock.advance(60)  # every read below happens after the window
    async with audited.http(audited.auditor) as http, audited.mcp(audited.auditor) as client:
        questions: list[dict[str, str | int]] = [
            {"until": until}, {"until": until, "operation": "add"},
            {"until": until, "subject": "alice", "limit": 3}]
        for params in questions:
            over_rest = await http.get("/v1/tenants/acme/audit/events", params=params)
            assert over_rest.status_code == 200, over_rest.text
            assert over_rest.json()["events"]
            assert answer(await client.call_tool("audit_query", params)) == over_rest.json()
        summed = await http.get("/v1/tenants/acme/audit/events",
                                params={"until": until, "summary": "principal"})
        assert answer(await client.call_tool("audit_summary", {"until": until})) == (
            summed.json())
        older = (await http.get("/v1/tenants/acme/audit/verify")).json()["checkpoint"]
        newer = answer(await client.call_tool("audit_verify", {}))["checkpoint"]
        body = {"event_id": ids["acme"], "checkpoint": older}
        over_rest = await http.post("/v1/tenants/acme/audit/proofs/inclusion", json=body)
        assert answer(await client.call_tool("audit_prove", body)) == over_rest.json()
        body = {"first": older, "second": newer}
        over_rest = await http.post("/v1/tenants/acme/audit/proofs/consistency", json=body)
        assert answer(await client.call_tool("audit_consistency", body)) == over_rest.json()
        # A report through REST, then through MCP: the same activities, and the second
        # also lists the first report's read of the subject.
        first = (await http.get("/v1/tenants/acme/audit/report",
                                params={"subject": "alice"})).json()
        second = answer(await client.call_tool("audit_report", {"subject": "alice"}))
        assert second["report"]["activities"][:len(first["report"]["activities"])] == (
            first["report"]["activities"])
        extra = second["report"]["activities"][len(first["report"]["activities"]):]
        assert [(a["operation"], a["principal_id"]) for a in extra] == [
            ("audit_report", "svc:auditor")]


# -- who may read -------------------------------------------------------------------------------


async def test_memory_admin_is_refused_as_rest_refuses_it(audited: Audited) -> None:
    ids = await record(audited.manager, audited.trail)
    async with audited.http(audited.auditor) as http:
        checkpoint = (await http.get("/v1/tenants/acme/audit/verify")).json()["checkpoint"]
    calls = {"audit_query": {}, "audit_summary": {}, "audit_report": {"subject": "alice"},
             "audit_verify": {},
             "audit_prove": {"event_id": ids["acme"], "checkpoint": checkpoint},
             "audit_consistency": {"first": checkpoint, "second": checkpoint}}
    assert set(calls) == AUDIT_TOOLS
    async with audited.http(audited.admin) as http:
        over_rest = (await http.get("/v1/tenants/acme/audit/verify")).json()
    async with audited.mcp(audited.admin) as client:
        for name, arguments in calls.items():
            refused = problem(await client.call_tool(name, arguments))
            assert refused["code"] == "scope_denied", (name, refused)
            assert refused["detail"] == over_rest["detail"], name
            assert refused["detail"].endswith("principal lacks audit:read")
    rejected = [e for e in (entry.event for entry in query([audited.trail], EventFilter()))
                if e["type"] == "memory.audit.rejected" and e["principal_id"] == "svc:admin"]
    assert len(rejected) == len(calls) + 1 and {e["outcome"] for e in rejected} == {"deny"}


async def test_a_credential_bound_to_a_user_is_refused(audited: Audited) -> None:
    async with audited.mcp(audited.user_auditor) as client:
        refused = problem(await client.call_tool("audit_query", {}))
    assert refused["code"] == "scope_denied" and "bound to no user" in refused["detail"]


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("tool", "arguments", "field"), [
    ("audit_query", {"since": "yesterday-ish"}, "since"),
    ("audit_query", {"until": "-24h ago"}, "until"),
    ("audit_query", {"limit": -1}, "arguments.limit"),
    ("audit_query", {"limit": 1001}, "arguments.limit"),
    ("audit_query", {"cursor": -1}, "arguments.cursor"),
    ("audit_query", {"limit": "ten"}, "arguments.limit"),
    ("audit_query", {"principal": "svc:*"}, "principal"),
    ("audit_query", {"scope_hash": "sh1:nothex"}, "scope_hash"),
    ("audit_query", {"subject": ""}, "subject"),
    ("audit_query", {"tenant_id": "globex"}, "arguments.tenant_id"),
    ("audit_summary", {"limit": 0}, "arguments.limit"),
    ("audit_summary", {"since": "x" * 65}, "since"),
    ("audit_report", {}, "arguments.subject"),
    ("audit_report", {"subject": "al\x00ice"}, "subject"),
    ("audit_verify", {"verify": True}, "arguments.verify"),
    ("audit_prove", {"event_id": "e"}, "arguments.checkpoint"),
    ("audit_prove", {"event_id": "e v", "checkpoint": "{}"}, "event_id"),
    ("audit_prove", {"event_id": "e", "checkpoint": "{}"}, "checkpoint"),
    ("audit_prove", {"event_id": "e", "checkpoint": 5}, "arguments.checkpoint"),
    ("audit_consistency", {"first": "not json", "second": "{}"}, "first"),
])
async def test_bad_input_is_a_typed_validation_error(tmp_path: Path, tool: str,
                                                     arguments: dict[str, Any],
                                                     field: str) -> None:
    manager = GovernedMemoryManager.from_plugins("native", {"backend": "memory"},
                                                 sinks=[AuditSink(tmp_path / "trail")])
    async with manager:
        await manager.add(ALICE, ALICE_SCOPE, "a note")
        server = build_mcp_server(manager, lambda ctx: AUDITOR)
        async with Client(server, cache=None) as client:
            refused = problem(await client.call_tool(tool, arguments))
    assert refused["code"] == "validation", refused
    assert refused["field"] == field, refused


# -- a time ago with a minus, on every surface ---------------------------------------------


async def test_minus_24h_reads_the_last_day_through_python_rest_and_mcp(
        audited: Audited) -> None:
    await audited.manager.add(ALICE, ALICE_SCOPE, "an old note")
    long_ago = audited.clock.now()
    audited.clock.advance(3 * DAY)
    await audited.manager.add(ALICE, ALICE_SCOPE, "a new note")
    audited.clock.advance(60)

    def days(events: list[dict[str, Any]]) -> list[float]:
        return sorted({(e["occurred_at"] - long_ago) / DAY for e in events})

    python = GovernedAudit.of(audited.manager.activity)
    async with audited.http(audited.auditor) as http, audited.mcp(audited.auditor) as client:
        for since, expected in (("-24h", [3.0]), ("- 2 days", [3.0]), ("-1h30m", [3.0]),
                                ("-1w", [0.0, 3.0]), ("-24h", [3.0])):
            where = AuditFilter(operation="add", since=since)
            in_process = await python.query(AUDITOR, "acme", where=where)
            assert days([entry.event for entry in in_process.events]) == expected, since
            over_rest = await http.get("/v1/tenants/acme/audit/events",
                                       params={"operation": "add", "since": since})
            assert over_rest.status_code == 200, over_rest.text
            assert days([item["event"] for item in over_rest.json()["events"]]) == expected
            over_mcp = answer(await client.call_tool("audit_query", {"operation": "add",
                                                                     "since": since}))
            assert days([item["event"] for item in over_mcp["events"]]) == expected
            assert over_mcp["events"] == over_rest.json()["events"]


def test_the_docs_list_every_audit_tool() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "service.md").read_text("utf-8")
    mcp_section = doc[doc.index("\n## MCP\n"):doc.index("\n### Streamable HTTP")]
    rows = {line.split("|")[1].strip().strip("`") for line in mcp_section.splitlines()
            if line.startswith("| `")}
    assert rows >= AUDIT_TOOLS
