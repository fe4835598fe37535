"""Tier values: request fingerprints, the scripted model, and request validation that
names its field."""

from __future__ import annotations

import pytest
from governed_memory import MemoryValidationError, Scope
from governed_memory.language_models import LanguageModelError, ScriptedModel, task_of
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
    AppendTurnRequest(scope=RUN, turn=TurnDraft.user("hi", metadata={"a": [1, {"b": 2}]})),
    RecentTurnsRequest(scope=RUN, limit=5),
    ListTurnsRequest(scope=RUN, after_seq=3, limit=10), ClearTurnsRequest(scope=RUN),
    ReadWorkingStateRequest(scope=RUN), UpdateWorkingStateRequest(scope=RUN,
                                                                  changes={"x": {"y": 1}},
                                                                  ttl_s=60.0),
    ClearWorkingStateRequest(scope=RUN), EraseUserTurnsRequest(tenant_id="acme", user_id="alice"),
    RecordContextRequest(scopes=(RUN,), injected=(InjectedVersion("01A", 2, "sha256:x",
                                                                  RUN.scope_hash),),
                         degraded=("recall.search_failed.user",)),
])
def test_every_tier_request_validates_and_fingerprints(request_: object) -> None:
    request_.validate()  # type: ignore[attr-defined]
    first = request_.fingerprint()  # type: ignore[attr-defined]
    assert first.startswith("sha256:") and first == request_.fingerprint()  # type: ignore[attr-defined]
    assert request_.target_scopes()  # type: ignore[attr-defined]


def test_fingerprints_tell_requests_apart() -> None:
    assert (AppendTurnRequest(scope=RUN, turn=TurnDraft.user("a")).fingerprint()
            != AppendTurnRequest(scope=RUN, turn=TurnDraft.user("b")).fingerprint())
    assert (RecentTurnsRequest(scope=RUN, limit=5).fingerprint()
            != ListTurnsRequest(scope=RUN, after_seq=0, limit=5).fingerprint())


@pytest.mark.parametrize(("request_", "field"), [
    (RecentTurnsRequest(scope=RUN, limit=0), "limit"),
    (RecentTurnsRequest(scope=RUN, limit=True), "limit"),  # type: ignore[arg-type]
    (ListTurnsRequest(scope=RUN, after_seq=-1), "after_seq"),
    (ListTurnsRequest(scope=RUN, after_seq=0, limit=101), "limit"),
    (UpdateWorkingStateRequest(scope=RUN, changes={"a": 1}, ttl_s=60.0, replace="yes"),  # type: ignore[arg-type]
     "replace"),
    (EraseUserTurnsRequest(tenant_id="acme", user_id="bad*user"), "user_id"),
    (RecordContextRequest(scopes=()), "scopes"),
    (RecordContextRequest(scopes=(RUN, Scope("globex", session_id="s"))), "scopes"),
    (RecordContextRequest(scopes=(RUN,), injected=(InjectedVersion("01A", 1, "h", "sh1:other"),)),
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
