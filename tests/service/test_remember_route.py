"""``POST /v1/tenants/{tenant}/memories/from-messages``: the manager's ``remember`` over
the wire, with the scope in the query like every memory route, the decisions in the
answer, and the library's refusals as problems."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from governed_memory import Principal, Scope
from governed_memory.language_models import ModelCall, ScriptedModel
from governed_memory.remembering import Message, RememberResult
from governed_memory_service.client_calls import Calls
from service_support import Service

MINE = Scope("acme", user_id="alice")
ALICE = Principal("user:alice", "user", tenant_id="acme", user_id="alice",
                  permissions=["memory:read", "memory:write"])
PATH = "/v1/tenants/acme/memories/from-messages"
FACTS = {"green tea": "Alice prefers green tea", "coffee": "Alice prefers coffee",
         "Lyon": "Alice lives in Lyon"}


def responder(call: ModelCall) -> Mapping[str, Any]:
    if call.task == "remember":
        facts = [{"content": fact, "type": "preference", "importance": 0.7,
                  "confidence": 0.9, "turns": [int(n)]}
                 for n, text in re.findall(r"^\[(\d+)\] \w+: (.*)$", call.user, re.M)
                 for phrase, fact in FACTS.items() if phrase in text]
        return {"facts": facts}
    if call.task == "reconcile":
        memory = re.search(r"^\[M(\d+)\] \(\w+\) Alice prefers green tea$", call.user, re.M)
        if "Alice prefers coffee" in call.user and memory:
            return {"decisions": [{"fact": 1, "action": "supersede",
                                   "memory": f"M{memory.group(1)}"}]}
        return {"decisions": []}
    raise ValueError(call.task)


def conversation(*texts: str, prefix: str = "t") -> list[dict[str, str]]:
    return [{"role": "user", "content": text, "turn_id": f"{prefix}{n}"}
            for n, text in enumerate(texts, start=1)]


async def test_a_conversation_becomes_memories_and_a_retry_writes_nothing(
        service: Service) -> None:
    service.manager.language_model = ScriptedModel(responder=responder)
    body = {"messages": conversation("I prefer green tea", "I live in Lyon")}
    async with service.http(service.alice) as http:
        first = await http.post(PATH, json=body)
        assert first.status_code == 200, first.text
        answer = first.json()
        assert [d["decision"] for d in answer["decisions"]] == ["added", "added"]
        assert answer["model"] == "scripted" and answer["model_calls"] == 1
        assert answer["decisions"][0]["source_turn_ids"] == ["t1"]
        record_id = answer["decisions"][0]["record_id"]
        again = await http.post(PATH, json=body)
        assert [d["decision"] for d in again.json()["decisions"]] == ["unchanged", "unchanged"]
        # A contradiction supersedes; the old memory is still readable with its history.
        later = await http.post(PATH, json={"messages": conversation("I switched to coffee",
                                                                     prefix="u")})
        (decision,) = later.json()["decisions"]
        assert (decision["decision"], decision["previous_id"]) == ("superseded", record_id)
        history = await http.get(f"/v1/tenants/acme/memories/{record_id}/history",
                                 params={"user_id": "alice"})
        assert [v["record"]["version"] for v in history.json()["versions"]] == [1, 2]
    page = await service.manager.list(ALICE, MINE)
    assert sorted(r.content for r in page.items) == ["Alice lives in Lyon",
                                                     "Alice prefers coffee",
                                                     "Alice prefers green tea"]
    # Each write was its own governed operation of alice's, in her scope.
    adds = [e for e in service.sink.events if e.type == "memory.write.committed"]
    assert {e.principal_id for e in adds} == {"user:alice"}
    assert {e.scope_hash for e in adds} == {MINE.scope_hash}


async def test_the_client_call_reaches_the_route(service: Service) -> None:
    service.manager.language_model = ScriptedModel(responder=responder)
    call = Calls.remember(MINE, [Message(role="user", content="I live in Lyon", turn_id="x1"),
                                 {"role": "assistant", "content": "Noted."}], window=5)
    assert call.body["window"] == 5 and "confidence_floor" not in call.body
    async with service.http(service.alice) as http:
        response = await http.request(call.method, call.path, params=call.params,
                                      json=call.body)
    result = Calls.remember.reply.read(response)
    assert isinstance(result, RememberResult)
    assert [d.decision.value for d in result.decisions] == ["added"]
    assert result.decisions[0].source_turn_ids == ("x1",)


async def test_a_server_without_a_model_says_so(service: Service) -> None:
    async with service.http(service.alice) as http:
        response = await http.post(PATH, json={"messages": conversation("I live in Lyon")})
    assert response.status_code == 501
    problem = response.json()
    assert problem["code"] == "capability_unsupported"
    assert "[stores.language_model]" in problem["detail"]


async def test_bad_input_is_a_422_naming_the_field(service: Service) -> None:
    service.manager.language_model = model = ScriptedModel(responder=responder)
    async with service.http(service.alice) as http:
        for body, field in (
                ({"messages": [{"role": "boss", "content": "x"}]}, "body.messages[0].role"),
                ({"messages": [{"role": "user"}]}, "body.messages[0].content"),
                ({"messages": [{"role": "user", "content": "x", "x": 1}]}, "body.messages[0]"),
                ({"messages": []}, "messages"),
                ({"messages": conversation("x"), "window": 0}, "window"),
                ({}, "body.messages")):
            response = await http.post(PATH, json=body)
            assert response.status_code == 422, (body, response.text)
            assert response.json()["field"].startswith(field), (body, response.json())
    assert model.calls == []


async def test_another_tenant_and_a_read_only_key_write_nothing(service: Service) -> None:
    service.manager.language_model = ScriptedModel(responder=responder)
    body = {"messages": conversation("I live in Lyon")}
    async with service.http(service.bob_other_tenant) as http:
        response = await http.post(PATH, json=body)
        assert response.status_code == 403
        assert response.json()["code"] == "scope_denied"
    async with service.http(service.reader) as http:
        response = await http.post(PATH, json=body)
        assert response.status_code == 200
        (decision,) = response.json()["decisions"]
        assert (decision["decision"], decision["error_code"]) == ("refused", "scope_denied")
        assert decision["content"] is None
    async with service.http() as http:
        assert (await http.post(PATH, json=body)).status_code == 401
    assert (await service.manager.list(ALICE, MINE)).items == ()
