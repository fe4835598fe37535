"""The rolling session summary: one row per session, folded forward, never re-read.

The summary is a ``summary`` memory in the session's exact scope (``narrow(owner,
SESSION)``: tenant, workspace, user, session, agent and domain pack, not the project)
under the deterministic key ``summary:<session_id>``, so a session never accumulates
duplicates (the key is unique in its scope; a concurrent first write loses with a
conflict), and a session whose project context changes keeps its one summary, as its
turns are kept, while another user's session of the same id never sees it.
``metadata["last_covered_seq"]`` is the coverage frontier: every turn at or before it
is in the summary, and no later refresh sends those turns to the model again.
``source_turn_ids`` lists only the turns the latest fold took in, so the row never
grows without bound. Each fold is saved at once (compare-and-set on the revision), so
a crash mid-catch-up loses nothing: the next turn resumes from the saved frontier.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from governed_memory.language_models import LanguageModel, LanguageModelError
from governed_memory.limits import MAX_KEY_BYTES
from governed_memory.manager import GovernedMemoryManager
from governed_memory.principal import Principal
from governed_memory.records import MemoryRecord, MemoryType, Provenance
from governed_memory.scope import Scope
from governed_memory.tiers.turns import Turn
from governed_memory.turncontext.prompts import SUMMARIZE_SYSTEM, summarize_user
from governed_memory.turncontext.ranking import is_valid_at

FRONTIER = "last_covered_seq"
FRONTIER_TURN = "last_covered_turn_id"
SOURCES = "source_turn_ids"
MAX_SUMMARY_CHARS = 8000


def summary_key(session_id: str) -> str:
    key = f"summary:{session_id}"
    if len(key.encode("utf-8")) <= MAX_KEY_BYTES:
        return key
    return "summary:sha256:" + hashlib.sha256(session_id.encode("utf-8")).hexdigest()


def frontier(record: MemoryRecord | None) -> int:
    if record is None:
        return 0
    value = record.metadata.get(FRONTIER)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


async def load_summary(memories: GovernedMemoryManager, principal: Principal,
                       session: Scope, now: float) -> MemoryRecord | None:
    assert session.session_id is not None
    # A lookup, not a get: the first turns of a session have no summary yet, and that
    # expected miss must not read as a failed get in the trail.
    record = await memories.lookup(principal, session, key=summary_key(session.session_id))
    if record is None:
        return None
    if record.memory_type is not MemoryType.SUMMARY or not is_valid_at(record, now):
        return None
    return record


async def fold(memories: GovernedMemoryManager, model: LanguageModel, principal: Principal,
               session: Scope, prior: MemoryRecord | None,
               turns: Sequence[Turn]) -> MemoryRecord:
    """Summarize ``turns`` into ``prior`` and save it; raises on any failure (the
    caller degrades)."""
    assert session.session_id is not None and turns
    text = await model.generate_text(system=SUMMARIZE_SYSTEM,
                                     user=summarize_user(prior.content if prior else None,
                                                         turns))
    if not isinstance(text, str) or not text.strip():
        raise LanguageModelError("the summary model answered with nothing")
    text = text.strip()[:MAX_SUMMARY_CHARS]
    metadata: dict[str, Any] = {FRONTIER: turns[-1].seq, FRONTIER_TURN: turns[-1].turn_id,
                                SOURCES: [t.turn_id for t in turns]}
    if prior is None:
        return await memories.add(
            principal, session, text, memory_type=MemoryType.SUMMARY,
            key=summary_key(session.session_id), metadata=metadata, importance=0.5,
            provenance=Provenance(source_type="summary", session_id=session.session_id))
    return await memories.update(principal, session, prior.id,
                                 expected_revision=prior.revision, content=text,
                                 metadata=metadata)
