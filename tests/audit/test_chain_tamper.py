"""Tampering with a trail is detected wherever it happens (hypothesis over positions):
a flipped byte, a deleted, reordered or inserted entry, and a tail cut past a
checkpoint. The trail spans several files, so rotation boundaries are covered too."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest
from audit_support import copy_trail, event, lines_of, rewrite, write_trail
from governed_memory.audit import Checkpoint, verify_trail
from governed_memory.audit.chain import entry_line
from hypothesis import given
from hypothesis import strategies as st

ENTRIES = 40


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("trail")
    asyncio.run(write_trail(directory, ENTRIES))
    assert len(list(directory.glob("audit-*.jsonl"))) >= 3  # rotation happened
    return directory


@pytest.fixture(scope="module")
def head(pristine: Path) -> Checkpoint:
    verification = verify_trail([pristine])
    assert verification.ok and verification.entries == ENTRIES
    assert verification.head is not None and verification.chain_id is not None
    return Checkpoint(verification.chain_id, ENTRIES, verification.head, 0.0)


def entry_positions(files: list[Path]) -> list[tuple[Path, int]]:
    return [(path, index) for path, index in lines_of(files) if index > 0]


def test_the_pristine_trail_verifies_with_its_checkpoint(pristine: Path,
                                                         head: Checkpoint) -> None:
    verification = verify_trail([pristine], [head])
    assert verification.ok and verification.checkpoints_checked == 1


@given(data=st.data())
def test_a_flipped_byte_anywhere_is_detected(pristine: Path, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        files = copy_trail(pristine, Path(scratch))
        path = data.draw(st.sampled_from(files))
        raw = bytearray(path.read_bytes())
        position = data.draw(st.integers(0, len(raw) - 1))
        raw[position] ^= data.draw(st.integers(1, 255))
        path.write_bytes(bytes(raw))
        verification = verify_trail(files)
        assert not verification.ok
        assert verification.problem is not None and verification.problem.path == str(path)


@given(data=st.data())
def test_a_deleted_entry_is_detected(pristine: Path, head: Checkpoint,
                                     data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        files = copy_trail(pristine, Path(scratch))
        path, index = data.draw(st.sampled_from(entry_positions(files)))
        lines = path.read_bytes().splitlines()
        last_entry = path == files[-1] and index == len(lines) - 1
        del lines[index]
        rewrite(path, lines)
        # Dropping the newest entry leaves a shorter valid chain: only a checkpoint
        # taken before can tell. Any other deletion breaks a link on its own.
        verification = verify_trail(files, [head] if last_entry else [])
        assert not verification.ok
        assert "entry" in verification.problem.reason or "truncated" in (  # type: ignore[union-attr]
            verification.problem.reason)  # type: ignore[union-attr]


@given(data=st.data())
def test_reordered_entries_are_detected(pristine: Path, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        files = copy_trail(pristine, Path(scratch))
        path = data.draw(st.sampled_from(files))
        lines = path.read_bytes().splitlines()
        if len(lines) < 3:
            return
        i = data.draw(st.integers(1, len(lines) - 2))
        j = data.draw(st.integers(i + 1, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
        rewrite(path, lines)
        assert not verify_trail(files).ok


@given(data=st.data(), forged=st.booleans())
def test_an_inserted_entry_is_detected(pristine: Path, data: st.DataObject,
                                       forged: bool) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        files = copy_trail(pristine, Path(scratch))
        path, index = data.draw(st.sampled_from(entry_positions(files)))
        lines = path.read_bytes().splitlines()
        if forged:
            # A well-formed entry, hashed correctly onto the entry before it.
            before = json.loads(lines[index - 1])
            previous = before["hash"] if "hash" in before else before["head"]
            seq = before.get("seq", 0) + (1 if before["kind"] == "entry" else 0)
            body = json.loads(event(999_999).to_json())
            line, _ = entry_line(seq, previous, body)
            inserted = line.rstrip(b"\n")
        else:
            inserted = data.draw(st.sampled_from(
                [line for path_, i in entry_positions(files)
                 for line in [path_.read_bytes().splitlines()[i]]]))
        lines.insert(index, inserted)
        rewrite(path, lines)
        assert not verify_trail(files).ok


@given(data=st.data())
def test_truncating_the_tail_past_a_checkpoint_is_detected(pristine: Path,
                                                           data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        files = copy_trail(pristine, Path(scratch))
        full = verify_trail(files)
        count = data.draw(st.integers(1, ENTRIES))
        # The checkpoint an auditor exported when the trail had `count` entries.
        prefix: list[Path] = []
        for path in files:
            prefix.append(path)
            lines = [json.loads(line) for line in path.read_bytes().splitlines()]
            if any(line.get("seq") == count and line["kind"] == "entry" for line in lines):
                break
        at = next(json.loads(line) for path in prefix for line in path.read_bytes().splitlines()
                  if json.loads(line).get("seq") == count
                  and json.loads(line)["kind"] == "entry")
        checkpoint = Checkpoint(str(full.chain_id), count, at["hash"], 0.0)
        assert verify_trail(files, [checkpoint]).ok
        # Cut the trail somewhere before the end of entry `count`'s line.
        target = prefix[-1]
        raw = target.read_bytes()
        end_of_entry = sum(len(line) + 1 for line in raw.splitlines()[
            : next(i for i, line in enumerate(raw.splitlines())
                   if json.loads(line).get("seq") == count
                   and json.loads(line)["kind"] == "entry") + 1])
        cut = data.draw(st.integers(0, end_of_entry - 1))
        target.write_bytes(raw[:cut])
        remaining = files[: files.index(target) + 1]
        if cut == 0:
            target.unlink()
            remaining = remaining[:-1]
        assert not verify_trail(remaining, [checkpoint]).ok  # no files at all fails too


def test_a_trail_cut_at_a_line_boundary_needs_the_checkpoint(pristine: Path,
                                                              head: Checkpoint,
                                                              tmp_path: Path) -> None:
    files = copy_trail(pristine, tmp_path)
    lines = files[-1].read_bytes().splitlines()
    rewrite(files[-1], lines[:-2])
    assert verify_trail(files).ok  # a shorter chain is still a chain…
    problem = verify_trail(files, [head]).problem
    assert problem is not None and "truncated" in problem.reason  # …the checkpoint knows


def test_verification_names_the_first_broken_entry(pristine: Path, tmp_path: Path) -> None:
    files = copy_trail(pristine, tmp_path)
    lines = files[0].read_bytes().splitlines()
    doctored = json.loads(lines[3])
    doctored["event"]["record_ids"] = ["SOMEONE-ELSES"]
    lines[3] = json.dumps(doctored, sort_keys=True, separators=(",", ":")).encode()
    rewrite(files[0], lines)
    problem = verify_trail(files).problem
    assert problem is not None
    assert (problem.path, problem.line, problem.seq) == (str(files[0]), 4, 3)
    assert "event was altered" in problem.reason


def test_a_later_file_alone_verifies_from_its_continue_line(pristine: Path) -> None:
    files = sorted(pristine.glob("audit-*.jsonl"))
    alone = verify_trail(files[1:])
    assert alone.ok and alone.first_seq > 0 and alone.last_seq == ENTRIES
    missing_middle = verify_trail([files[0], *files[2:]])
    assert not missing_middle.ok and missing_middle.problem is not None
    assert "follows file number" in missing_middle.problem.reason
