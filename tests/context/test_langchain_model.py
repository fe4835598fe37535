"""The LangChain chat-model adapter: any ``BaseChatModel`` reads conversations for
``remember`` and condenses, summarizes and extracts for the context builder exactly as
the scripted model it stands for; a profile names one by its import path and is refused
at load for what cannot work; every failure is the typed, unavailable model error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from context_support import ALICE, OWNER, converse, summary_of
from governed_memory import GovernedMemoryManager, Scope
from governed_memory.cli.building import HOME_ENV, PROFILE_ENV
from governed_memory.cli.main import cli
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError, MemoryUnavailableError
from governed_memory.language_models import (
    LanguageModel,
    LanguageModelError,
    ModelCall,
    ScriptedModel,
)
from governed_memory.plugins import BLOCK_ENV, PluginManager
from governed_memory.profiles import loads_profile
from governed_memory.remembering import RememberResult
from governed_memory.tiers import InMemoryTurnStore, MemoryTiers
from governed_memory.turncontext import ContextPolicy, MemoryContextBuilder, MemoryExtractor
from governed_memory_langchain import LangChainLanguageModel
from governed_memory_native import build_native_provider
from langchain_chat_support import (
    APITimeoutError,
    RespondingChatModel,
    SilentChatModel,
    ToolCallingChatModel,
)
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from remember_support import responder, says, scripted

MINE = Scope("acme", user_id="alice")
SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}}
FAKE_LIST = "langchain_core.language_models.fake_chat_models.FakeListChatModel"
CHAT_MODELS = [RespondingChatModel, ToolCallingChatModel]
"""JSON in text, and LangChain's own structured output (a tool call)."""


def _decisions(result: RememberResult) -> list[tuple[str, str | None, str, tuple[str, ...]]]:
    return [(d.decision.value, d.content, d.memory_type.value, d.source_turn_ids)
            for d in result.decisions]


async def _remember_with(model: LanguageModel) -> tuple[list[RememberResult], list[Any]]:
    clock = ManualClock()
    async with GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                     clock=clock, language_model=model) as manager:
        results = [await manager.remember(ALICE, MINE, says("I prefer green tea",
                                                            "I live in Lyon")),
                   await manager.remember(ALICE, MINE, says("I switched to coffee",
                                                            prefix="u"))]
        stored = (await manager.list(ALICE, MINE)).items
    return results, [(r.content, r.status.value, r.metadata.get("extracted_by"))
                     for r in stored]


@pytest.mark.parametrize("chat_class", CHAT_MODELS)
async def test_remember_decides_as_the_scripted_model_does(
        chat_class: type[RespondingChatModel]) -> None:
    chat = chat_class(responder=responder)
    model = LangChainLanguageModel(chat)
    expected, expected_rows = await _remember_with(scripted())
    got, rows = await _remember_with(model)
    assert [_decisions(r) for r in got] == [_decisions(r) for r in expected]
    assert [r.model_calls for r in got] == [r.model_calls for r in expected]
    assert [kind for kind, *_ in _decisions(got[1])] == ["superseded"]
    identity = f"langchain:responding-fake/{chat.model_name}"
    assert {r.model for r in got} == {identity}
    assert [row[:2] for row in rows] == [row[:2] for row in expected_rows]
    assert {row[2] for row in rows} == {identity}  # provenance names the chat model
    assert chat.tasks() == ["remember", "remember", "reconcile"]
    if chat_class is ToolCallingChatModel:
        assert chat.tool_calls == ["answer"] * 3  # its own structured output, no JSON text
    else:
        assert all("JSON schema" in call.system for call in chat.calls)


POLICY = ContextPolicy(recent_max_messages=12, recent_max_tokens=400,
                       summary_trigger_fraction=0.5, summary_keep_messages=4,
                       block_budget_fraction=0.5)


async def _context_with(model: LanguageModel) -> tuple[Any, list[str]]:
    clock = ManualClock()
    async with GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                     clock=clock) as manager:
        tiers = MemoryTiers(long_term=manager, turns=InMemoryTurnStore())
        await tiers.start()
        await converse(tiers, 6, words=20)  # past the summary trigger
        await manager.add(ALICE, MINE, "Dana owns the ingest pipeline", memory_type="fact")
        context = await MemoryContextBuilder(tiers, policy=POLICY, model=model).build(
            ALICE, OWNER, "who owns it?")
        turns = await tiers.recent(ALICE, OWNER)
        extracted = await MemoryExtractor(manager, model).extract(ALICE, OWNER, turns[-2:])
        return context, sorted(r.content for r in extracted.stored)


EXTRACTED = {"facts": [{"content": "Alice asked about the ingest pipeline", "type": "fact",
                        "scope": "user", "importance": 0.8, "entities": []}]}


def _respond(call: ModelCall) -> Any:
    """One answer per task, for the scripted model and the chat model alike."""
    if call.task == "summarize":
        return summary_of(call)
    if call.task == "condense":
        query = "ingest pipeline owner"
        return {"query": query, "wanted_types": ["fact"]} if call.structured else query
    assert call.task == "extract", call.task
    return EXTRACTED


