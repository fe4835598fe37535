"""Proofs over trails the real sink wrote, across file rotation: a Merkle checkpoint is
taken only over a trail that verifies and commits to exactly its events; every event's
inclusion proof, handed over with the event and the checkpoint alone, verifies after
the trail is gone; checkpoints before and after more entries (and more files) are
consistent; a trail rewritten or cut since the checkpoint is refused; and the verifier
loads no storage, sink or event code (and no cryptography until a key is given)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
from audit_support import copy_trail, event, event_ids_in, files_in, rewrite, write_trail
from governed_memory.audit import (
    AuditSink,
    Checkpoint,
    EventNotInTreeError,
    TreeCheckpoint,
    prove_consistency,
    prove_inclusion,
    verify_trail,
)
from governed_memory.audit.merkle import MerkleTree
from governed_memory.audit.proofs import (
    ConsistencyProof,
    ForeignTrailError,
    InclusionProof,
    event_leaf,
    verify_consistency,
    verify_inclusion,
)
from governed_memory.audit.proving import read_leaves
from governed_memory.audit.verify import TrailProblemError, tree_checkpoint_of
from governed_memory.converter import unstructure

ENTRIES = 30


async def _append(directory: Path, start: int, stop: int) -> None:
    sink = AuditSink(directory, max_file_bytes=4096)
    for n in range(start, stop):
        await sink.emit(event(n))
    await sink.close()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("trail")
    asyncio.run(write_trail(directory, ENTRIES))
    assert len(files_in(directory)) >= 3  # rotation happened
    return directory


@pytest.fixture
def trail(pristine: Path, tmp_path: Path) -> Path:
    copy_trail(pristine, tmp_path / "trail")
    return tmp_path / "trail"


def test_a_merkle_checkpoint_commits_to_the_events_the_trail_holds(pristine: Path) -> None:
    checkpoint = tree_checkpoint_of([pristine], 5.0)
    verification = verify_trail([pristine])
    assert (checkpoint.chain_id, checkpoint.tree_size, checkpoint.head) == (
        verification.chain_id, ENTRIES, verification.head)
    expected = MerkleTree.of(event_leaf(unstructure(event(n))) for n in range(ENTRIES))
    assert checkpoint.root == expected.root().hex()
    assert verify_trail([pristine], merkle=True).root == checkpoint.root
    # the streaming reader cuts the same leaves from the lines as verification hashes
    assert read_leaves([pristine]).leaves == b"".join(
        expected.leaf(i) for i in range(ENTRIES))
    # checked by `audit verify` too, beside the sink's head-only checkpoints
    head_only = Checkpoint(checkpoint.chain_id, ENTRIES, checkpoint.head, 0.0)
    both = verify_trail([pristine], [checkpoint, head_only])
    assert both.ok and both.checkpoints_checked == 2 and both.root == checkpoint.root


def test_a_checkpoint_never_blesses_damage(trail: Path) -> None:
    files = files_in(trail)
    lines = files[1].read_bytes().splitlines()
    del lines[2]
    rewrite(files[1], lines)
    with pytest.raises(TrailProblemError):
        tree_checkpoint_of([trail], 5.0)
    with pytest.raises(TrailProblemError, match="from its genesis"):
        tree_checkpoint_of(files_in(trail)[2:], 5.0)


def test_an_altered_checkpoint_root_does_not_match_the_trail(pristine: Path) -> None:
    checkpoint = tree_checkpoint_of([pristine], 5.0)
    altered = attrs.evolve(checkpoint, root="ab" * 32)
    problem = verify_trail([pristine], [altered]).problem
    assert problem is not None and "Merkle root" in problem.reason


def test_every_event_proves_with_the_event_and_checkpoint_alone(pristine: Path,
                                                                tmp_path: Path) -> None:
    checkpoint = tree_checkpoint_of([pristine], 5.0)
    handed_over = []
    for seq, event_id in enumerate(event_ids_in(pristine), start=1):
        proof, body = prove_inclusion([pristine], event_id, checkpoint)
        assert proof.seq == seq and json.loads(body)["event_id"] == event_id
        handed_over.append((body, proof.to_json()))
    # what an auditor holds: texts; the trail is nowhere
    kept = tmp_path / "given"
    kept.mkdir()
    (kept / "checkpoint.json").write_text(checkpoint.to_json())
    for body, proof_text in handed_over:
        verify_inclusion(body, InclusionProof.from_json(proof_text),
                         TreeCheckpoint.from_json((kept / "checkpoint.json").read_text()))


def test_consistency_holds_across_rotation_and_a_rewrite_is_refused(trail: Path) -> None:
    first = tree_checkpoint_of([trail], 1.0)
    before = len(files_in(trail))
    asyncio.run(_append(trail, ENTRIES, ENTRIES + 25))
    assert len(files_in(trail)) > before  # the new entries rotated into new files
    second = tree_checkpoint_of([trail], 2.0)
    proof = prove_consistency([trail], first, second)
    verify_consistency(first, second, ConsistencyProof.from_json(proof.to_json()))
    assert proof.first_size == ENTRIES and proof.second_size == ENTRIES + 25
    # an old event proves against the later checkpoint, and against the earlier one
    old = event_ids_in(trail)[3]
    for checkpoint in (first, second):
        proof_of_old, body = prove_inclusion([trail], old, checkpoint)
        verify_inclusion(body, proof_of_old, checkpoint)
    # an event appended after the first checkpoint is not within it
    with pytest.raises(EventNotInTreeError) as late:
        prove_inclusion([trail], event_ids_in(trail)[ENTRIES + 2], first)
    assert late.value.seq == ENTRIES + 3
    with pytest.raises(EventNotInTreeError, match="not in the trail"):
        prove_inclusion([trail], "evt_nowhere", second)


def test_a_trail_rewritten_or_cut_since_the_checkpoint_is_refused(trail: Path,
                                                                 tmp_path: Path) -> None:
    checkpoint = tree_checkpoint_of([trail], 1.0)
    wanted = event_ids_in(trail)[1]
    # another trail (even of the same events) is not the checkpoint's
    rebuilt = tmp_path / "rebuilt"
    asyncio.run(write_trail(rebuilt, ENTRIES))
    with pytest.raises(ForeignTrailError):
        prove_inclusion([rebuilt], wanted, checkpoint)
    # an event edited in place: its leaf, and so the root, moves
    files = files_in(trail)
    lines = files[0].read_bytes().splitlines()
    lines[3] = lines[3].replace(b'"outcome":"committed"', b'"outcome":"deny"')
    rewrite(files[0], lines)
    with pytest.raises(TrailProblemError, match="Merkle root"):
        prove_inclusion([trail], wanted, checkpoint)
    # the chain rewritten consistently after the checkpoint: its head there moves
    shutil.rmtree(trail)
    copy_trail(rebuilt, trail)
    with pytest.raises(TrailProblemError, match="head"):
        prove_inclusion([trail], wanted, attrs.evolve(checkpoint,
                                                      chain_id=verify_trail([trail]).chain_id))
    with pytest.raises(ForeignTrailError):
        prove_consistency([trail], checkpoint, checkpoint)


def test_a_cut_trail_is_refused(trail: Path) -> None:
    checkpoint = tree_checkpoint_of([trail], 1.0)
    files = files_in(trail)
    files[-1].unlink()
    with pytest.raises(TrailProblemError, match="truncated"):
        prove_inclusion([trail], event_ids_in(trail)[0], checkpoint)
    with pytest.raises(TrailProblemError, match="genesis"):
        prove_inclusion(files[1:-1], event_ids_in(trail)[0], checkpoint)


def test_the_verifier_loads_no_storage_and_no_cryptography_without_a_key(
        tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from governed_memory.audit.proofs import verify_inclusion, TreeCheckpoint\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in {\n"
        "    'sqlite3', 'asyncio', 'cryptography', 'governed_memory_native', 'pluggy',\n"
        "    'opentelemetry'} or m in {'governed_memory.audit.sink',\n"
        "    'governed_memory.events', 'governed_memory.manager'})\n"
        "print(loaded)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, check=True)
    assert done.stdout.strip() == "[]"
