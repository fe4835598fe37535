"""Supersession (issue 9's extraction) closes an old memory with ``invalid_at`` and
``superseded_by``; the Mem0 adapter must keep both, as the native provider does, so an
"as of" read still finds the old row and knows what replaced it."""

from __future__ import annotations

from pathlib import Path

from actors import ADMIN, ALICE_SCOPE
from governed_memory.clock import ManualClock
from governed_memory.manager import GovernedMemoryManager
from governed_memory_mem0 import build_mem0_provider
from mem0_support import local_config


async def test_an_update_keeps_superseded_by_and_invalid_at(tmp_path: Path) -> None:
    clock = ManualClock()
    provider = build_mem0_provider(local_config(tmp_path), clock)
    async with GovernedMemoryManager(provider, clock=clock) as manager:
        old = await manager.add(ADMIN, ALICE_SCOPE, "Alice lives in Lyon")
        new = await manager.add(ADMIN, ALICE_SCOPE, "Alice lives in Porto")
        closed_at = clock.now() + 1
        updated = await manager.update(ADMIN, ALICE_SCOPE, old.id,
                                       expected_revision=old.revision,
                                       invalid_at=closed_at, superseded_by=new.id)
        assert (updated.superseded_by, updated.invalid_at) == (new.id, closed_at)
        again = await manager.get(ADMIN, ALICE_SCOPE, old.id)
        assert (again.superseded_by, again.invalid_at) == (new.id, closed_at)
        assert again.content == "Alice lives in Lyon"
        versions = await manager.history(ADMIN, ALICE_SCOPE, old.id)
        assert [v.record.superseded_by for v in versions] == [None, new.id]
