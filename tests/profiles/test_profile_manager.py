"""Building managers from profiles and domain packs: the profile's provider, policies
and deadline are used, and its id, version and revision reach every event and span."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from actors import ADMIN, ALICE, ALICE_SCOPE
from governed_memory import (
    GovernedMemoryManager,
    MemoryPolicyDeniedError,
    MemoryValidationError,
    Scope,
    hookimpl,
)
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.events import InMemoryEventSink
from governed_memory.plugins import PluginManager
from governed_memory.profiles import (
    DomainPack,
    PackRegistry,
    ProfileRegistry,
    dependency_hash,
    parse_profile,
)
from governed_memory_native import NativeMemoryProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from profile_support import installed

MEMORY = {"backend": "memory"}


@pytest.fixture(scope="module")
def plugins() -> PluginManager:
    return installed()


def manager_for(reference: str, plugins: PluginManager, sink: InMemoryEventSink,
                **kwargs: Any) -> GovernedMemoryManager:
    return GovernedMemoryManager.from_profile(reference, plugins=plugins, clock=ManualClock(),
                                              sinks=[sink], provider_config_overrides=MEMORY,
                                              **kwargs)


async def test_events_and_spans_carry_the_profile_reference_and_revision(
        plugins: PluginManager) -> None:
    sink, spans = InMemoryEventSink(), InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(spans))
    spec = ProfileRegistry.from_plugins(plugins).get("chat-assistant@1.0.0")
    manager = manager_for("chat-assistant@1.0.0", plugins, sink, tracer_provider=tracer)
    assert manager.profile_spec == spec
    async with manager:
        record = await manager.add(ALICE, ALICE_SCOPE, "Alice likes green tea")
        await manager.search(ALICE, ALICE_SCOPE, "tea")
        with pytest.raises(MemoryValidationError):
            await manager.add(ALICE, ALICE_SCOPE, "   ")
    assert record.expires_at is not None  # the profile's retention applied
    # The profile turns the search cache on, which adds its own memory.cache.* events.
    assert len([e for e in sink.events if not e.type.startswith("memory.cache.")]) == 5
    assert any(e.type.startswith("memory.cache.") for e in sink.events)
    for event in sink.events:
        assert (event.profile_id, event.profile_version, event.profile_revision) == (
            "chat-assistant", "1.0.0", spec.revision)
    finished = spans.get_finished_spans()
    assert finished
    for span in finished:
        assert span.attributes is not None
        assert span.attributes["governed_memory.profile"] == "chat-assistant@1.0.0"
        assert span.attributes["governed_memory.profile.revision"] == spec.revision


async def test_the_profile_builds_provider_policies_and_deadline(plugins: PluginManager) -> None:
    manager = manager_for("agent-run@1.0.0", plugins, InMemoryEventSink())
    assert isinstance(manager._provider, NativeMemoryProvider)
    assert [p.name for p in manager.policy_engine.policies] == [
        "permissions", "write-rules", "secret-guard", "retention", "quotas"]
    assert manager.activity.timeout_s == 5.0
    run = Scope("acme", user_id="alice", run_id="r1")
    async with manager:
        with pytest.raises(MemoryPolicyDeniedError, match="needs an idempotency_key") as info:
            await manager.add(ALICE, run, "tool said hello")
        assert info.value.reasons == ("write-rules: add needs an idempotency_key in this "
                                      "profile",)
        with pytest.raises(MemoryPolicyDeniedError, match="run_id"):
            await manager.add(ALICE, ALICE_SCOPE, "no run", idempotency_key="k0")
        record = await manager.add(ALICE, run, "tool said hello", memory_type="episode",
                                   idempotency_key="k1")
        assert record.expires_at == pytest.approx(record.created_at + 3600)


async def test_search_defaults_to_the_profiles_top_k(plugins: PluginManager) -> None:
    async with manager_for("agent-run@1.0.0", plugins, InMemoryEventSink()) as manager:
        run = Scope("acme", user_id="alice", run_id="r1")
        for i in range(7):
            await manager.add(ALICE, run, f"tea note {i}", idempotency_key=f"k{i}")
        assert len((await manager.search(ALICE, run, "tea")).hits) == 5  # top_k = 5
        assert len((await manager.search(ALICE, run, "tea", limit=7)).hits) == 7


async def test_policy_revision_differs_between_profiles(plugins: PluginManager) -> None:
    chat = manager_for("chat-assistant@1.0.0", plugins, InMemoryEventSink())
    agent = manager_for("agent-run@1.0.0", plugins, InMemoryEventSink())
    assert chat.policy_engine.revision != agent.policy_engine.revision


def test_a_spec_can_be_passed_directly(plugins: PluginManager) -> None:
    spec = parse_profile({"id": "inline", "version": "0.0.1",
                          "provider": {"config": {"backend": "memory"}}})
    manager = GovernedMemoryManager.from_profile(spec, plugins=plugins)
    assert manager.activity.profile == spec.ref


def test_overrides_do_not_change_the_revision_and_are_checked(plugins: PluginManager) -> None:
    with pytest.raises(MemoryConfigurationError, match=r"provider\.config: .*busy_timeout"):
        GovernedMemoryManager.from_profile("local@1.0.0", plugins=plugins,
                                           provider_config_overrides={"busy_timeout": 1})
    manager = GovernedMemoryManager.from_profile("local@1.0.0", plugins=plugins,
                                                 provider_config_overrides=MEMORY)
    assert manager.activity.profile.revision == manager.profile_spec.revision  # type: ignore[union-attr]


def test_unknown_profile(plugins: PluginManager) -> None:
    with pytest.raises(MemoryConfigurationError, match=r"unknown profile nope@1.0.0; registered: "
                                                       "agent-run@1.0.0, chat-assistant@1.0.0"):
        GovernedMemoryManager.from_profile("nope@1.0.0", plugins=plugins)


# -- domain packs --------------------------------------------------------------------------------


def test_the_example_pack_and_its_dependency_hash(plugins: PluginManager) -> None:
    profiles = ProfileRegistry.from_plugins(plugins)
    resolved = PackRegistry.from_plugins(plugins).resolve("support-desk@1.0.0", profiles)
    assert resolved.pack.uses == ("agent", "chat")
    assert resolved.profile_for("chat").key == "chat-assistant@1.0.0"
    assert resolved.profile_for("agent").key == "agent-run@1.0.0"
    assert resolved.dependency_hash == dependency_hash(
        {"chat": profiles.get("chat-assistant@1.0.0"), "agent": profiles.get("agent-run@1.0.0")})
    with pytest.raises(MemoryConfigurationError, match="has no use 'workflow'; it selects "
                                                       "agent, chat"):
        resolved.profile_for("workflow")


def test_dependency_hash_covers_the_selected_revisions(plugins: PluginManager) -> None:
    profiles = ProfileRegistry.from_plugins(plugins)
    chat = profiles.get("chat-assistant@1.0.0")
    changed = attrs.evolve(chat, description="edited without a version bump")
    before = dependency_hash({"chat": chat})
    assert dependency_hash({"chat": changed}) != before
    assert dependency_hash({"assistant": chat}) != before  # the use is covered too
    assert dependency_hash({"chat": chat}) == before


def test_packs_must_pin_versions_and_be_consistent() -> None:
    with pytest.raises(MemoryConfigurationError, match="must pin a version"):
        DomainPack("desk", "1.0.0", {"chat": "chat-assistant"})
    with pytest.raises(MemoryConfigurationError, match="selects no profile"):
        DomainPack("desk", "1.0.0", {})
    with pytest.raises(MemoryConfigurationError, match="not a semantic version"):
        DomainPack("desk", "1", {"chat": "chat-assistant@1.0.0"})
    registry = PackRegistry()
    registry.register(DomainPack("desk", "1.0.0", {"chat": "chat-assistant@1.0.0"}), origin="a")
    registry.register(DomainPack("desk", "1.0.0", {"chat": "chat-assistant@1.0.0"}), origin="b")
    with pytest.raises(MemoryConfigurationError, match="registered twice"):
        registry.register(DomainPack("desk", "1.0.0", {"chat": "local@1.0.0"}), origin="c")
    assert registry.get("desk").key == "desk@1.0.0"


def test_a_pack_selecting_an_unknown_profile_says_which_use(plugins: PluginManager) -> None:
    registry = PackRegistry()
    registry.register(DomainPack("desk", "1.0.0", {"chat": "chat-assistant@9.9.9"}))
    with pytest.raises(MemoryConfigurationError,
                       match=r"desk@1\.0\.0: selections\.chat: unknown profile"):
        registry.resolve("desk@1.0.0", ProfileRegistry.from_plugins(plugins))


class DeskPack:
    @staticmethod
    @hookimpl
    def register_domain_packs(register: Callable[..., None]) -> None:
        register(DomainPack("desk", "2.0.0", {"chat": "local@1.0.0",
                                              "agent": "agent-run@1.0.0"}))


async def test_from_pack_builds_the_selected_profile() -> None:
    plugins = PluginManager.load([DeskPack], blocked=[])
    assert [p.key for p in PackRegistry.from_plugins(plugins).all()] == [
        "desk@2.0.0", "support-desk@1.0.0"]
    sink = InMemoryEventSink()
    manager = GovernedMemoryManager.from_pack("support-desk@1.0.0", "chat", plugins=plugins,
                                              sinks=[sink], provider_config_overrides=MEMORY)
    assert manager.domain_pack is not None
    assert manager.domain_pack.pack.key == "support-desk@1.0.0"
    async with manager:
        await manager.add(ADMIN, ALICE_SCOPE, "from the pack")
    assert {e.profile_id for e in sink.events} == {"chat-assistant"}
    local = GovernedMemoryManager.from_pack("desk", "chat", plugins=plugins,
                                            provider_config_overrides=MEMORY)
    assert local.activity.profile.id == "local"


async def test_minimal_event_detail_leaves_content_hashes_out(plugins: PluginManager) -> None:
    strict, chat = InMemoryEventSink(), InMemoryEventSink()
    for reference, sink in (("compliance-strict@1.0.0", strict), ("chat-assistant@1.0.0", chat)):
        async with manager_for(reference, plugins, sink) as manager:
            await manager.add(ALICE, ALICE_SCOPE, "prefers decaf", idempotency_key="k1")
    assert strict.events[-1].type == chat.events[-1].type == "memory.write.committed"
    assert strict.events[-1].content_hashes == ()
    assert len(chat.events[-1].content_hashes) == 1
