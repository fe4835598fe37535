"""A profile's ``[audit]`` section names its sinks: strictly loaded (unknown keys and
settings that would do nothing are refused, by dotted path), built through the sink
registry by ``build_sinks`` with relative paths under the host's base directory, and
checked when the profile is registered."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from actors import ALICE, ALICE_SCOPE
from audit_support import event
from governed_memory.audit import AuditSink, iter_entries, verify_trail
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.events import JsonLinesEventSink, MemoryEvent, read_events
from governed_memory.hookspecs import hookimpl
from governed_memory.manager import GovernedMemoryManager
from governed_memory.plugins import PluginManager
from governed_memory.profiles import ProfileLoadError, ProfileRegistry, parse_profile
from governed_memory.sinks import build_sinks

BASE = {"spec_version": 1, "id": "audited", "version": "1.0.0",
        "provider": {"name": "native", "config": {"backend": "memory"}}}


def profile(audit: Mapping[str, Any]) -> Any:
    return parse_profile({**BASE, "audit": dict(audit)})


class Recording:
    """A third-party sink: keeps its config and the events it got."""

    name = "recording"

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)
        self.events: list[MemoryEvent] = []

    async def emit(self, event: MemoryEvent) -> None:
        self.events.append(event)

    async def close(self) -> None:
        return None


def _third_party(factory: Callable[[Mapping[str, Any]], Any] = Recording) -> PluginManager:
    class RecordingPlugin:
        @staticmethod
        @hookimpl
        def register_event_sinks(register: Callable[..., None]) -> None:
            register("recording", factory)

    return PluginManager.load([RecordingPlugin()])


@pytest.mark.parametrize(("audit", "path"), [
    ({"colour": "red"}, "audit.colour"),
    ({"path": ""}, "audit.path"),
    ({"path": 3}, "audit.path"),
    ({"fsync": "never"}, "audit.fsync"),  # configures a trail no path names
    ({"max_file_bytes": 8192}, "audit.max_file_bytes"),
    ({"path": "t", "fsync": "sometimes"}, "audit.fsync"),
    ({"path": "t", "fsync_interval_s": 1.0}, "audit.fsync_interval_s"),  # not "interval"
    ({"path": "t", "fsync": "interval", "fsync_interval_s": 0.0}, "audit.fsync_interval_s"),
    ({"path": "t", "max_file_bytes": 100}, "audit.max_file_bytes"),
    ({"path": "t", "checkpoint_every": 10}, "audit.checkpoint_every"),
    ({"path": "t", "checkpoint_path": "c.jsonl"}, "audit.checkpoint_path"),
    ({"path": "t", "checkpoint_path": "c", "checkpoint_every": 0}, "audit.checkpoint_every"),
    ({"sinks": {"audit": {"directory": "x"}}}, "audit.sinks.audit"),
    ({"sinks": {"jsonl": "events.jsonl"}}, "audit.sinks.jsonl"),
])
def test_a_bad_audit_section_is_refused_by_its_path(audit: dict[str, Any], path: str) -> None:
    with pytest.raises(ProfileLoadError) as caught:
        profile(audit)
    assert any(problem.startswith(f"{path}:") for problem in caught.value.problems), (
        caught.value.problems)


def test_no_sink_named_builds_none() -> None:
    assert build_sinks(parse_profile(BASE)) == ()


def test_sinks_are_built_in_order_with_paths_under_the_base(tmp_path: Path) -> None:
    spec = profile({"path": "trail", "fsync": "interval", "fsync_interval_s": 0.25,
                    "max_file_bytes": 8192, "checkpoint_path": "/abs/checkpoints.jsonl",
                    "checkpoint_every": 100,
                    "sinks": {"recording": {"topic": "audit", "nested": {"a": [1, 2]}},
                              "jsonl": {"path": "log/events.jsonl", "fsync": True}}})
    trail, log, recording = build_sinks(spec, _third_party(), base_dir=tmp_path)
    assert isinstance(trail, AuditSink) and isinstance(log, JsonLinesEventSink)
    assert (trail.directory, trail.fsync, trail.fsync_interval_s, trail.max_file_bytes,
            trail.checkpoint_path, trail.checkpoint_every) == (
        tmp_path / "trail", "interval", 0.25, 8192, Path("/abs/checkpoints.jsonl"), 100)
    assert log.path == tmp_path / "log" / "events.jsonl"
    assert isinstance(recording, Recording)
    assert recording.config == {"topic": "audit", "nested": {"a": [1, 2]}}  # as written
    assert not (tmp_path / "trail").exists()  # building opens nothing


async def test_without_a_base_relative_paths_are_the_current_directorys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (trail,) = build_sinks(profile({"path": "trail"}))
    monkeypatch.chdir(tmp_path)  # where the process is when the trail opens
    await trail.emit(event(0))
    await trail.close()
    assert verify_trail([tmp_path / "trail"]).entries == 1


@pytest.mark.parametrize(("factory", "detail"), [
    (lambda config: 42, "built no EventSink"),
    (lambda config: 1 / 0, "could not be built: ZeroDivisionError"),
])
def test_a_sink_factory_that_fails_names_the_profile_path(
        factory: Callable[[Mapping[str, Any]], Any], detail: str) -> None:
    spec = profile({"sinks": {"recording": {}}})
    with pytest.raises(ProfileLoadError, match=detail) as caught:
        build_sinks(spec, _third_party(factory))
    assert caught.value.problems[0].startswith("audit.sinks.recording:")


def test_a_registered_profile_naming_an_unknown_sink_is_unusable() -> None:
    class TeamProfiles:
        @staticmethod
        @hookimpl
        def register_memory_profiles(register: Callable[..., None]) -> None:
            register({**BASE, "audit": {"sinks": {"kafka": {}}}})

    entry = ProfileRegistry.from_plugins(PluginManager.load([TeamProfiles()])).entry(
        "audited@1.0.0")
    assert not entry.usable
    assert "audit.sinks.kafka: unknown event sink 'kafka'" in str(entry.problem)


def test_where_the_trail_goes_counts_in_the_revision() -> None:
    assert profile({"path": "a"}).revision != profile({"path": "b"}).revision


async def test_a_fail_closed_manager_records_into_the_sinks_its_profile_names(
        tmp_path: Path) -> None:
    # What from_profile does when a caller passes no sinks (the lead wires it there).
    spec = profile({"fail_closed": True, "path": "trail",
                    "sinks": {"jsonl": {"path": "events.jsonl"}}})
    sinks = build_sinks(spec, base_dir=tmp_path)
    async with GovernedMemoryManager.from_profile(spec, clock=ManualClock(),
                                                  sinks=sinks) as memory:
        record = await memory.add(ALICE, ALICE_SCOPE, "likes green tea")
        await memory.get(ALICE, ALICE_SCOPE, record.id)
    verification = verify_trail([tmp_path / "trail"])
    assert verification.ok and verification.entries == 4
    trail_ids = [entry.event["event_id"] for entry in iter_entries([tmp_path / "trail"])]
    assert [e.event_id for e in read_events(tmp_path / "events.jsonl")] == trail_ids


async def test_the_jsonl_factory_is_strict(tmp_path: Path) -> None:
    factory = PluginManager.load().sinks.get("jsonl").factory
    sink = factory({"path": str(tmp_path / "e.jsonl"), "fsync": True})
    await sink.emit(event(0))
    await sink.close()
    assert [e.event_id for e in read_events(tmp_path / "e.jsonl")] == [event(0).event_id]
    for config in ({}, {"path": ""}, {"path": "e", "fsync": "yes"}, {"path": "e", "x": 1}):
        with pytest.raises(MemoryConfigurationError, match="jsonl sink"):
            factory(config)
