"""Sinks do their file work off the event loop, in emit order, durably (defect 11).

Which thread called ``os.write``/``os.fsync`` is recorded rather than timed: a sink
that wrote on the loop's thread fails however fast the disk is. Order and
cancellation are pinned with a gate the test opens, not with sleeps.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from audit_support import event, event_ids_in, files_in
from governed_memory.audit import AuditSink, Checkpoint, verify_trail
from governed_memory.errors import MemoryUnavailableError
from governed_memory.events import EventSink, JsonLinesEventSink, read_events


class Calls:
    """The threads ``os.write`` and ``os.fsync`` ran on, for files under one root."""

    def __init__(self) -> None:
        self.threads: list[tuple[str, int]] = []

    def record(self, name: str) -> None:
        self.threads.append((name, threading.get_ident()))

    def on(self, thread: int) -> list[str]:
        return [name for name, ident in self.threads if ident == thread]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Calls]:
    seen = Calls()
    real_write, real_fsync = os.write, os.fsync

    def write(fd: int, data: bytes) -> int:
        seen.record("write")
        return real_write(fd, data)

    def fsync(fd: int) -> None:
        seen.record("fsync")
        real_fsync(fd)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    yield seen


SINKS: dict[str, Callable[[Path], EventSink]] = {
    "jsonl": lambda d: JsonLinesEventSink(d / "events.jsonl"),
    "jsonl-fsync": lambda d: JsonLinesEventSink(d / "events.jsonl", fsync=True),
    "audit-always": lambda d: AuditSink(d, max_file_bytes=4096),
    "audit-interval": lambda d: AuditSink(d, fsync="interval", max_file_bytes=4096),
    # never appends inline when nothing can block, but rotation and checkpoints fsync
    "audit-never-rotating": lambda d: AuditSink(d, fsync="never", max_file_bytes=4096,
                                                checkpoint_path=d.parent / "c.jsonl",
                                                checkpoint_every=7),
}


@pytest.mark.parametrize("kind", sorted(SINKS))
async def test_no_fsync_on_the_event_loop(tmp_path: Path, calls: Calls, kind: str) -> None:
    sink = SINKS[kind](tmp_path / "trail")
    for n in range(30):  # several rotations for the audit sinks
        await sink.emit(event(n))
    await sink.close()
    loop_thread = threading.get_ident()
    assert "fsync" not in calls.on(loop_thread)
    if not kind.startswith("audit-never"):
        assert calls.on(loop_thread) == []  # no write either
    if kind != "jsonl":
        assert any(name == "fsync" for name, _ in calls.threads)


async def test_the_jsonl_sink_keeps_emit_order_under_concurrency(tmp_path: Path) -> None:
    sink = JsonLinesEventSink(tmp_path / "events.jsonl", fsync=True)
    await asyncio.gather(*(sink.emit(event(n)) for n in range(50)))
    await sink.close()
    assert [e.event_id for e in read_events(tmp_path / "events.jsonl")] == [
        event(n).event_id for n in range(50)]


class Gate:
    """Holds the sink's worker inside its next fsync until the test opens it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        real = os.fsync

        def fsync(fd: int) -> None:
            if not self.release.is_set():
                self.entered.set()
                assert self.release.wait(30), "the test never opened the gate"
            real(fd)

        monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.parametrize("kind", ["jsonl", "audit"])
async def test_a_cancelled_emit_keeps_its_place_and_the_loop_stays_free(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    trail = tmp_path / "trail"
    sink: Any = (JsonLinesEventSink(trail / "events.jsonl", fsync=True) if kind == "jsonl"
                 else AuditSink(trail))
    await sink.emit(event(0))  # opened (and, for the audit sink, its genesis synced)
    gate = Gate(monkeypatch)
    first = asyncio.create_task(sink.emit(event(1)))
    # the worker is inside fsync, and the loop is free to wait for it in another thread
    assert await asyncio.to_thread(gate.entered.wait, 30)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    second = asyncio.create_task(sink.emit(event(2)))
    await asyncio.sleep(0)
    assert not second.done()  # queued behind the cancelled one's write
    gate.release.set()
    await second
    await sink.close()
    expected = [event(n).event_id for n in range(3)]
    if kind == "jsonl":
        assert [e.event_id for e in read_events(trail / "events.jsonl")] == expected
    else:
        assert event_ids_in(trail) == expected
        assert verify_trail([trail]).ok


async def test_a_failed_jsonl_write_leaves_no_half_line(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonLinesEventSink(path)
    await sink.emit(event(0))
    real_write = os.write

    def half_then_full_disk(fd: int, data: bytes) -> int:
        real_write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full_disk)
    with pytest.raises(MemoryUnavailableError, match="ENOSPC"):
        await sink.emit(event(1))
    monkeypatch.setattr(os, "write", real_write)
    await sink.emit(event(2))
    await sink.close()
    assert [e.event_id for e in read_events(path)] == [event(0).event_id,
                                                       event(2).event_id]


def test_read_events_passes_over_a_line_a_crash_tore(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(event(0).to_json() + "\n" + event(1).to_json()[:40], encoding="utf-8")
    assert [e.event_id for e in read_events(path)] == [event(0).event_id]


async def test_never_appends_inline_only_when_nothing_is_queued(tmp_path: Path,
                                                                calls: Calls) -> None:
    sink = AuditSink(tmp_path, fsync="never")
    await sink.emit(event(0))  # opens in the worker
    loop_thread = threading.get_ident()
    before = len(calls.on(loop_thread))
    await sink.emit(event(1))
    assert len(calls.on(loop_thread)) == before + 1  # one page-cache write, inline
    checkpoint = sink.checkpoint()
    await sink.close()
    assert checkpoint == Checkpoint(sink.chain_id, 2, sink.head, checkpoint.created_at)
    assert verify_trail([tmp_path], [checkpoint]).ok and len(files_in(tmp_path)) == 1
