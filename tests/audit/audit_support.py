"""Helpers for the audit tests: synthetic events, trails written by the real sink, and
a copy of a trail to tamper with."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from governed_memory.audit import AuditSink
from governed_memory.events import MemoryEvent


def event(n: int, *, tenant: str = "acme", operation: str = "add") -> MemoryEvent:
    return MemoryEvent(event_id=f"evt_{n:06d}.4", type="memory.write.committed",
                       occurred_at=1_700_000_000.0 + n, operation_id=f"op_{n:06d}",
                       operation=operation, principal_id="user:alice", tenant_id=tenant,
                       scope_hash="sh1:" + "ab" * 32, outcome="committed",
                       record_ids=(f"REC{n:06d}",), versions=(1,), count=1)


async def write_trail(directory: Path, count: int, *, max_file_bytes: int = 4096,
                      **options: object) -> AuditSink:
    sink = AuditSink(directory, max_file_bytes=max_file_bytes, **options)  # type: ignore[arg-type]
    for n in range(count):
        await sink.emit(event(n))
    await sink.close()
    return sink


def copy_trail(source: Path, target: Path) -> list[Path]:
    target.mkdir(parents=True, exist_ok=True)
    files = []
    for path in sorted(source.glob("audit-*.jsonl")):
        files.append(Path(shutil.copy(path, target / path.name)))
    return files


def lines_of(files: list[Path]) -> list[tuple[Path, int]]:
    """(file, index within file) of every line, in chain order."""
    return [(path, index) for path in files
            for index in range(len(path.read_bytes().splitlines()))]


def rewrite(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def files_in(directory: Path) -> list[Path]:
    return sorted(directory.glob("audit-*.jsonl"))


def event_ids_in(directory: Path) -> list[str]:
    return [json.loads(line)["event"]["event_id"] for path in files_in(directory)
            for line in path.read_text().splitlines()
            if json.loads(line)["kind"] == "entry"]


def append_bytes(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def dup(text: bytes, after: bytes, member: bytes) -> bytes:
    """``text`` with ``member`` (``"key":value,``) inserted right after the first
    ``after``: a second copy of a key that object already has, written first."""
    at = text.index(after) + len(after)
    return text[:at] + member + text[at:]
