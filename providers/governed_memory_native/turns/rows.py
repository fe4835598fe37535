"""Row encoding shared by the SQLite and PostgreSQL turn stores: one layout, so a
turn reads back the same from either."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from governed_memory.canonical import canonical_json
from governed_memory.records import json_copy
from governed_memory.scope import Scope
from governed_memory.tiers.turns import Role, ToolCall, Turn

COLUMNS = ("scope_hash", "seq", "turn_id", "role", "content", "name", "tool_call_id",
           "tool_calls", "metadata", "created_at")


def encode(scope: Scope, turn: Turn) -> dict[str, Any]:
    return {
        "scope_hash": turn.scope_hash, "seq": turn.seq, "turn_id": turn.turn_id,
        "tenant_id": scope.tenant_id, "user_id": scope.user_id,
        "role": turn.role.value, "content": turn.content, "name": turn.name,
        "tool_call_id": turn.tool_call_id,
        "tool_calls": canonical_json([[c.id, c.name, c.arguments] for c in turn.tool_calls]),
        "metadata": canonical_json(json_copy(dict(turn.metadata))),
        "created_at": turn.created_at,
    }


def decode(row: Mapping[str, Any]) -> Turn:
    calls = tuple(ToolCall(i, n, a) for i, n, a in json.loads(row["tool_calls"]))
    return Turn(turn_id=row["turn_id"], seq=int(row["seq"]), scope_hash=row["scope_hash"],
                role=Role(row["role"]), content=row["content"],
                created_at=float(row["created_at"]), name=row["name"],
                tool_call_id=row["tool_call_id"], tool_calls=calls,
                metadata=json.loads(row["metadata"]))
