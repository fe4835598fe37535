"""What the tier tools hand back: turns, working state and the per-turn context as quoted
data, writes as what was done.

The rules are :mod:`~governed_memory_service.mcp_output`'s: a tool result goes straight
into a language model's context, so text someone stored (a turn's content, its tool
calls and metadata, a run's working state) is returned only inside the context
builder's ``<memory-data>`` boundary, one JSON object per line with ``<``, ``>`` and
``&`` escaped, and never repeated as structured content. A turn or a working state is
the object the REST route returns (``unstructure``), with its times as ISO 8601 and
without the scope hash. ``build_context`` answers with the builder's own
``memory_block``, byte for byte what the REST route returns in it (followed, when the
context is incomplete, by what it had to do without), and the rest of the context as
structured content that quotes nothing stored: which memory versions were injected,
which turns form the window, the ``degraded`` codes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from governed_memory import Scope
from governed_memory.converter import unstructure
from governed_memory.tiers import Block, BlockHistory, Turn, WorkingState
from governed_memory.turncontext.render import escape, render_block, render_blocks
from governed_memory.turncontext.result import MemoryContext
from mcp.types import CallToolResult, TextContent

from governed_memory_service.mcp_output import NO_MEMORIES

__all__ = ["INCOMPLETE", "NO_TURNS", "NO_WORKING_STATE", "context_result", "turn_written",
           "turns_block", "working_state_block", "working_state_written"]

NO_TURNS = "No turns. (This session has none here, or none after after_seq.)"
NO_WORKING_STATE = "No working state. (This run has none: never set, cleared or expired.)"
INCOMPLETE = "No memories could be recalled."


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def _quoted(body: Mapping[str, Any]) -> str:
    # The renderer's escaping: no '<', '>' or '&' survives, so no entry can close the block.
    return escape(json.dumps(body, ensure_ascii=False, sort_keys=True))


def _turn(turn: Turn) -> dict[str, Any]:
    body: dict[str, Any] = unstructure(turn)
    del body["scope_hash"]
    body["created_at"] = _iso(turn.created_at)
    return {name: value for name, value in body.items() if value not in (None, [], {})}


def _text(text: str, summary: Mapping[str, Any] | None = None) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=None if summary is None else dict(summary))


def turns_block(turns: tuple[Turn, ...]) -> CallToolResult:
    """A session's turns, oldest first, as one quoted data block."""
    return _text(render_block([_quoted(_turn(turn)) for turn in turns]) or NO_TURNS)


def turn_written(turn: Turn, scope: Scope) -> CallToolResult:
    """What an append did (the turn's id, its place in the session, the session scope
    it went to), without the content back."""
    summary = {"appended": turn.turn_id, "seq": turn.seq, "role": turn.role.value,
               "scope": scope.dimensions()}
    return _text(json.dumps(summary), summary)


def working_state_block(state: WorkingState | None) -> CallToolResult:
    """A run's working state (its keys, revision and times) as quoted data."""
    if state is None:
        return _text(NO_WORKING_STATE)
    body: dict[str, Any] = unstructure(state)
    del body["scope_hash"]
    body["updated_at"], body["expires_at"] = _iso(state.updated_at), _iso(state.expires_at)
    return _text(render_block([_quoted(body)]))


def working_state_written(state: WorkingState, scope: Scope) -> CallToolResult:
    """What an update did: the new revision and expiry, how many keys the state now
    holds, the run scope; not the state back."""
    summary = {"revision": state.revision, "keys": len(state.state),
               "updated_at": _iso(state.updated_at), "expires_at": _iso(state.expires_at),
               "scope": scope.dimensions()}
    return _text(json.dumps(summary), summary)


def context_result(context: MemoryContext) -> CallToolResult:
    """The per-turn context: its quoted memory block as the text, and as structured
    content the versions it injected, the window's turn ids, the summary's version,
    what it had to do without (``degraded``), and its cost against the total budget
    (``total_tokens``, ``total_budget_tokens`` and what the total ``cuts``).

    The builder fails a turn only on its owner; a read it may not make (no
    ``memory:read``) or that fails degrades the context instead. So an incomplete
    context says so in the text too (the ``degraded`` codes, a closed set), and an
    empty one is never told as "nothing is stored" when the builder could not look."""
    text = context.memory_block or (INCOMPLETE if context.degraded else NO_MEMORIES)
    if context.blocks_text:
        text = f"{context.blocks_text}\n\n{text}"
    if context.degraded:
        text += f"\n\nThis context is incomplete: {', '.join(context.degraded)}."
    summary = {
        "recalled": [{"id": m.record.id, "version": m.record.version, "level": m.level.value,
                      "score": round(m.score, 4)} for m in context.recalled],
        "window_turn_ids": [turn.turn_id for turn in context.messages],
        "summary_version": context.summary_version,
        "degraded": list(context.degraded),
        "window_tokens": context.window_tokens, "block_tokens": context.block_tokens,
        "blocks": [{"name": b.name, "version": b.version} for b in context.blocks],
        "blocks_tokens": context.blocks_tokens, "summary_tokens": context.summary_tokens,
        "total_tokens": context.total_tokens,
        "total_budget_tokens": context.total_budget_tokens,
        "cuts": [{"part": c.part, "removed": c.removed, "unit": c.unit, "tokens": c.tokens}
                 for c in context.cuts]}
    return _text(text, summary)


def blocks_result(blocks: tuple[Block, ...]) -> CallToolResult:
    """Memory blocks as the prompt shows them (quoted data), with each one's version
    as structured content: the version an edit names to be a compare-and-set."""
    summary = {"blocks": [{"name": b.name, "version": b.version, "chars": b.chars,
                           "limit": b.limit} for b in blocks]}
    return _text(render_blocks(blocks), summary)


def block_written(block: Block, scope: Scope) -> CallToolResult:
    """What an edit did: the block's new version and size against its limit, and the
    scope it lives in; the text is not echoed (read it back to see it)."""
    summary = {"name": block.name, "version": block.version, "chars": block.chars,
               "limit": block.limit, "scope": scope.dimensions()}
    return _text(json.dumps(summary), summary)


def block_history_result(history: BlockHistory) -> CallToolResult:
    """A block's stored versions, newest first, each as quoted data."""
    if not history.versions:
        return _text(f"No stored versions of block {history.name!r}: it still reads as "
                     "the profile's initial text.")
    return _text(render_block([_quoted({"version": v.version, "edit": v.edit,
                                        "updated_at": _iso(v.updated_at), "value": v.value})
                               for v in history.versions]))