@pytest.mark.parametrize("chat_class", CHAT_MODELS)
async def test_the_context_builder_summarizes_condenses_and_extracts_as_scripted(
        chat_class: type[RespondingChatModel]) -> None:
    chat = chat_class(responder=_respond)
    expected, expected_facts = await _context_with(ScriptedModel(responder=_respond))
    got, facts = await _context_with(LangChainLanguageModel(chat))
    assert got.summary is not None and got.summary.startswith("[8 turns folded")
    assert got.summary == expected.summary
    assert got.standalone_query == expected.standalone_query == "ingest pipeline owner"
    assert got.rewritten and got.degraded == expected.degraded
    assert [m.record.content for m in got.recalled] == [
        m.record.content for m in expected.recalled] == [
        "Dana owns the ingest pipeline"]  # recalled by the condensed query
    assert facts == expected_facts == ["Alice asked about the ingest pipeline"]
    assert set(chat.tasks()) == {"summarize", "condense", "extract"}


# -- failures: typed, unavailable, and silent about the prompt ----------------------------


def _answering(reply: Any) -> RespondingChatModel:
    return RespondingChatModel(responder=lambda call: reply)


@pytest.mark.parametrize(("chat", "structured", "match"), [
    (_answering(RuntimeError("boom secret-prompt")), False, r"failed \(RuntimeError\)"),
    (_answering(APITimeoutError("secret-prompt")), False, "in time"),
    (_answering("   "), False, "holds no text"),
    (_answering("prose, secret-prompt"), True, "not JSON"),
    (_answering("[1, 2]"), True, "not a JSON object"),
    (ToolCallingChatModel(responder=lambda call: RuntimeError("x")), True,
     r"failed \(RuntimeError\)"),
])
async def test_failures_are_typed_and_say_nothing_of_the_prompt(
        chat: RespondingChatModel, structured: bool, match: str) -> None:
    model = LangChainLanguageModel(chat)
    with pytest.raises(LanguageModelError, match=match) as caught:
        if structured:
            await model.generate_structured(system="secret-prompt", user="u", schema=SCHEMA)
        else:
            await model.generate_text(system="secret-prompt", user="secret-user")
    assert isinstance(caught.value, MemoryUnavailableError)
    assert caught.value.code == "model_failed" and "secret" not in str(caught.value)


async def test_a_tool_calling_model_that_calls_no_tool_is_refused() -> None:
    class Chatty(ToolCallingChatModel):
        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> Any:
            return super()._generate(messages, stop, run_manager)  # drops the tools

    chat = Chatty(responder=lambda call: "I would rather chat")
    with pytest.raises(LanguageModelError, match="not the JSON asked for"):
        await LangChainLanguageModel(chat).generate_structured(system="s", user="u",
                                                               schema=SCHEMA)


class _SchemaRefusing(ToolCallingChatModel):
    """Has structured output, but its integration fails to convert some schemas."""

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        if schema.get("properties"):
            raise KeyError("parameters")
        return super().with_structured_output(schema, **kwargs)


async def test_a_schema_the_model_cannot_take_is_asked_as_json_or_refused() -> None:
    auto = _SchemaRefusing(responder=lambda call: {"query": "q"})
    assert await LangChainLanguageModel(auto).generate_structured(
        system="s", user="u", schema=SCHEMA) == {"query": "q"}
    assert auto.tool_calls == [] and "JSON schema" in auto.calls[0].system
    native = LangChainLanguageModel(_SchemaRefusing(responder=lambda call: {"query": "q"}),
                                    structured_output="native")
    with pytest.raises(LanguageModelError, match=r"cannot take the answer's schema \(KeyError"):
        await native.generate_structured(system="s", user="u", schema=SCHEMA)


async def test_a_model_that_never_answers_times_out() -> None:
    model = LangChainLanguageModel(SilentChatModel(), timeout_s=0.05)
    with pytest.raises(LanguageModelError, match="did not answer in time"):
        await model.generate_text(system="s", user="u")


async def test_a_failing_model_degrades_the_turn_and_fails_remember() -> None:
    chat = _answering(ConnectionError("refused"))
    model = LangChainLanguageModel(chat)
    clock = ManualClock()
    async with GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                     clock=clock, language_model=model) as manager:
        tiers = MemoryTiers(long_term=manager, turns=InMemoryTurnStore())
        await tiers.start()
        await converse(tiers, 1, words=3)
        context = await MemoryContextBuilder(tiers, model=model).build(ALICE, OWNER, "who?")
        assert context.standalone_query == "who?"
        assert {"rewrite.structured_failed", "rewrite.failed"} <= set(context.degraded)
        with pytest.raises(LanguageModelError, match="ConnectionError"):
            await manager.remember(ALICE, MINE, says("I prefer green tea"))
        assert (await manager.list(ALICE, MINE)).items == ()


# -- from a profile ---------------------------------------------------------------------

PROFILE = """\
spec_version = 1
id = "langchain-test"
version = "1.0.0"

[provider]
name = "native"

[provider.config]
backend = "{backend}"

[stores.language_model]
kind = "langchain"
config = {config}
"""

