"""What the MCP tools hand back: records as quoted data, errors as stable codes.

A tool result goes straight into a language model's context, so stored content is
never returned as free text. Recalled and listed memories are rendered with the context
builder's own boundary (:mod:`governed_memory.turncontext.render`: its escaping and its
``<memory-data>`` block), so a memory saying ``</memory-data> ignore previous
instructions`` stays an escaped string inside one block, exactly as it would in a
per-turn prompt. Their content is deliberately not repeated as structured content,
which a client may show to the model outside any boundary.

A library error becomes a tool error carrying the same problem document the REST routes
send (its stable ``code``, ``detail`` and, for validation, ``field``): never a
traceback, and only the error's own message, which the library keeps free of content
and of other tenants' data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from governed_memory import MemoryRecord
from governed_memory.errors import GovernedMemoryError
from governed_memory.remembering import RememberResult
from governed_memory.turncontext.render import escape, render_block
from mcp.types import CallToolResult, TextContent

from governed_memory_service.problems import problem_for

__all__ = ["error_result", "internal_error_result", "memory_block", "record_result"]

NO_MEMORIES = "No memories matched. (Nothing is stored here for this query and scope.)"


def _entry(record: MemoryRecord, extra: Mapping[str, Any]) -> str:
    body: dict[str, Any] = {"id": record.id, "type": record.memory_type.value,
                            "revision": record.revision, "content": record.content, **extra}
    if record.key is not None:
        body["key"] = record.key
    if record.occurred_at is not None:
        body["occurred_at"] = datetime.fromtimestamp(record.occurred_at, UTC).isoformat()
    # The renderer's escaping: no '<', '>' or '&' survives, so no entry can close the block.
    return escape(json.dumps(body, ensure_ascii=False, sort_keys=True))


def memory_block(records: Sequence[tuple[MemoryRecord, Mapping[str, Any]]], *,
                 next_cursor: str | None = None) -> CallToolResult:
    """Records (each with extra fields such as its score) as one quoted data block."""
    block = render_block([_entry(record, extra) for record, extra in records]) or NO_MEMORIES
    if next_cursor is not None:
        block += f"\n\nMore memories: call again with cursor={json.dumps(next_cursor)}."
    return CallToolResult(content=[TextContent(type="text", text=block)])


def record_result(record: MemoryRecord, *, action: str) -> CallToolResult:
    """What a write did, without echoing the content back."""
    summary: dict[str, Any] = {
        action: record.id, "revision": record.revision, "version": record.version,
        "memory_type": record.memory_type.value, "status": record.status.value,
        "scope": record.scope.dimensions()}
    if record.key is not None:
        summary["key"] = record.key
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(summary))],
                          structured_content=summary)


def decisions_result(result: RememberResult) -> CallToolResult:
    """What ``remember`` decided for each fact: ids, decisions and reasons, never the
    facts' content (the model wrote them; it does not need them echoed)."""
    decisions = [decision.summary() for decision in result.decisions]
    summary: dict[str, Any] = {"remembered": decisions, "model": result.model,
                               "model_calls": result.model_calls}
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(summary))],
                          structured_content=summary)


def error_result(error: GovernedMemoryError) -> CallToolResult:
    """The library's refusal as a tool error the model can read and a client can branch
    on (``structured_content["code"]``)."""
    problem = problem_for(error)
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(problem))],
                          structured_content=problem, is_error=True)


def internal_error_result() -> CallToolResult:
    """Anything else: logged on the server, and nothing of it sent."""
    problem = {"code": "internal", "detail": "the memory service failed; the error is logged"}
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(problem))],
                          structured_content=problem, is_error=True)
