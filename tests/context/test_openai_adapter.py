"""The OpenAI-compatible adapter against a local server speaking that wire format."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from chat_server import ChatServer, chat_server
from context_support import ALICE, OWNER, converse
from governed_memory.errors import MemoryConfigurationError
from governed_memory.language_models import LanguageModel, LanguageModelError
from governed_memory.plugins import PluginManager
from governed_memory.tiers import MemoryTiers
from governed_memory.turncontext import MemoryContextBuilder
from governed_memory_openai import OpenAICompatibleModel

SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}}


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as running:
        yield running


@pytest.fixture
async def model(server: ChatServer,
                monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[OpenAICompatibleModel]:
    monkeypatch.setenv("GM_TEST_KEY", "sk-test-123")
    built = PluginManager.load().language_models.get("openai").factory(
        {"model": "tiny", "base_url": server.url, "api_key_env": "GM_TEST_KEY",
         "timeout_s": 2})
    assert isinstance(built, LanguageModel)
    yield built
    await built.close()


async def test_text_goes_out_as_system_and_user_messages(server: ChatServer,
                                                         model: OpenAICompatibleModel) -> None:
    server.reply("hello there")
    assert await model.generate_text(system="be brief", user="hi") == "hello there"
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions" and request["model"] == "tiny"
    assert request["messages"] == [{"role": "system", "content": "be brief"},
                                   {"role": "user", "content": "hi"}]
    assert request["temperature"] == 0 and "response_format" not in request
    assert server.headers[0]["authorization"] == "Bearer sk-test-123"
    assert "sk-test-123" not in repr(model)


async def test_structured_asks_for_the_json_schema(server: ChatServer,
                                                   model: OpenAICompatibleModel) -> None:
    server.reply('{"query": "who owns ingest"}')
    answer = await model.generate_structured(system="s", user="u", schema=SCHEMA)
    assert answer == {"query": "who owns ingest"}
    fmt = server.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == SCHEMA


async def test_a_server_without_json_schema_gets_json_object(
        server: ChatServer, model: OpenAICompatibleModel) -> None:
    server.refuse_json_schema = True
    server.reply('```json\n{"query": "q"}\n```')
    assert await model.generate_structured(system="s", user="u", schema=SCHEMA) == {"query": "q"}
    assert server.requests[1]["response_format"] == {"type": "json_object"}
    assert json.dumps(SCHEMA, sort_keys=True) in server.requests[1]["messages"][0]["content"]
    server.reply('{"query": "again"}')
    await model.generate_structured(system="s", user="u", schema=SCHEMA)
    assert server.requests[2]["response_format"] == {"type": "json_object"}  # remembered


@pytest.mark.parametrize(("status", "body", "match"), [
    (500, {"error": {"message": "boom secret-prompt"}}, "HTTP 500"),
    (401, {"error": {"message": "bad key"}}, "HTTP 401"),
    (200, {"choices": []}, "not a chat completion"),
    (200, b"not json", "not a chat completion"),
    (200, {"choices": [{"message": {"content": None}}]}, "no text"),
])
async def test_failures_are_typed_and_say_nothing_of_the_prompt(
        server: ChatServer, model: OpenAICompatibleModel, status: int, body: Any,
        match: str) -> None:
    server.raw(status, body)
    with pytest.raises(LanguageModelError, match=match) as caught:
        await model.generate_text(system="secret-prompt", user="secret-user")
    assert "secret" not in str(caught.value)


async def test_a_non_object_answer_is_refused(server: ChatServer,
                                              model: OpenAICompatibleModel) -> None:
    server.reply("[1, 2]")
    with pytest.raises(LanguageModelError, match="not a JSON object"):
        await model.generate_structured(system="s", user="u", schema=SCHEMA)
    server.reply("prose")
    with pytest.raises(LanguageModelError, match="not JSON"):
        await model.generate_structured(system="s", user="u", schema=SCHEMA)


async def test_a_slow_server_times_out(server: ChatServer) -> None:
    server.delay_s = 0.5
    server.reply("late")
    slow = OpenAICompatibleModel("tiny", base_url=server.url, timeout_s=0.1)
    try:
        with pytest.raises(LanguageModelError, match="in time"):
            await slow.generate_text(system="s", user="u")
    finally:
        await slow.close()


async def test_an_unreachable_server_is_a_model_error() -> None:
    gone = OpenAICompatibleModel("tiny", base_url="http://127.0.0.1:9/v1", timeout_s=1)
    try:
        with pytest.raises(LanguageModelError, match="could not be reached"):
            await gone.generate_text(system="s", user="u")
    finally:
        await gone.close()


@pytest.mark.parametrize(("config", "match"), [
    ({}, "model"),
    ({"model": "m", "base_url": "ftp://x"}, "base_url"),
    ({"model": "m", "timeout_s": 0}, "timeout_s"),
    ({"model": "m", "structured_output": "xml"}, "structured_output"),
    ({"model": "m", "api_key": "inline"}, "api_key"),
])
def test_bad_config_is_refused(config: dict[str, Any], match: str) -> None:
    factory = PluginManager.load().language_models.get("openai").factory
    with pytest.raises(MemoryConfigurationError, match=match):
        factory(config)


async def test_the_builder_runs_on_the_http_model(server: ChatServer, tiers: MemoryTiers,
                                                  model: OpenAICompatibleModel) -> None:
    await converse(tiers, 1, words=3)
    server.reply(json.dumps({"query": "ingest pipeline owner", "wanted_types": ["fact"]}))
    context = await MemoryContextBuilder(tiers, model=model).build(ALICE, OWNER, "who?")
    assert context.standalone_query == "ingest pipeline owner" and context.rewritten
    assert server.requests[0]["messages"][0]["content"].startswith("Task: condense")


async def test_a_failing_http_model_does_not_fail_the_turn(
        server: ChatServer, tiers: MemoryTiers, model: OpenAICompatibleModel) -> None:
    await converse(tiers, 1, words=3)
    server.raw(503, {"error": "overloaded"})
    server.raw(503, {"error": "overloaded"})
    context = await MemoryContextBuilder(tiers, model=model).build(ALICE, OWNER, "who?")
    assert context.standalone_query == "who?"
    assert {"rewrite.structured_failed", "rewrite.failed"} <= set(context.degraded)
