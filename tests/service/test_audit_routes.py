"""The trail over the service: an auditor's routes answer what ``governed-memory audit``
answers (with its code), each read governed and recorded like any operation.

An auditor holds ``audit:read``, which no memory permission implies (``memory:admin``
is refused); it sees its own tenant's events only, and a proof only of one of them;
times ago count back from the manager's clock; a tampered trail is reported broken and
nothing is answered from it; bad input is a typed 4xx, never a 5xx; and nothing the
routes return holds memory content.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypeVar

import attrs
import httpx
import pytest
from click.testing import CliRunner
from governed_memory import GovernedMemoryManager, Permission, Principal, Scope
from governed_memory.audit import AuditSink, EventFilter, query, subject_report
from governed_memory.audit.proofs import (
    ConsistencyProof,
    InclusionProof,
    TreeCheckpoint,
    verify_consistency,
    verify_inclusion,
)
from governed_memory.audit_requests import AuditFilter
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryScopeError
from governed_memory.events import InMemoryEventSink, subject_hash
from governed_memory_service import ApiKeyStore, BearerAuthenticator, create_app
from governed_memory_service.audit_routes import AUDIT_ENDPOINTS
from governed_memory_service.client_calls import Calls, RemoteOperation
from governed_memory_service.openapi import openapi_document
from governed_memory_service.routes import ENDPOINTS

T = TypeVar("T")

PROBLEM = "application/problem+json"
ALICE = Principal("user:alice", "user", tenant_id="acme", user_id="alice",
                  permissions=["memory:read", "memory:write"])
BOB = Principal("user:bob", "user", tenant_id="globex", user_id="bob",
                permissions=["memory:read", "memory:write"])
ALICE_SCOPE = Scope("acme", user_id="alice")
BOB_SCOPE = Scope("globex", user_id="bob")
SECRET = "prefers oolong tea from the Wuyi mountains"
MEMORY_PERMISSIONS = [p for p in Permission if p is not Permission.AUDIT]
DAY = 86_400.0


@attrs.frozen(kw_only=True)
class Audited:
    manager: GovernedMemoryManager
    clock: ManualClock
    trail: Path
    app: Any
    keys: ApiKeyStore
    auditor: str
    admin: str
    globex_auditor: str
    user_auditor: str

    def http(self, credential: str | None = None) -> httpx.AsyncClient:
        headers = {} if credential is None else {"Authorization": f"Bearer {credential}"}
        return httpx.AsyncClient(base_url="http://service.test", headers=headers,
                                 transport=httpx.ASGITransport(app=self.app))

    def trail_events(self, tenant: str | None = None) -> list[dict[str, Any]]:
        return [entry.event for entry in query([self.trail], EventFilter(tenant=tenant))]


async def call(http: httpx.AsyncClient, operation: RemoteOperation[Any, T], *args: Any,
               **kwargs: Any) -> T:
    """One client operation (``client_calls.Calls``), sent as the clients send it."""
    request = operation(*args, **kwargs)
    response = await http.request(request.method, request.path, params=list(request.params),
                                  json=request.body, headers=dict(request.headers))
    return operation.reply.read(response)


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
                                  permissions=MEMORY_PERMISSIONS)
        globex = await keys.create(tenant_id="globex", kind="service",
                                   principal_id="svc:globex-auditor",
                                   permissions=["audit:read"])
        user_auditor = await keys.create(tenant_id="acme", kind="user", user_id="alice",
                                         permissions=["audit:read", "memory:read"])
        app = create_app(manager, BearerAuthenticator(keys))
        yield Audited(manager=manager, clock=clock, trail=trail, app=app, keys=keys,
                      auditor=auditor.token, admin=admin.token,
                      globex_auditor=globex.token, user_auditor=user_auditor.token)


async def record(manager: GovernedMemoryManager) -> dict[str, str]:
    """Some memory operations of both tenants; the ids of a few of their events."""
    note = await manager.add(ALICE, ALICE_SCOPE, SECRET, key="tea",
                             metadata={"origin": "Wuyi"})
    await manager.search(ALICE, ALICE_SCOPE, "oolong")
    await manager.add(BOB, BOB_SCOPE, "globex's launch plan")
    with pytest.raises(MemoryScopeError):
        await manager.get(BOB, ALICE_SCOPE, note.id)
    committed = next(e for e in reversed(await _events(manager))
                     if e["operation"] == "add" and e["tenant_id"] == "acme"
                     and e["type"] == "memory.write.committed")
    globex = next(e for e in await _events(manager) if e["tenant_id"] == "globex")
    return {"acme": committed["event_id"], "globex": globex["event_id"]}


async def _events(manager: GovernedMemoryManager) -> list[dict[str, Any]]:
    sink = next(s for s in manager.activity.events.sinks if isinstance(s, AuditSink))
    return [entry.event for entry in query([sink.directory], EventFilter())]


# -- the auditor's answers are the audit tools' answers -----------------------------------


async def test_an_auditor_queries_reports_verifies_and_proves(audited: Audited) -> None:
    ids = await record(audited.manager)
    async with audited.http(audited.auditor) as http:
        events = await call(http, Calls.audit_query, "acme")
        # The events the audit tools read, up to this query's own `requested` event.
        direct = [(entry.seq, entry.event) for entry in
                  query([audited.trail], EventFilter(tenant="acme"))]
        shown = [(entry.seq, entry.event) for entry in events.events]
        assert shown == direct[:len(shown)] and events.next_cursor is None
        assert shown[-1][1]["type"] == "memory.audit.requested"
        assert direct[len(shown)][1]["type"] == "memory.audit.completed"
        assert {e["tenant_id"] for _, e in shown} == {"acme"}

        report = await call(http, Calls.audit_report, "acme", "alice")
        same = subject_report([audited.trail], "acme", "alice")
        assert report.report.subject_hash == subject_hash("acme", "alice")
        assert report.report.activities == same.activities[:-1]
        assert report.summary == report.report.summary()
        assert report.summary["written"] == 1 and report.summary["denied"] == 1
        # The report is itself a read of the subject's record, by the auditor.
        audit_read = same.activities[-1]
        assert (audit_read.operation, audit_read.principal_id) == ("audit_report",
                                                                   "svc:auditor")

        summary = await call(http, Calls.audit_summary, "acme",
                             where=AuditFilter(operation="add"))
        assert [(row.principal_id, row.operations) for row in summary.principals] == [
            ("user:alice", 1)]

        checked = await call(http, Calls.audit_verify, "acme")
        assert checked.ok and checked.status == "ok" and checked.waiting is None
        assert checked.verification.files == ("audit-000001.jsonl",)
        assert checked.checkpoint is not None
        first = TreeCheckpoint.from_json(checked.checkpoint)
        assert (first.tree_size, first.root) == (checked.verification.entries,
                                                 checked.verification.root)

        proven = await call(http, Calls.audit_prove, "acme", ids["acme"], checked.checkpoint)
        verify_inclusion(proven.event, InclusionProof.from_json(proven.proof), first)
        assert proven.event["event_id"] == ids["acme"]

        later = await call(http, Calls.audit_verify, "acme")
        assert later.checkpoint is not None
        second = TreeCheckpoint.from_json(later.checkpoint)
        assert second.tree_size > first.tree_size
        extended = await call(http, Calls.audit_consistency, "acme", checked.checkpoint,
                              later.checkpoint)
        verify_consistency(first, second, ConsistencyProof.from_json(extended.proof))

    # Each read is an operation of its own in the trail: requested, then its outcome.
    audits = [e for e in audited.trail_events("acme") if e["type"].startswith("memory.audit.")]
    operations = [e["operation"] for e in audits if e["type"] == "memory.audit.completed"]
    assert operations == ["audit_query", "audit_report", "audit_query", "audit_verify",
                          "audit_prove", "audit_verify", "audit_prove"]
    assert all(e["principal_id"] == "svc:auditor" and e["provider"] == "audit-trail"
               and e["scope_hash"] is None for e in audits)
    assert all(e["decision_id"] and e["count"] is not None for e in audits
               if e["type"] == "memory.audit.completed")
    assert [e["subject_hashes"] for e in audits if e["operation"] == "audit_report"] == [
        [subject_hash("acme", "alice")]] * 2


async def test_the_query_pages_with_a_cursor_and_filters_like_the_cli(
        audited: Audited) -> None:
    await record(audited.manager)
    async with audited.http(audited.auditor) as http:
        first = await call(http, Calls.audit_query, "acme", limit=2)
        assert len(first.events) == 2 and first.next_cursor == first.events[-1].seq
        rest = await call(http, Calls.audit_query, "acme", cursor=first.next_cursor,
                          limit=1000, verify=False)
        assert rest.events[0].seq > first.next_cursor
        by_principal = await call(http, Calls.audit_query, "acme",
                                  where=AuditFilter(principal_id="user:bob"))
        assert [(e.event["type"], e.event["outcome"]) for e in by_principal.events] == [
            ("memory.read.requested", None), ("memory.read.rejected", "deny")]
        denied = await call(http, Calls.audit_query, "acme",
                            where=AuditFilter(outcome="deny", user_id="alice"))
        assert [e.event["operation"] for e in denied.events] == ["get"]
        committed = await call(http, Calls.audit_query, "acme",
                               where=AuditFilter(operation="memory.write.committed"))
        scope = committed.events[0].event["scope_hash"]
        in_scope = await call(http, Calls.audit_query, "acme",
                              where=AuditFilter(scope_hash=scope, operation="add"))
        assert [e.event["type"] for e in in_scope.events] == ["memory.write.requested",
                                                               "memory.write.committed"]


# -- who may read the trail ---------------------------------------------------------------


def test_memory_admin_does_not_imply_audit_read() -> None:
    admin = Principal("svc:admin", "service", tenant_id="acme", permissions=["memory:admin"])
    assert admin.has(Permission.DELETE) and admin.has(Permission.REVIEW)
    assert not admin.has(Permission.AUDIT)
    auditor = Principal("svc:auditor", "service", tenant_id="acme", permissions=["audit:read"])
    assert auditor.has(Permission.AUDIT) and not auditor.has(Permission.READ)


async def test_every_memory_permission_together_is_refused(audited: Audited) -> None:
    ids = await record(audited.manager)
    checkpoint = (await _verified(audited)).checkpoint
    assert checkpoint is not None
    requests = [
        ("GET", "/v1/tenants/acme/audit/events", None),
        ("GET", "/v1/tenants/acme/audit/report?subject=alice", None),
        ("GET", "/v1/tenants/acme/audit/verify", None),
        ("POST", "/v1/tenants/acme/audit/proofs/inclusion",
         {"event_id": ids["acme"], "checkpoint": checkpoint}),
        ("POST", "/v1/tenants/acme/audit/proofs/consistency",
         {"first": checkpoint, "second": checkpoint}),
    ]
    assert len(requests) == len(AUDIT_ENDPOINTS)
    async with audited.http(audited.admin) as http:
        for method, path, body in requests:
            response = await http.request(method, path, json=body)
            assert response.status_code == 403, (path, response.text)
            assert response.json()["code"] == "scope_denied"
            assert response.json()["detail"].endswith("principal lacks audit:read")
    refused = [e for e in audited.trail_events("acme")
               if e["type"] == "memory.audit.rejected" and e["principal_id"] == "svc:admin"]
    assert len(refused) == len(requests)
    assert all(e["outcome"] == "deny" for e in refused)


async def test_a_credential_bound_to_a_user_is_refused(audited: Audited) -> None:
    async with audited.http(audited.user_auditor) as http:
        response = await http.get("/v1/tenants/acme/audit/events")
    assert response.status_code == 403 and response.json()["code"] == "scope_denied"
    assert "bound to no user" in response.json()["detail"]


async def test_another_tenants_events_are_never_returned(audited: Audited) -> None:
    ids = await record(audited.manager)
    async with audited.http(audited.auditor) as http:
        everything = await call(http, Calls.audit_query, "acme", limit=1000)
        assert everything.events and {e.event["tenant_id"] for e in everything.events} == {
            "acme"}
        assert "globex" not in json.dumps([e.event for e in everything.events])
        summary = await call(http, Calls.audit_summary, "acme")
        assert {row.principal_id for row in summary.principals} == {
            "user:alice", "user:bob", "svc:auditor"}  # bob's denied try on acme's scope
        assert all(row.tenant_ids == ("acme",) for row in summary.principals)
        # Another tenant in the path: the scope rule's refusal.
        other = await http.get("/v1/tenants/globex/audit/events")
        assert other.status_code == 403 and other.json()["code"] == "scope_denied"
        # A proof of another tenant's event is answered as of an event that is not there.
        checkpoint = (await call(http, Calls.audit_verify, "acme")).checkpoint
        answers = []
        for event_id in (ids["globex"], "evt_nosuchevent.0"):
            response = await http.post("/v1/tenants/acme/audit/proofs/inclusion",
                                       json={"event_id": event_id, "checkpoint": checkpoint})
            answers.append((response.status_code,
                            response.json()["detail"].replace(event_id, "ID")))
        assert answers[0] == answers[1] and answers[0][0] == 404
    async with audited.http(audited.globex_auditor) as http:
        theirs = await call(http, Calls.audit_query, "globex", limit=1000)
        assert {e.event["tenant_id"] for e in theirs.events} == {"globex"}
        proven = await call(http, Calls.audit_prove, "globex", ids["globex"], checkpoint)
        assert proven.event["tenant_id"] == "globex"


async def test_without_a_trail_the_routes_are_unsupported_and_still_recorded(
        tmp_path: Path) -> None:
    sink = InMemoryEventSink()
    manager = GovernedMemoryManager.from_plugins("native", {"backend": "memory"}, sinks=[sink])
    async with manager, ApiKeyStore(tmp_path / "keys.db") as keys:
        auditor = await keys.create(tenant_id="acme", kind="service",
                                    permissions=["audit:read"])
        app = create_app(manager, BearerAuthenticator(keys))
        async with httpx.AsyncClient(base_url="http://service.test",
                                     transport=httpx.ASGITransport(app=app),
                                     headers={"Authorization": f"Bearer {auditor.token}"}
                                     ) as http:
            response = await http.get("/v1/tenants/acme/audit/verify")
    assert response.status_code == 501
    assert response.json()["code"] == "capability_unsupported"
    assert sink.types() == ["memory.audit.requested", "memory.audit.rejected"]


# -- times, damage and bad input ----------------------------------------------------------


async def test_times_ago_count_back_from_the_managers_clock(audited: Audited) -> None:
    await audited.manager.add(ALICE, ALICE_SCOPE, "an old note")
    long_ago = audited.clock.now()
    audited.clock.advance(3 * DAY)
    await audited.manager.add(ALICE, ALICE_SCOPE, "a new note")
    audited.clock.advance(60)  # "now" is after both notes
    adds = AuditFilter(operation="add")
    async with audited.http(audited.auditor) as http:
        for since, until, expected in (
                ("24h", None, [3 * DAY]), ("1 day ago", None, [3 * DAY]),
                ("2 days ago", "now", [3 * DAY]), (None, "2d", [0.0]),
                ("1w", None, [0.0, 3 * DAY]), (str(long_ago + 1), None, [3 * DAY]),
                ("2027-01-15T08:00:00Z", None, [0.0, 3 * DAY]), ("now", None, [])):
            found = await call(http, Calls.audit_query, "acme",
                               where=attrs.evolve(adds, since=since, until=until))
            times = sorted({e.event["occurred_at"] - long_ago for e in found.events})
            assert times == expected, (since, until)
        # The forms `audit query --since` refuses are refused here too, naming the field.
        for bad in ("-24h ago", "1M", "yesterday", "x" * 65):
            response = await http.get("/v1/tenants/acme/audit/events", params={"since": bad})
            assert response.status_code == 422, bad
            assert response.json()["field"] == "since"
            assert response.headers["content-type"] == PROBLEM


async def test_a_tampered_trail_reports_broken_and_answers_nothing(audited: Audited) -> None:
    await record(audited.manager)
    first = audited.trail / "audit-000001.jsonl"
    data = first.read_bytes()
    at = data.index(b'"count":1,')
    first.write_bytes(data[:at] + b'"count":7,' + data[at + len(b'"count":1,'):])
    async with audited.http(audited.auditor) as http:
        checked = await call(http, Calls.audit_verify, "acme")
        assert not checked.ok and checked.status == "broken" and checked.checkpoint is None
        problem = checked.verification.problem
        assert problem is not None and problem.path == "audit-000001.jsonl"
        for path in ("/v1/tenants/acme/audit/events",
                     "/v1/tenants/acme/audit/report?subject=alice"):
            response = await http.get(path)
            assert response.status_code == 409, response.text
            assert response.json()["code"] == "audit_trail"
            assert response.json()["detail"].startswith("BROKEN audit-000001.jsonl:")
            assert str(audited.trail) not in response.text  # no server paths
        unverified = await http.get("/v1/tenants/acme/audit/events",
                                    params={"no_verify": "true", "operation": "add"})
        assert unverified.status_code == 200
        assert 7 in [e["event"]["count"] for e in unverified.json()["events"]]


@pytest.mark.parametrize(("method", "path", "body", "field"), [
    ("GET", "/v1/tenants/acme/audit/events?colour=red", None, "query.colour"),
    ("GET", "/v1/tenants/acme/audit/events?limit=%C2%B2", None, "query.limit"),
    ("GET", "/v1/tenants/acme/audit/events?limit=0", None, "limit"),
    ("GET", "/v1/tenants/acme/audit/events?limit=1001", None, "limit"),
    ("GET", "/v1/tenants/acme/audit/events?limit=99999999999999999999", None, "query.limit"),
    ("GET", "/v1/tenants/acme/audit/events?cursor=-1", None, "query.cursor"),
    ("GET", "/v1/tenants/acme/audit/events?scope_hash=sh1:nothex", None, "scope_hash"),
    ("GET", "/v1/tenants/acme/audit/events?principal=svc:*", None, "principal"),
    ("GET", "/v1/tenants/acme/audit/events?subject=", None, "subject"),
    ("GET", "/v1/tenants/acme/audit/events?until=tomorrow", None, "until"),
    ("GET", "/v1/tenants/acme/audit/events?summary=tenant", None, "query.summary"),
    ("GET", "/v1/tenants/acme/audit/events?summary=principal&cursor=3", None, "query.cursor"),
    ("GET", "/v1/tenants/acme/audit/events?no_verify=yes", None, "query.no_verify"),
    ("GET", "/v1/tenants/acme/audit/events?limit=1&limit=2", None, "query.limit"),
    ("GET", "/v1/tenants/acme/audit/report", None, "query.subject"),
    ("GET", "/v1/tenants/acme/audit/report?subject=al%00ice", None, "subject"),
    ("GET", "/v1/tenants/acme/audit/verify?x=1", None, "query.x"),
    ("POST", "/v1/tenants/acme/audit/proofs/inclusion", [], "body"),
    ("POST", "/v1/tenants/acme/audit/proofs/inclusion", {"event_id": "e"}, "body.checkpoint"),
    ("POST", "/v1/tenants/acme/audit/proofs/inclusion",
     {"event_id": "e", "checkpoint": 5}, "body.checkpoint"),
    ("POST", "/v1/tenants/acme/audit/proofs/inclusion",
     {"event_id": "e", "checkpoint": "{}"}, "checkpoint"),
    ("POST", "/v1/tenants/acme/audit/proofs/inclusion",
     {"event_id": "e v", "checkpoint": "{}"}, "event_id"),
    ("POST", "/v1/tenants/acme/audit/proofs/consistency",
     {"first": "not json", "second": "{}"}, "first"),
])
async def test_bad_input_is_a_typed_4xx(audited: Audited, method: str, path: str,
                                        body: object, field: str) -> None:
    async with audited.http(audited.auditor) as http:
        response = await http.request(method, path, json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["code"] == "validation"
    assert response.json()["field"] == field


async def test_checkpoints_that_cannot_go_together_are_refused(audited: Audited) -> None:
    await record(audited.manager)
    older = await _verified(audited)
    newer = await _verified(audited)
    assert older.checkpoint is not None and newer.checkpoint is not None
    reformatted = json.dumps(json.loads(older.checkpoint), indent=1)
    foreign = TreeCheckpoint.from_json(older.checkpoint)
    foreign = attrs.evolve(foreign, chain_id="chain_another")
    async with audited.http(audited.auditor) as http:
        for body, field in (
                ({"first": newer.checkpoint, "second": older.checkpoint}, "first"),
                ({"first": foreign.to_json(), "second": newer.checkpoint}, "second"),
                ({"first": reformatted, "second": newer.checkpoint}, "first")):
            response = await http.post("/v1/tenants/acme/audit/proofs/consistency", json=body)
            assert response.status_code == 422, response.text
            assert response.json()["field"] == field
        # A checkpoint of this chain the trail never had: the trail does not match it.
        rewritten = attrs.evolve(TreeCheckpoint.from_json(older.checkpoint), root="0" * 64)
        response = await http.post("/v1/tenants/acme/audit/proofs/inclusion",
                                   json={"event_id": "evt_x", "checkpoint":
                                         rewritten.to_json()})
        assert response.status_code == 409 and response.json()["code"] == "audit_trail"
        assert response.json()["detail"].startswith("BROKEN audit-000001.jsonl")
        assert str(audited.trail) not in response.text


async def test_nothing_the_routes_return_holds_content(audited: Audited) -> None:
    ids = await record(audited.manager)
    answers = []
    async with audited.http(audited.auditor) as http:
        for path in ("/v1/tenants/acme/audit/events?limit=1000",
                     "/v1/tenants/acme/audit/events?summary=principal",
                     "/v1/tenants/acme/audit/report?subject=alice",
                     "/v1/tenants/acme/audit/verify"):
            response = await http.get(path)
            assert response.status_code == 200
            answers.append(response.text)
        checkpoint = json.loads(answers[-1])["checkpoint"]
        proof = await http.post("/v1/tenants/acme/audit/proofs/inclusion",
                                json={"event_id": ids["acme"], "checkpoint": checkpoint})
        answers.append(proof.text)
    text = "\n".join(answers) + "".join(p.read_text() for p in audited.trail.iterdir()
                                         if p.suffix == ".jsonl")
    for secret in (SECRET, "oolong", "Wuyi", "launch plan", '"tea"'):
        assert secret not in text


# -- the trail in PostgreSQL -------------------------------------------------------------


async def test_the_postgres_trail_is_read_when_the_manager_writes_one(
        tmp_path: Path) -> None:
    from postgres_support import POSTGRES_DSN, drop_schemas, require_postgres, schema_for

    require_postgres()
    from governed_memory_native.postgres.trail.sink import postgres_trail_from_config

    schema = schema_for(tmp_path)
    store = postgres_trail_from_config({"dsn": POSTGRES_DSN, "schema": schema,
                                        "sequence": False})
    manager = GovernedMemoryManager.from_plugins("native", {"backend": "memory"},
                                                 sinks=[store])
    try:
        async with manager, ApiKeyStore(tmp_path / "keys.db") as keys:
            auditor = await keys.create(tenant_id="acme", kind="service",
                                        permissions=["audit:read"])
            app = create_app(manager, BearerAuthenticator(keys))
            await manager.add(ALICE, ALICE_SCOPE, SECRET)
            await manager.add(BOB, BOB_SCOPE, "globex's launch plan")
            await store.sequence()
            async with httpx.AsyncClient(
                    base_url="http://service.test", transport=httpx.ASGITransport(app=app),
                    headers={"Authorization": f"Bearer {auditor.token}"}) as http:
                checked = await call(http, Calls.audit_verify, "acme")
                assert checked.ok and schema in checked.verification.files[0]
                assert "password" not in checked.verification.files[0]
                assert checked.waiting == 1  # this verify's own `requested` event
                assert checked.checkpoint is not None
                await store.sequence()
                events = await call(http, Calls.audit_query, "acme", limit=1000)
                assert {e.event["tenant_id"] for e in events.events} == {"acme"}
                added = next(e.event for e in events.events
                             if e.event["type"] == "memory.write.committed")
                proven = await call(http, Calls.audit_prove, "acme", added["event_id"],
                                    checked.checkpoint)
                verify_inclusion(proven.event, InclusionProof.from_json(proven.proof),
                                 TreeCheckpoint.from_json(checked.checkpoint))
    finally:
        drop_schemas(schema)


# -- keys, the route table -----------------------------------------------------------------


def test_keys_create_takes_audit_read(tmp_path: Path) -> None:
    from governed_memory_service.cli import main

    db = tmp_path / "keys.db"
    created = CliRunner().invoke(main, ["keys", "create", "--keys", str(db), "--tenant",
                                        "acme", "--kind", "service", "--permission",
                                        "audit:read"])
    assert created.exit_code == 0, created.output
    token = json.loads(created.stdout.splitlines()[0])["token"]

    async def principal() -> Principal | None:
        async with ApiKeyStore(db) as store:
            return await store.verify(token)

    found = asyncio.run(principal())
    assert found is not None and found.permissions == frozenset({Permission.AUDIT})
    assert not found.has(Permission.READ)


def test_the_audit_routes_are_mounted_and_described() -> None:
    assert set(AUDIT_ENDPOINTS) <= set(ENDPOINTS)
    paths = openapi_document()["paths"]
    for endpoint in AUDIT_ENDPOINTS:
        described = paths[endpoint.path][endpoint.method.lower()]
        assert described["operationId"] == endpoint.operation_id
        for parameter in described["parameters"]:
            assert not parameter["description"].startswith("scope dimension"), parameter
    query = {p["name"]: p for p in paths[AUDIT_ENDPOINTS[0].path]["get"]["parameters"]}
    # The audit read's own paging, not the memory listing's.
    assert query["cursor"]["schema"]["type"] == "integer"
    assert "1000" in query["limit"]["description"]


async def _verified(audited: Audited) -> Any:
    async with audited.http(audited.auditor) as http:
        return await call(http, Calls.audit_verify, "acme")
