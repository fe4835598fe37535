"""The long-term memory routes beyond the record family: delete-all, purge-expired,
delete-user, the review queue, replay and multi-scope search, over the real native
provider with a write-review profile, through the remote client and raw HTTP.

Each is one governed manager operation: the permission it takes is the manager's (an
admin key erases, a reviewer key decides), and another tenant's key gets the manager's
own refusal, the same whether or not what it names exists.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from governed_memory import (
    GovernedMemoryManager,
    MemoryNotFoundError,
    MemoryScopeError,
    Permission,
    Principal,
    Provenance,
    RecordStatus,
    Scope,
)
from governed_memory.clock import ManualClock
from governed_memory.errors import GovernedMemoryError, MemoryValidationError
from governed_memory.events import InMemoryEventSink
from governed_memory.profiles import parse_profile
from governed_memory_service import (
    ApiKeyStore,
    AsyncMemoryClient,
    BearerAuthenticator,
    PreconditionFailedError,
    create_app,
)
from governed_memory_service.bodies import ScopeBody
from governed_memory_service.http_input import SCOPE_PARAMS
from governed_memory_service.routes import ENDPOINTS

ALICE = Scope("acme", user_id="alice")
SUPPORT = Scope("acme", project_id="support", user_id="alice")
WEB = Provenance(source_type="web", source_id="https://example.test/page")
ALICE_P = Principal("user:alice", "user", tenant_id="acme", user_id="alice",
                    permissions=[Permission.READ, Permission.WRITE])
BOB_P = Principal("user:bob", "user", tenant_id="globex", user_id="bob",
                  permissions=list(Permission))


def _profile(backend: str, path: Path) -> Any:
    config = ({"backend": "memory"} if backend == "memory"
              else {"backend": "sqlite", "path": str(path / "memory.db")})
    return parse_profile({"id": "service-review", "version": "1.0.0",
                          "provider": {"name": "native", "config": config},
                          "write": {"review_source_types": ["web"]},
                          "policies": {"enabled": ["write-review"]}})


@attrs.frozen(kw_only=True)
class Reviewed:
    manager: GovernedMemoryManager
    clock: ManualClock
    sink: InMemoryEventSink
    app: Any
    tokens: dict[str, str]

    def client(self, who: str) -> AsyncMemoryClient:
        return AsyncMemoryClient("http://service.test", self.tokens[who],
                                 transport=httpx.ASGITransport(app=self.app))

    def http(self, who: str | None = None) -> httpx.AsyncClient:
        headers = {} if who is None else {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.AsyncClient(base_url="http://service.test", headers=headers,
                                 transport=httpx.ASGITransport(app=self.app))


@pytest.fixture(params=["memory", "sqlite"])
async def reviewed(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Reviewed]:
    clock, sink = ManualClock(), InMemoryEventSink()
    manager = GovernedMemoryManager.from_profile(_profile(request.param, tmp_path),
                                                 clock=clock, sinks=[sink])
    keys = ApiKeyStore(tmp_path / "keys.db")
    async with manager, keys:
        rw = [Permission.READ, Permission.WRITE, Permission.DELETE]
        made = {
            "alice": await keys.create(tenant_id="acme", kind="user", user_id="alice",
                                       permissions=rw),
            "admin": await keys.create(tenant_id="acme", kind="service",
                                       permissions=[*rw, Permission.ADMIN]),
            "reviewer": await keys.create(tenant_id="acme", kind="service",
                                          principal_id="svc:moderator",
                                          permissions=[Permission.READ, Permission.REVIEW]),
            "bob": await keys.create(tenant_id="globex", kind="service",
                                     permissions=list(Permission)),
        }
        app = create_app(manager, BearerAuthenticator(keys), max_body_bytes=4096)
        yield Reviewed(manager=manager, clock=clock, sink=sink, app=app,
                       tokens={k: v.token for k, v in made.items()})


async def test_multi_scope_search_covers_each_exact_scope(reviewed: Reviewed) -> None:
    async with reviewed.client("alice") as alice:
        mine = await alice.add(ALICE, "Alice drinks green tea")
        work = await alice.add(SUPPORT, "the support rota has green tea on Fridays")
        await alice.add(Scope("acme", user_id="alice", project_id="other"), "green tea too")
        one = await alice.search(ALICE, "green tea")
        assert [h.record.id for h in one.hits] == [mine.id]
        both = await alice.search([ALICE, SUPPORT], "green tea")
        assert sorted(h.record.id for h in both.hits) == sorted([mine.id, work.id])
        direct = await reviewed.manager.search(ALICE_P, [ALICE, SUPPORT], "green tea")
        assert [h.record.id for h in both.hits] == [h.record.id for h in direct.hits]
        with pytest.raises(MemoryValidationError) as two_tenants:
            await alice.search([ALICE, Scope("globex", user_id="bob")], "tea")
        assert two_tenants.value.field == "scopes"
        with pytest.raises(MemoryScopeError):  # one scope of another user: all refused
            await alice.search([ALICE, Scope("acme", user_id="bob")], "tea")


async def test_event_time_travels_through_the_routes_and_the_client(
        reviewed: Reviewed) -> None:
    now = reviewed.clock.now()
    async with reviewed.client("alice") as alice, reviewed.http("alice") as http:
        march = await alice.add(ALICE, "Alice flew to Lisbon", occurred_at=now - 90 * 86_400)
        april = await alice.add(ALICE, "Alice flew to Oslo", occurred_at=now - 60 * 86_400)
        assert march.occurred_at == now - 90 * 86_400
        assert (await alice.get(ALICE, march.id)).event_time == march.occurred_at
        window = await alice.search(ALICE, "Alice flew", occurred_since=now - 70 * 86_400)
        assert [h.record.id for h in window.hits] == [april.id]
        both = await alice.search([ALICE, SUPPORT], "Alice flew",
                                  occurred_before=now - 70 * 86_400)
        assert [h.record.id for h in both.hits] == [march.id]
        then = await alice.search(ALICE, "Alice flew", as_of=now - 80 * 86_400)
        assert [h.record.id for h in then.hits] == [march.id]
        moved = await alice.update(ALICE, april.id, occurred_at=now - 100 * 86_400)
        assert moved.occurred_at == now - 100 * 86_400
        answer = await http.post("/v1/tenants/acme/memories/search",
                                 params={"user_id": "alice"},
                                 json={"query": "flew", "occurred_since": 5.0,
                                       "occurred_before": 5.0})
        assert answer.status_code == 422
        assert answer.json()["field"] == "occurred_since"
        bad = await http.post("/v1/tenants/acme/memories", params={"user_id": "alice"},
                              json={"content": "x", "occurred_at": "last week"})
        assert bad.status_code == 422 and bad.json()["field"] == "body.occurred_at"


@pytest.mark.parametrize(("body", "field"), [
    ({"query": "tea"}, "body.scopes"),
    ({"scopes": [], "query": "tea"}, "body.scopes"),
    ({"scopes": [{"user_id": "alice"}]}, "body.query"),
    ({"scopes": [{"usr_id": "alice"}], "query": "tea"}, "body.scopes[0]"),
    ({"scopes": [{"user_id": "alice"}, {"user_id": "al*ce"}], "query": "tea"},
     "body.scopes[1].user_id"),
    ({"scopes": [{"user_id": "alice", "tenant_id": "globex"}], "query": "tea"},
     "body.scopes[0]"),
    ({"scopes": {"user_id": "alice"}, "query": "tea"}, "body.scopes"),
])
async def test_multi_search_input_is_422_naming_the_field(reviewed: Reviewed,
                                                          body: dict[str, Any],
                                                          field: str) -> None:
    async with reviewed.http("alice") as http:
        response = await http.post("/v1/tenants/acme/memories/multi-search", json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "validation"
    assert response.json()["field"].startswith(field), response.json()


async def test_delete_all_erases_exactly_one_scope_and_takes_admin(reviewed: Reviewed) -> None:
    async with reviewed.client("alice") as alice:
        await alice.add(ALICE, "one")
        await alice.add(ALICE, "two")
        kept = await alice.add(SUPPORT, "kept")
        with pytest.raises(MemoryScopeError, match="memory:admin"):
            await alice.delete_all(ALICE)
    async with reviewed.client("admin") as admin:
        assert await admin.delete_all(ALICE) == 2
        assert (await admin.list(ALICE)).items == ()
        assert [r.id for r in (await admin.list(SUPPORT)).items] == [kept.id]
    async with reviewed.http("admin") as http:
        bad = await http.delete("/v1/tenants/acme/memories", params={"usr_id": "alice"})
        assert bad.status_code == 422 and bad.json()["field"] == "query.usr_id"


async def test_purge_expired_pages_with_a_cursor(reviewed: Reviewed) -> None:
    now = reviewed.clock.now()
    async with reviewed.client("alice") as alice:
        for i in range(5):
            await alice.add(ALICE, f"short-lived {i}", expires_at=now + 10)
        live = await alice.add(ALICE, "stays")
    reviewed.clock.advance(60)
    async with reviewed.client("admin") as admin:
        deleted, cursor, rounds = 0, None, 0
        while True:
            page = await admin.purge_expired(ALICE, limit=2, after=cursor)
            deleted += page.deleted
            rounds += 1
            cursor = page.next_cursor
            if cursor is None:
                break
        assert deleted == 5 and rounds >= 3
        assert [r.id for r in (await admin.list(ALICE)).items] == [live.id]
    async with reviewed.client("alice") as alice:
        with pytest.raises(MemoryScopeError):
            await alice.purge_expired(ALICE)
    async with reviewed.http("admin") as http:
        bad = await http.post("/v1/tenants/acme/memories/purge-expired",
                              params={"user_id": "alice", "limit": "many"})
        assert bad.status_code == 422 and bad.json()["field"] == "query.limit"


async def test_delete_user_returns_the_erasure_receipt(reviewed: Reviewed) -> None:
    async with reviewed.client("alice") as alice:
        await alice.add(ALICE, "mine")
        await alice.add(SUPPORT, "mine at work")
        with pytest.raises(MemoryScopeError):  # the manager wants memory:admin
            await alice.delete_user("acme", "alice")
    async with reviewed.client("admin") as admin:
        receipt = await admin.delete_user("acme", "alice")
        assert (receipt.tenant_id, receipt.user_id) == ("acme", "alice")
        assert sum(receipt.counts.values()) >= 2
        assert receipt.receipt_hash
        assert (await admin.list(ALICE)).items == ()
    async with reviewed.http("admin") as http:
        bad = await http.delete("/v1/tenants/acme/users/al*ce")
        assert bad.status_code == 422 and "user_id" in bad.json()["field"]
        extra = await http.delete("/v1/tenants/acme/users/alice", params={"hard": "true"})
        assert extra.status_code == 422 and extra.json()["field"] == "query.hard"


async def test_the_review_queue_lists_approves_and_rejects(reviewed: Reviewed) -> None:
    async with reviewed.client("alice") as alice:
        first = await alice.add(ALICE, "the page says tea is good", provenance=WEB)
        second = await alice.add(ALICE, "the page says coffee is bad", provenance=WEB)
        assert first.status is RecordStatus.PENDING_REVIEW
        with pytest.raises(MemoryScopeError, match="memory:review"):
            await alice.list_pending(ALICE)  # a writer is no reviewer
        with pytest.raises(MemoryNotFoundError):
            await alice.get(ALICE, first.id)
    async with reviewed.client("reviewer") as reviewer:
        page = await reviewer.list_pending(ALICE, limit=1)
        assert [r.id for r in page.items] == [first.id] and page.next_cursor is not None
        rest = await reviewer.list_pending(ALICE, limit=1, cursor=page.next_cursor)
        assert [r.id for r in rest.items] == [second.id]
        approved = await reviewer.approve(ALICE, first.id, expected_revision=first.revision,
                                          idempotency_key="approve-1")
        assert approved.status is RecordStatus.ACTIVE and approved.version == first.version + 1
        again = await reviewer.approve(ALICE, first.id, expected_revision=first.revision,
                                       idempotency_key="approve-1")
        assert again == approved  # a retry returns the first decision
        with pytest.raises(PreconditionFailedError):
            await reviewer.approve(ALICE, first.id, expected_revision=first.revision)
        rejected = await reviewer.reject(ALICE, second.id)
        assert rejected.record_id == second.id and rejected.hard
        assert (await reviewer.list_pending(ALICE)).items == ()
    async with reviewed.client("alice") as alice:
        assert (await alice.get(ALICE, first.id)).content == "the page says tea is good"
        with pytest.raises(MemoryNotFoundError):
            await alice.get(ALICE, second.id)


async def test_approve_sends_etag_and_honours_if_match(reviewed: Reviewed) -> None:
    async with reviewed.client("alice") as alice:
        held = await alice.add(ALICE, "from the web", provenance=WEB)
    path = f"/v1/tenants/acme/review/{held.id}/approve"
    async with reviewed.http("reviewer") as http:
        weak = await http.post(path, params={"user_id": "alice"},
                               headers={"If-Match": f'W/"{held.revision}"'})
        assert weak.status_code == 412
        malformed = await http.post(path, params={"user_id": "alice"},
                                    headers={"If-Match": "no-quotes"})
        assert malformed.status_code == 422 and malformed.json()["field"] == "If-Match"
        ok = await http.post(path, params={"user_id": "alice"},
                             headers={"If-Match": f'"{held.revision}"'})
        assert ok.status_code == 200
        assert ok.headers["etag"] == f'"{ok.json()["revision"]}"'
        stale = await http.post(path, params={"user_id": "alice"},
                                headers={"If-Match": f'"{held.revision}"'})
        assert stale.status_code == 412 and stale.json()["code"] == "precondition_failed"
        decided = await http.post(path, params={"user_id": "alice"})
        assert decided.status_code == 409 and decided.json()["code"] == "conflict"


async def test_replay_returns_the_versions_a_search_saw(reviewed: Reviewed) -> None:
    async with reviewed.client("alice") as alice:
        record = await alice.add(ALICE, "Alice's plan is to learn Rust")
        result = await alice.search(ALICE, "plan Rust")
        assert result.snapshot_id is not None
        await alice.update(ALICE, record.id, content="Alice's plan is to learn Zig")
        replayed = await alice.replay(result.snapshot_id)
        assert replayed.snapshot_id == result.snapshot_id
        assert [h.record.content for h in replayed.hits] == ["Alice's plan is to learn Rust"]
        assert replayed.complete
        direct = await reviewed.manager.replay(ALICE_P, result.snapshot_id)
        assert replayed.hits == direct.hits
        with pytest.raises(MemoryNotFoundError):
            await alice.replay("snap_does_not_exist")
    async with reviewed.http("alice") as http:
        bad = await http.get(f"/v1/snapshots/{result.snapshot_id}/replay",
                             params={"user_id": "alice"})
        assert bad.status_code == 422 and bad.json()["field"] == "query.user_id"


NEW = ("multi_search", "delete_all", "purge_expired", "delete_user", "list_pending",
       "approve", "reject", "replay")


def _request(operation: str, record_id: str, snapshot_id: str) -> tuple[str, str, dict[str, Any]]:
    """What another tenant's key sends for each route (acme's names, real or not)."""
    alice = {"params": {"user_id": "alice"}}
    return {
        "multi_search": ("POST", "/v1/tenants/acme/memories/multi-search",
                         {"json": {"scopes": [{"user_id": "alice"}], "query": "plan"}}),
        "delete_all": ("DELETE", "/v1/tenants/acme/memories", alice),
        "purge_expired": ("POST", "/v1/tenants/acme/memories/purge-expired", alice),
        "delete_user": ("DELETE", "/v1/tenants/acme/users/alice", {}),
        "list_pending": ("GET", "/v1/tenants/acme/review", alice),
        "approve": ("POST", f"/v1/tenants/acme/review/{record_id}/approve", alice),
        "reject": ("POST", f"/v1/tenants/acme/review/{record_id}/reject", alice),
        "replay": ("GET", f"/v1/snapshots/{snapshot_id}/replay", {}),
    }[operation]


async def _managers_refusal(manager: GovernedMemoryManager, operation: str, record_id: str,
                            snapshot_id: str) -> GovernedMemoryError:
    calls: dict[str, Any] = {
        "multi_search": lambda: manager.search(BOB_P, [ALICE], "plan"),
        "delete_all": lambda: manager.delete_all(BOB_P, ALICE),
        "purge_expired": lambda: manager.purge_expired(BOB_P, ALICE),
        "delete_user": lambda: manager.delete_user(BOB_P, "acme", "alice"),
        "list_pending": lambda: manager.list_pending(BOB_P, ALICE),
        "approve": lambda: manager.approve(BOB_P, ALICE, record_id),
        "reject": lambda: manager.reject(BOB_P, ALICE, record_id),
        "replay": lambda: manager.replay(BOB_P, snapshot_id),
    }
    with pytest.raises(GovernedMemoryError) as refused:
        await calls[operation]()
    return refused.value


@pytest.mark.parametrize("operation", NEW)
async def test_another_tenants_key_gets_exactly_the_managers_refusal(
        reviewed: Reviewed, operation: str) -> None:
    held = await reviewed.manager.add(ALICE_P, ALICE, "acme's secret plan", provenance=WEB)
    await reviewed.manager.add(ALICE_P, ALICE, "acme's public plan")
    snapshot = (await reviewed.manager.search(ALICE_P, ALICE, "plan")).snapshot_id
    assert snapshot is not None
    refusal = await _managers_refusal(reviewed.manager, operation, held.id, snapshot)
    answers = []
    for record_id, snapshot_id in ((held.id, snapshot),
                                   ("01NOSUCHRECORD0000000000000", "snap_nosuchsnapshot")):
        method, path, extra = _request(operation, record_id, snapshot_id)
        async with reviewed.http("bob") as http:
            response = await http.request(method, path, **extra)
        answers.append((response.status_code, response.json()))
    assert answers[0] == answers[1], "existence must not change the answer"
    status, problem = answers[0]
    assert problem["code"] == refusal.code and problem["detail"] == str(refusal)
    assert status in (403, 404)
    assert "secret plan" not in json.dumps(problem)
    # Nothing of acme's was touched.
    assert (await reviewed.manager.list(ALICE_P, ALICE)).items


@pytest.mark.parametrize("operation", NEW)
async def test_new_routes_refuse_missing_credentials(reviewed: Reviewed, operation: str) -> None:
    method, path, extra = _request(operation, "01ABCDEF", "snap_x")
    async with reviewed.http() as http:
        response = await http.request(method, path, **extra)
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "unauthenticated"


def test_every_new_operation_is_an_endpoint_and_scope_bodies_match_the_query() -> None:
    assert set(NEW) <= {e.operation_id for e in ENDPOINTS}
    assert tuple(f.name for f in attrs.fields(ScopeBody)) == SCOPE_PARAMS
