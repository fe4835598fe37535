"""Tier values: request fingerprints, the scripted model, and request validation that
names its field."""

from __future__ import annotations

import pytest
from governed_memory import MemoryValidationError, Scope
from governed_memory.models import LanguageModelError, ScriptedModel, task_of
from governed_memory.tiers.requests import (
    AppendTurnRequest,
    ClearTurnsRequest,
    ClearWorkingStateRequest,
    EraseUserTurnsRequest,
    ListTurnsRequest,
    ReadWorkingStateRequest,
    RecentTurnsRequest,
    RecordContextRequest,
    UpdateWorkingStateRequest,
)
from governed_memory.tiers.results import InjectedVersion
from governed_memory.tiers.turns import TurnDraft

RUN = Scope("acme", user_id="alice", session_id="s1", run_id="r1")


@pytest.mark.parametrize("request_", [
    AppendTurnRequest(RUN, TurnDraft.user("hi", metadata={"a": [1, {"b": 2}]})),
    RecentTurnsRequest(RUN, 5), ListTurnsRequest(RUN, 3, 10), ClearTurnsRequest(RUN),
    ReadWorkingStateRequest(RUN), UpdateWorkingStateRequest(RUN, {"x": {"y": 1}}, 60.0),
    ClearWorkingStateRequest(RUN), EraseUserTurnsRequest("acme", "alice"),
    RecordContextRequest((RUN,), (InjectedVersion("01A", 2, "sha256:x", RUN.scope_hash),),
                         ("recall.search_failed.user",)),
])
def test_every_tier_request_validates_and_fingerprints(request_: object) -> None:
    request_.validate()  # type: ignore[attr-defined]
    first = request_.fingerprint()  # type: ignore[attr-defined]
    assert first.startswith("sha256:") and first == request_.fingerprint()  # type: ignore[attr-defined]
    assert request_.target_scopes()  # type: ignore[attr-defined]


def test_fingerprints_tell_requests_apart() -> None:
    assert (AppendTurnRequest(RUN, TurnDraft.user("a")).fingerprint()
            != AppendTurnRequest(RUN, TurnDraft.user("b")).fingerprint())
    assert (RecentTurnsRequest(RUN, 5).fingerprint()
            != ListTurnsRequest(RUN, 0, 5).fingerprint())


@pytest.mark.parametrize(("request_", "field"), [
    (RecentTurnsRequest(RUN, 0), "limit"),
    (RecentTurnsRequest(RUN, True), "limit"),  # type: ignore[arg-type]
    (ListTurnsRequest(RUN, -1), "after_seq"),
    (ListTurnsRequest(RUN, 0, 101), "limit"),
    (UpdateWorkingStateRequest(RUN, {"a": 1}, 60.0, replace="yes"),  # type: ignore[arg-type]
     "replace"),
    (EraseUserTurnsRequest("acme", "bad*user"), "user_id"),
    (RecordContextRequest(()), "scopes"),
    (RecordContextRequest((RUN, Scope("globex", session_id="s"))), "scopes"),
    (RecordContextRequest((RUN,), (InjectedVersion("01A", 1, "h", "sh1:other"),)),
     "injected[0]"),
])
def test_bad_requests_name_their_field(request_: object, field: str) -> None:
    with pytest.raises(MemoryValidationError) as caught:
        request_.validate()  # type: ignore[attr-defined]
    assert caught.value.field == field


async def test_the_scripted_model_replays_its_script_then_its_responder() -> None:
    model = ScriptedModel(["first", {"a": 1}, '{"b": 2}', LanguageModelError("down")],
                          responder=lambda call: f"for {call.task}")
    assert await model.generate_text(system="Task: one\nx", user="u") == "first"
    assert await model.generate_structured(system="s", user="u", schema={}) == {"a": 1}
    assert await model.generate_structured(system="s", user="u", schema={}) == {"b": 2}
    with pytest.raises(LanguageModelError):
        await model.generate_text(system="s", user="u")
    assert await model.generate_text(system="Task: two", user="u") == "for two"
    assert model.tasks() == ["one", None, None, None, "two"]
    assert task_of("no task line") is None


async def test_an_exhausted_script_and_bad_structured_replies_are_model_errors() -> None:
    empty = ScriptedModel()
    with pytest.raises(LanguageModelError, match="no reply"):
        await empty.generate_text(system="s", user="u")
    odd = ScriptedModel(["not json", "[1]"])
    with pytest.raises(LanguageModelError, match="not JSON"):
        await odd.generate_structured(system="s", user="u", schema={})
    with pytest.raises(LanguageModelError, match="JSON object"):
        await odd.generate_structured(system="s", user="u", schema={})