FACTS = json.dumps({"facts": [{"content": "Alice prefers green tea", "type": "preference",
                               "importance": 0.7, "confidence": 0.9, "turns": [1]}]})


def _profile(config: str, backend: str = "memory") -> str:
    return PROFILE.format(config=config, backend=backend)


async def test_a_profile_builds_a_shipped_fake_chat_model_that_remembers() -> None:
    config = f'{{ class = "{FAKE_LIST}", args = {{ responses = [{json.dumps(FACTS)}] }} }}'
    manager = GovernedMemoryManager.from_profile(loads_profile(_profile(config)), sinks=[])
    model = manager.language_model
    assert isinstance(model, LangChainLanguageModel)
    assert isinstance(model.chat_model, FakeListChatModel)
    assert repr(model) == "LangChainLanguageModel(model='fake-list-chat-model')"
    async with manager:
        result = await manager.remember(ALICE, MINE, says("I prefer green tea"))
    assert _decisions(result) == [("added", "Alice prefers green tea", "preference",
                                   ("t1",))]
    assert result.model == "langchain:fake-list-chat-model"


def test_the_cli_remembers_through_a_profile_s_langchain_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (BLOCK_ENV, PROFILE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    config = f'{{ class = "{FAKE_LIST}", args = {{ responses = [{json.dumps(FACTS)}] }} }}'
    profile = tmp_path / "team.toml"
    profile.write_text(_profile(config, backend="sqlite"), encoding="utf-8")
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(says("I prefer green tea")), encoding="utf-8")
    result = CliRunner().invoke(cli, ["remember", "--profile", str(profile),
                                      "--db", str(tmp_path / "m.db"), "--tenant", "acme",
                                      "--user", "alice", "--transcript", str(chat), "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert [d["decision"] for d in shown["decisions"]] == ["added"]
    assert shown["model"] == "langchain:fake-list-chat-model"


@pytest.mark.parametrize(("config", "match"), [
    ('{ class = "x.Y", temperature = 0 }', "unknown key.*temperature"),
    ("{ args = {} }", "class: the import path"),
    ('{ class = "no_such_package_gm.Chat" }', "class: cannot import no_such_package_gm"),
    ('{ class = "langchain_core.language_models.NoSuchChat" }', "has no NoSuchChat"),
    ('{ class = "collections.OrderedDict" }', "not a LangChain chat model"),
    ('{ class = "langchain_chat_support.not_a_chat_model" }', "made a object, not a LangChain"),
    ('{ class = "json" }', "not module.Name"),
    (f'{{ class = "{FAKE_LIST}" }}', r"args: .*responses: Field required"),
    (f'{{ class = "{FAKE_LIST}", args = {{ responses = ["a"], bogus = 1 }} }}',
     "args.bogus: FakeListChatModel takes no such argument"),
    (f'{{ class = "{FAKE_LIST}", args = {{ responses = ["a"], api_key = "sk-1" }} }}',
     "args.api_key: a secret does not belong"),
    (f'{{ class = "{FAKE_LIST}", args = {{ responses = ["a"] }}, timeout_s = 0 }}',
     "timeout_s"),
    (f'{{ class = "{FAKE_LIST}", args = {{ responses = ["a"] }}, structured_output = "xml" }}',
     "structured_output: one of"),
    (f'{{ class = "{FAKE_LIST}", args = {{ responses = ["a"] }}, '
     'structured_output = "native" }', "has no structured output of its own"),
])
def test_a_profile_that_cannot_work_is_refused_at_load(config: str, match: str) -> None:
    with pytest.raises(MemoryConfigurationError, match=match) as refused:
        GovernedMemoryManager.from_profile(loads_profile(_profile(config)), sinks=[])
    assert str(refused.value).startswith("stores.language_model.config: ")
    assert "sk-1" not in str(refused.value)


def test_the_plugin_registers_langchain_and_native_structured_output_is_accepted() -> None:
    registration = PluginManager.load().language_models.get("langchain")
    assert registration.plugin == "langchain" and "LangChain" in registration.description
    built = registration.factory({"class": "langchain_chat_support.ToolCallingChatModel",
                                  "args": {"responder": responder},
                                  "structured_output": "native", "timeout_s": 5})
    assert isinstance(built, LangChainLanguageModel) and built.timeout_s == 5.0
    with pytest.raises(MemoryConfigurationError, match="BaseChatModel"):
        LangChainLanguageModel(object())  # type: ignore[arg-type]


def test_plugins_load_without_langchain_and_the_adapter_names_its_extra() -> None:
    script = """
import sys
sys.modules["langchain_core"] = None  # any import of it now raises ImportError
from governed_memory.errors import MemoryConfigurationError
from governed_memory.plugins import PluginManager
registration = PluginManager.load().language_models.get("langchain")
try:
    registration.factory({"class": "x.Y"})
except MemoryConfigurationError as exc:
    print(exc)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pip install 'governed-memory[langchain]'" in done.stdout
