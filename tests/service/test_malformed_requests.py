"""Crafted input from outside gets a 4xx problem naming what is wrong, on every route
that reads it, and never a 500 or a 503.

The outside trials sent bodies under the size limit that ``json.loads`` cannot turn
into a request (nesting thousands deep: ``RecursionError``; a 5,000-digit integer:
``ValueError``), numbers in the query string that ``str.isdigit`` accepts and ``int``
refuses (``²``) or that no datastore holds (a 20-digit ``after_seq``: SQLite overflowed,
503). Each class is exercised on every route that reads that kind of input, /mcp
included, and the refusal wrote nothing.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from governed_memory import GovernedMemoryManager, Scope
from governed_memory.errors import MemoryValidationError
from governed_memory.events import InMemoryEventSink
from governed_memory.limits import MAX_JSON_DEPTH
from governed_memory.tiers import InMemoryTurnStore, InMemoryWorkingStateStore, MemoryTiers
from governed_memory_native.turns.sqlite import SqliteTurnStore
from governed_memory_service import ApiKeyStore, BearerAuthenticator, create_app
from governed_memory_service.app import DEFAULT_MAX_BODY_BYTES
from governed_memory_service.json_input import MAX_BODY_NESTING, parse_json
from service_support import Service, issue_credentials

PROBLEM = "application/problem+json"
ALICE = Scope("acme", user_id="alice")
Q = "user_id=alice&session_id=s1&run_id=r1"

JSON_ROUTES = [
    ("POST", "/v1/tenants/acme/memories?user_id=alice"),
    ("POST", "/v1/tenants/acme/memories/search?user_id=alice"),
    ("PATCH", "/v1/tenants/acme/memories/01ANYRECORD?user_id=alice"),
    ("POST", "/v1/tenants/acme/memories/multi-search"),
    ("POST", f"/v1/tenants/acme/turns?{Q}"),
    ("PATCH", f"/v1/tenants/acme/working-state?{Q}"),
    ("POST", f"/v1/tenants/acme/context?{Q}"),
    ("POST", "/mcp"),
]
"""Every route that reads a JSON body."""

CRAFTED: dict[str, tuple[bytes, str]] = {
    # name: (body, a word the detail must hold); each is well under the 256 KiB limit
    "nested-50000-deep": (b"[" * 50_000 + b"]" * 50_000, "deeper"),
    "nested-100-deep": (b'{"content": "x", "metadata": ' + b'{"a": ' * 100 + b"1"
                        + b"}" * 100 + b"}", "deeper"),
    "5000-digit-integer": (b'{"content": "x", "importance": ' + b"1" * 5000 + b"}",
                           "64-bit"),
    "5000-digit-integer-in-metadata": (b'{"content": "x", "metadata": {"n": -'
                                       + b"9" * 5000 + b"}}", "64-bit"),
    "integer-past-64-bits": (b'{"content": "x", "importance": 9223372036854775808}',
                             "64-bit"),
    "float-overflow": (b'{"content": "x", "importance": 1e999}', "64-bit float"),
    "nan": (b'{"content": "x", "importance": NaN}', "NaN"),
    "infinity": (b'{"content": "x", "importance": -Infinity}', "Infinity"),
    "lone-surrogate": (b'{"content": "\\ud800 hi"}', "surrogate"),
    "lone-surrogate-key": (b'{"content": "x", "metadata": {"\\udfff": 1}}', "surrogate"),
    "duplicate-key": (b'{"content": "a", "content": "b"}', "twice"),
    "not-utf8": (b'{"content": "\xff\xfe"}', "UTF-8"),
    "truncated": (b'{"content": "x"', "line 1"),
}


@contextlib.asynccontextmanager
async def running_app(tmp_path: Path) -> AsyncIterator[Service]:
    """An app with the default body limit (256 KiB, room for the trials' bodies), its
    lifespan entered so /mcp runs too (in the test's own task: the SDK's task group
    must be left in the task that entered it, which a fixture does not promise)."""
    sink = InMemoryEventSink()
    manager = GovernedMemoryManager.from_plugins("native", {"backend": "memory"}, sinks=[sink])
    async with manager, ApiKeyStore(tmp_path / "keys.db") as keys:
        credentials = await issue_credentials(keys)
        tiers = MemoryTiers(long_term=manager, turns=InMemoryTurnStore(),
                            working=InMemoryWorkingStateStore())
        app = create_app(manager, BearerAuthenticator(keys), tiers=tiers)
        async with app.router.lifespan_context(app):
            yield Service(manager=manager, sink=sink, keys=keys, app=app, tiers=tiers,
                          alice=credentials.alice, bob_other_tenant=credentials.bob_other_tenant,
                          reader=credentials.reader)


def assert_problem(response: httpx.Response, status: int, field: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    problem = response.json()
    assert problem["status"] == status
    if field is not None:
        assert problem.get("field") == field, problem
    return problem


@pytest.mark.parametrize(("method", "path"), JSON_ROUTES, ids=[p for _, p in JSON_ROUTES])
async def test_a_crafted_body_is_a_422_naming_it_on_every_route(
        tmp_path: Path, method: str, path: str) -> None:
    headers = {"content-type": "application/json",
               "accept": "application/json, text/event-stream"}
    async with running_app(tmp_path) as running, running.http(running.alice) as http:
        for name, (body, word) in CRAFTED.items():
            assert len(body) < DEFAULT_MAX_BODY_BYTES, "the parser, not the limit, refuses it"
            response = await http.request(method, path, content=body, headers=headers)
            problem = assert_problem(response, 422)
            assert problem["code"] == "validation", name
            assert problem["field"].startswith("body"), (name, problem)
            assert word in problem["detail"], (name, problem)
        async with running.client(running.alice) as client:
            assert (await client.list(ALICE)).items == ()  # nothing was written
        assert not [t for t in running.sink.types() if t.startswith("memory.write")]


async def test_the_bad_string_is_named_by_its_path(tmp_path: Path) -> None:
    async with running_app(tmp_path) as running, running.http(running.alice) as http:
        response = await http.post("/v1/tenants/acme/memories", content=(
            b'{"content": "x", "metadata": {"tags": ["ok", "\\ud83d"]}}'),
            headers={"content-type": "application/json"})
        assert_problem(response, 422, "body.metadata.tags[1]")
        # A surrogate pair is a character, not a lone surrogate.
        paired = await http.post("/v1/tenants/acme/memories",
                                 content=b'{"content": "smile \\ud83d\\ude00"}',
                                 headers={"content-type": "application/json"})
        assert paired.status_code == 201, paired.text
        assert paired.json()["content"] == "smile \U0001f600"


async def test_json_that_is_no_json_rpc_message_is_a_422_on_mcp(tmp_path: Path) -> None:
    headers = {"accept": "application/json, text/event-stream"}
    async with running_app(tmp_path) as running, running.http(running.alice) as http:
        for body, field in ((b"[]", "body"), (b'"ping"', "body"),
                            (b'{"jsonrpc": "2.0", "id": 1, "method": 5}', "body.method")):
            response = await http.post("/mcp", content=body,
                                       headers={**headers, "content-type": "application/json"})
            assert_problem(response, 422, field)


async def test_a_body_over_the_limit_is_a_413_problem_on_mcp_too(tmp_path: Path) -> None:
    """The SDK answered ``413 Request body too large`` in text/plain; /mcp reads the body
    with the routes' helper, so it is the routes' problem document."""
    body = (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "pad": "'
            + b"x" * DEFAULT_MAX_BODY_BYTES + b'"}')
    headers = {"content-type": "application/json",
               "accept": "application/json, text/event-stream"}
    async with running_app(tmp_path) as running, running.http(running.alice) as http:
        for path in ("/mcp", "/v1/tenants/acme/memories?user_id=alice"):
            problem = assert_problem(await http.post(path, content=body, headers=headers), 413)
            assert problem["code"] == "payload_too_large"


NUMBER_ROUTES = [
    ("GET", "/v1/tenants/acme/memories?user_id=alice", "limit"),
    ("POST", "/v1/tenants/acme/memories/purge-expired?user_id=alice", "limit"),
    ("GET", "/v1/tenants/acme/review?user_id=alice", "limit"),
    ("GET", f"/v1/tenants/acme/turns?{Q}", "limit"),
    ("GET", f"/v1/tenants/acme/turns?{Q}", "after_seq"),
]
BAD_NUMBERS = {"superscript-two": "²", "arabic-indic-three": "\u0663",
               "five-thousand-nines": "9" * 5000, "twenty-nines": "9" * 20,
               "int64-plus-one": str(2**63), "negative": "-1", "plus": "+5",
               "exponent": "1e3", "hex": "0x10", "blank": "", "space": " 5"}


@pytest.mark.parametrize(("method", "path", "name"), NUMBER_ROUTES,
                         ids=[f"{p.split('?')[0]}:{n}" for _, p, n in NUMBER_ROUTES])
async def test_a_bad_number_in_the_query_is_a_422_naming_it(
        service: Service, method: str, path: str, name: str) -> None:
    async with service.http(service.alice) as http:
        for value in BAD_NUMBERS.values():
            response = await http.request(method, f"{path}&{urlencode({name: value})}")
            assert_problem(response, 422, f"query.{name}")


async def test_the_numbers_at_the_bounds_are_answered(service: Service) -> None:
    async with service.http(service.alice) as http:
        ok = await http.get(f"/v1/tenants/acme/turns?{Q}&after_seq={2**63 - 1}&limit=007")
        assert ok.status_code == 200 and ok.json() == {"turns": []}
        # A number the service reads but the library bounds: the library names it.
        too_many = await http.get("/v1/tenants/acme/memories?user_id=alice&limit=101")
        assert_problem(too_many, 422, "limit")


async def test_a_content_length_that_is_no_number_is_a_4xx(service: Service) -> None:
    async with service.http(service.alice) as http:
        for declared, status, field in (("²", 422, "Content-Length"),
                                        ("12a", 422, "Content-Length"),
                                        ("9" * 5000, 413, "body")):
            response = await http.post("/v1/tenants/acme/memories?user_id=alice",
                                       content=b'{"content": "x"}',
                                       headers={"content-type": "application/json",
                                                # latin-1: how HTTP/1.1 carries ² (0xB2)
                                                "content-length": declared.encode("latin-1")})
            assert_problem(response, status, field)


async def test_a_20_digit_after_seq_is_a_422_not_a_storage_503(tmp_path: Path) -> None:
    """The trial's exact request, against the real SQLite turn store it overflowed."""
    manager = GovernedMemoryManager.from_plugins("native", {"backend": "memory"})
    turns = SqliteTurnStore(tmp_path / "turns.db")
    async with manager, ApiKeyStore(tmp_path / "keys.db") as keys:
        credentials = await issue_credentials(keys)
        tiers = MemoryTiers(long_term=manager, turns=turns,
                            working=InMemoryWorkingStateStore())
        app = create_app(manager, BearerAuthenticator(keys), tiers=tiers)
        await turns.start()
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(turns.close)
            http = await stack.enter_async_context(httpx.AsyncClient(
                base_url="http://service.test", transport=httpx.ASGITransport(app=app),
                headers={"Authorization": f"Bearer {credentials.alice}"}))
            appended = await http.post(f"/v1/tenants/acme/turns?{Q}",
                                       json={"role": "user", "content": "hello"})
            assert appended.status_code == 201, appended.text
            response = await http.get(f"/v1/tenants/acme/turns?{Q}"
                                      "&after_seq=99999999999999999999")
            assert_problem(response, 422, "query.after_seq")
            first = await http.get(f"/v1/tenants/acme/turns?{Q}&after_seq=0")
            assert [t["content"] for t in first.json()["turns"]] == ["hello"]


def test_the_nesting_bound_is_exact_and_documented() -> None:
    deepest = b"[" * MAX_BODY_NESTING + b"]" * MAX_BODY_NESTING
    assert parse_json(deepest) is not None
    with pytest.raises(MemoryValidationError, match="deeper"):
        parse_json(b"[" + deepest + b"]")
    # The deepest metadata the library takes fits in a body with room to spare.
    metadata: dict[str, object] = {}
    for _ in range(MAX_JSON_DEPTH):
        metadata = {"a": metadata}
    assert parse_json(json.dumps({"content": "x", "metadata": metadata}).encode())
    doc = (Path(__file__).resolve().parents[2] / "docs" / "service.md").read_text("utf-8")
    assert f"at most {MAX_BODY_NESTING} levels of arrays and objects" in " ".join(doc.split())
