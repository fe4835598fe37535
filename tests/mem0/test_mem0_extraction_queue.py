"""The Mem0 adapter keeps no extraction queue: queuing a turn's extraction is refused
with a typed capability error (and recorded as a rejected operation), and the turn's
facts are extracted inline instead, as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from governed_memory import Principal, PrincipalKind, Scope
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryCapabilityUnsupportedError
from governed_memory.events import InMemoryEventSink
from governed_memory.language_models import ScriptedModel
from governed_memory.manager import GovernedMemoryManager
from governed_memory.tiers import InMemoryTurnStore, MemoryTiers, TurnDraft
from governed_memory.turncontext import MemoryExtractor
from governed_memory_mem0 import build_mem0_provider
from mem0_support import local_config

ALICE = Principal("user:alice", PrincipalKind.USER, "acme", "alice")
OWNER = Scope("acme", user_id="alice", session_id="s1")


async def test_queuing_is_refused_and_extraction_runs_inline(tmp_path: Path) -> None:
    clock = ManualClock()
    sink = InMemoryEventSink()
    provider = build_mem0_provider(local_config(tmp_path), clock)
    manager = GovernedMemoryManager(provider, clock=clock, sinks=[sink])
    model = ScriptedModel(responder=lambda call: {"facts": [
        {"content": "Alice prefers green tea", "type": "preference", "scope": "user",
         "importance": 0.8}]})
    async with MemoryTiers(long_term=manager, turns=InMemoryTurnStore()) as tiers:
        turns = (await tiers.append(ALICE, OWNER, TurnDraft.user("I prefer green tea.")),
                 await tiers.append(ALICE, OWNER, TurnDraft.assistant("Noted!")))
        extractor = MemoryExtractor(manager, model)
        with pytest.raises(MemoryCapabilityUnsupportedError, match="extraction jobs"):
            await extractor.enqueue(ALICE, OWNER, turns)
        failed = [e for e in sink.events if e.operation == "enqueue_extraction"]
        assert [e.type for e in failed] == ["memory.index.requested",
                                            "memory.index.rejected"]
        result = await extractor.extract(ALICE, OWNER, turns)
        assert [r.content for r in result.stored] == ["Alice prefers green tea"]
