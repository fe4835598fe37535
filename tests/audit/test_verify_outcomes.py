"""What verification concludes beyond a broken link: a trail that lost its first files
(defect 1), renamed files, and the two outcomes that are not tampering at all — a file
that never was a hash chain, and a place with no trail (defect 14)."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest
from audit_support import copy_trail, event, files_in, rewrite, write_trail
from governed_memory.audit import Checkpoint, verify_trail
from governed_memory.audit.verify import BROKEN, NO_TRAIL, NOT_A_TRAIL, checkpoint_of
from governed_memory.events import JsonLinesEventSink
from hypothesis import given
from hypothesis import strategies as st

ENTRIES = 40


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("trail")
    asyncio.run(write_trail(directory, ENTRIES))
    assert len(files_in(directory)) >= 4
    return directory


@pytest.fixture(scope="module")
def head(pristine: Path) -> Checkpoint:
    return checkpoint_of([pristine], 0.0)


@given(data=st.data())
def test_removing_the_first_files_never_passes(pristine: Path, head: Checkpoint,
                                               data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        files = copy_trail(pristine, directory)
        removed = data.draw(st.integers(1, len(files) - 1))
        for path in files[:removed]:
            path.unlink()
        left = files[removed:]
        # The directory is the whole trail: its first file continues a chain, so the
        # files before it are gone, with or without a checkpoint.
        for checkpoints in ([], [head]):
            problem = verify_trail([directory], checkpoints).problem
            assert problem is not None and problem.kind == BROKEN
            assert "files before it were removed" in problem.reason
        # Named one by one, later files verify as a part of a trail…
        part = verify_trail(left)
        assert part.ok and part.first_seq > 0 and part.last_seq == ENTRIES
        # …but never against a checkpoint, which vouches for every entry up to it.
        against = verify_trail(left, [head]).problem
        assert against is not None and against.kind == BROKEN
        assert "checked only from the genesis" in against.reason
        # Renumbering what is left so it looks like a whole trail does not help.
        for index, path in enumerate(left, start=1):
            path.rename(directory / f"audit-{index:06d}.jsonl.tmp")
        for path in sorted(directory.glob("*.tmp")):
            path.rename(path.with_suffix(""))
        renumbered = verify_trail([directory], [head]).problem
        assert renumbered is not None and renumbered.kind == BROKEN


def test_a_renamed_file_is_detected(pristine: Path, tmp_path: Path) -> None:
    files = copy_trail(pristine, tmp_path)
    last = files[-1]
    last.rename(tmp_path / f"audit-{len(files) + 5:06d}.jsonl")  # a gap in the names
    problem = verify_trail([tmp_path]).problem
    assert problem is not None and problem.kind == BROKEN and "renamed" in problem.reason


def test_the_whole_trail_still_verifies_against_its_checkpoint(pristine: Path,
                                                                head: Checkpoint) -> None:
    verification = verify_trail([pristine], [head])
    assert verification.ok and verification.status == "ok"
    assert verification.checkpoints_checked == 1


async def test_a_plain_event_log_is_not_a_hash_chained_trail(tmp_path: Path) -> None:
    log = JsonLinesEventSink(tmp_path / "events.jsonl")
    for n in range(3):
        await log.emit(event(n))
    await log.close()
    verification = verify_trail([tmp_path / "events.jsonl"])
    assert verification.status == NOT_A_TRAIL
    assert verification.problem is not None
    assert "not a hash-chained trail" in verification.problem.reason
    # its directory holds no trail files at all
    assert verify_trail([tmp_path]).status == NO_TRAIL


@pytest.mark.parametrize("content", [b"", b"hello\n", b"[1, 2]\n", b'{"type": "x"}\n'])
def test_other_files_are_not_trails_either(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    assert verify_trail([path]).status == NOT_A_TRAIL


def test_an_empty_directory_holds_no_trail(tmp_path: Path) -> None:
    problem = verify_trail([tmp_path]).problem
    assert problem is not None and problem.kind == NO_TRAIL
    assert "no trail here" in problem.reason


def test_a_trail_file_with_a_forged_first_line_is_broken_not_foreign(pristine: Path,
                                                                     tmp_path: Path) -> None:
    # Inside a trail, a first line that is no chain line is damage, however it looks.
    files = copy_trail(pristine, tmp_path)
    lines = files[0].read_bytes().splitlines()
    lines[0] = json.dumps({"type": "memory.write.committed"}).encode()
    rewrite(files[0], lines)
    assert verify_trail([tmp_path]).status == BROKEN
    assert verify_trail(files).status == BROKEN
