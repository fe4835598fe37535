"""The audit sink on disk: dedup across restarts, rotation, torn tails, failed writes,
several writers sharing one trail, fsync policies and checkpoints."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from audit_support import append_bytes, event, event_ids_in, files_in, write_trail
from governed_memory.audit import AuditChainError, AuditSink, Checkpoint, verify_trail
from governed_memory.errors import MemoryConfigurationError, MemoryUnavailableError
from governed_memory.plugins import PluginManager


async def test_redelivered_events_are_appended_once_even_after_a_restart(
        tmp_path: Path) -> None:
    sink = AuditSink(tmp_path)
    for n in range(5):
        await sink.emit(event(n))
    await sink.emit(event(2))  # at-least-once delivery brings one again
    assert (sink.count, sink.duplicates) == (5, 1)
    await sink.close()
    reopened = AuditSink(tmp_path)
    for n in range(3, 8):  # a dispatcher that crashed before acknowledging redelivers
        await reopened.emit(event(n))
    assert (reopened.count, reopened.duplicates) == (8, 2)
    await reopened.close()
    verification = verify_trail([tmp_path])
    assert verification.ok and verification.entries == 8
    assert event_ids_in(tmp_path) == [event(n).event_id for n in range(8)]


async def test_dedup_survives_rotation_and_is_bounded(tmp_path: Path) -> None:
    await write_trail(tmp_path, 30, max_file_bytes=4096)
    assert len(files_in(tmp_path)) > 2
    reopened = AuditSink(tmp_path, max_file_bytes=4096, dedup_window=25)
    await reopened.emit(event(10))  # in an earlier file, still within the window
    assert reopened.duplicates == 1
    await reopened.emit(event(2))  # older than the window: appended again
    assert reopened.count == 31
    await reopened.close()
    assert verify_trail([tmp_path]).ok


async def test_rotation_carries_the_chain(tmp_path: Path) -> None:
    await write_trail(tmp_path, 30, max_file_bytes=4096)
    files = files_in(tmp_path)
    assert all(path.stat().st_size <= 4096 for path in files)
    previous_last = json.loads(files[0].read_text().splitlines()[-1])
    first_of_next = json.loads(files[1].read_text().splitlines()[0])
    assert first_of_next["kind"] == "continue"
    assert (first_of_next["seq"], first_of_next["head"]) == (previous_last["seq"],
                                                             previous_last["hash"])
    assert verify_trail([tmp_path]).entries == 30


async def test_a_torn_last_line_from_a_crash_is_cut_on_open(tmp_path: Path) -> None:
    await write_trail(tmp_path, 3)
    path = files_in(tmp_path)[-1]
    whole = path.read_bytes()
    append_bytes(path, b'{"event":{"event_id":"evt_half')  # the process died mid-write
    problem = verify_trail([tmp_path]).problem
    assert problem is not None and "incomplete last line" in problem.reason
    sink = AuditSink(tmp_path)
    await sink.open()
    assert path.read_bytes() == whole
    await sink.emit(event(3))
    await sink.close()
    assert verify_trail([tmp_path]).entries == 4


async def test_a_failed_write_is_cut_back_and_the_chain_continues(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sink = AuditSink(tmp_path)
    await sink.emit(event(0))
    real_write = os.write

    def half_then_full_disk(fd: int, data: bytes) -> int:
        real_write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full_disk)
    with pytest.raises(MemoryUnavailableError, match="ENOSPC"):
        await sink.emit(event(1))
    monkeypatch.setattr(os, "write", real_write)
    assert sink.count == 1
    await sink.emit(event(1))
    await sink.close()
    verification = verify_trail([tmp_path])
    assert verification.ok and verification.entries == 2


async def test_two_sinks_on_one_trail_keep_one_linear_chain(tmp_path: Path) -> None:
    # A CLI command next to a running worker: two writers, one trail, rotations by both.
    first = AuditSink(tmp_path, max_file_bytes=4096)
    second = AuditSink(tmp_path, max_file_bytes=4096)
    for n in range(40):
        await (first if n % 3 else second).emit(event(n))
    await second.emit(event(5))  # written by the other sink: a redelivery, dropped
    await first.emit(event(39))
    assert (first.duplicates, second.duplicates) == (1, 1)
    assert first.count == second.count == 40
    await first.close()
    await second.close()
    verification = verify_trail([tmp_path])
    assert verification.ok and verification.entries == 40
    assert len(files_in(tmp_path)) > 2
    assert event_ids_in(tmp_path) == [event(n).event_id for n in range(40)]


async def test_a_trail_locked_too_long_fails_the_append_instead_of_hanging(
        tmp_path: Path) -> None:
    import fcntl

    sink = AuditSink(tmp_path, lock_timeout_s=0.05)
    await sink.emit(event(0))
    holder = os.open(tmp_path / ".lock", os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # a writer wedged while holding the trail
    try:
        with pytest.raises(MemoryUnavailableError, match="stayed locked"):
            await sink.emit(event(1))
    finally:
        os.close(holder)
    await sink.emit(event(1))  # free once the holder let go
    await sink.close()
    assert verify_trail([tmp_path]).entries == 2


async def test_a_sink_refuses_to_chain_onto_what_another_writer_broke(
        tmp_path: Path) -> None:
    sink = AuditSink(tmp_path)
    await sink.emit(event(0))
    path = files_in(tmp_path)[-1]
    forged = json.loads(path.read_bytes().splitlines()[-1])
    forged["seq"] = 7  # appended behind the sink's back, and not a link of the chain
    append_bytes(path, json.dumps(forged, sort_keys=True, separators=(",", ":")).encode()
                 + b"\n")
    with pytest.raises(AuditChainError, match="refusing to append"):
        await sink.emit(event(1))
    await sink.close()


async def test_a_sink_refuses_a_trail_cut_while_it_was_open(tmp_path: Path) -> None:
    sink = AuditSink(tmp_path)
    for n in range(3):
        await sink.emit(event(n))
    path = files_in(tmp_path)[-1]
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-1]))
    with pytest.raises(AuditChainError, match="shrank"):
        await sink.emit(event(3))
    await sink.close()


async def test_a_broken_trail_is_never_appended_to(tmp_path: Path) -> None:
    await write_trail(tmp_path, 3)
    path = files_in(tmp_path)[-1]
    lines = path.read_bytes().splitlines()
    path.write_bytes(b"\n".join([lines[0], lines[2], lines[1]]) + b"\n")
    with pytest.raises(AuditChainError, match="refusing to append"):
        await AuditSink(tmp_path).open()


@pytest.mark.parametrize("policy", ["always", "interval", "never"])
async def test_every_fsync_policy_writes_the_same_chain(tmp_path: Path, policy: str) -> None:
    await write_trail(tmp_path, 5, fsync=policy)
    assert verify_trail([tmp_path]).entries == 5


async def test_checkpoints_are_written_and_verify(tmp_path: Path) -> None:
    trail, checkpoints = tmp_path / "trail", tmp_path / "elsewhere.jsonl"
    await write_trail(trail, 10, checkpoint_path=checkpoints, checkpoint_every=4)
    taken = [Checkpoint.from_json(line) for line in checkpoints.read_text().splitlines()]
    assert [c.count for c in taken] == [4, 8]
    assert verify_trail([trail], taken).checkpoints_checked == 2
    sink = AuditSink(trail)
    now = sink.checkpoint()
    await sink.close()
    assert now.count == 10 and verify_trail([trail], [*taken, now]).ok


def test_bad_configuration_is_refused(tmp_path: Path) -> None:
    factory = PluginManager.load().sinks.get("audit").factory
    assert isinstance(factory({"directory": str(tmp_path)}), AuditSink)
    for config in ({}, {"directory": str(tmp_path), "fsync": "sometimes"},
                   {"directory": str(tmp_path), "colour": "red"},
                   {"directory": str(tmp_path), "checkpoint_every": 10}):
        with pytest.raises(MemoryConfigurationError):
            factory(config)


async def test_a_file_a_crash_left_without_its_first_line_is_dropped(tmp_path: Path) -> None:
    await write_trail(tmp_path, 30, max_file_bytes=4096)
    files = files_in(tmp_path)
    next_file = tmp_path / f"audit-{len(files) + 1:06d}.jsonl"
    append_bytes(next_file, b'{"chain_id":"cha')  # rotation died mid continue line
    sink = AuditSink(tmp_path, max_file_bytes=4096)
    await sink.emit(event(30))
    await sink.close()
    verification = verify_trail([tmp_path])
    assert verification.ok and verification.entries == 31


async def test_an_empty_only_file_starts_a_fresh_chain(tmp_path: Path) -> None:
    append_bytes(tmp_path / "audit-000001.jsonl", b"")
    sink = AuditSink(tmp_path)
    await sink.emit(event(0))
    await sink.close()
    assert verify_trail([tmp_path]).entries == 1
