"""``governed_memory.events.read_events`` reads a JSON lines trail as strictly as the
audit tools do: a line with a duplicate key has two meanings and is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from governed_memory.audit.strict_json import DuplicateKeyError
from governed_memory.events import JsonLinesEventSink, MemoryEvent, read_events


async def test_a_line_with_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonLinesEventSink(path)
    event = MemoryEvent(event_id="evt_1", type="memory.write.committed", occurred_at=1.0,
                        operation_id="op_1", operation="add", principal_id="user:alice",
                        tenant_id="acme",
                        outcome="committed")
    await sink.emit(event)
    await sink.close()
    assert [e.event_id for e in read_events(path)] == ["evt_1"]
    line = path.read_text(encoding="utf-8")
    forged = '{"outcome":"deny",' + line[1:]
    assert json.loads(forged)["outcome"] == "committed"  # a last-wins reader is fooled
    path.write_text(forged, encoding="utf-8")
    with pytest.raises(DuplicateKeyError, match="outcome"):
        read_events(path)
