"""The trail as C2SP tiles, from the writer's side: the layout is the spec's, the tiles
and bundles are the trail's Merkle tree and events (same leaves, same root as
``audit checkpoint``), writing step by step gives the very bytes of writing at once,
only what changed is written, and a trail or directory that does not match what was
published is refused. (The independent verifier's view is test_c2sp_go_verifier.)"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
from pathlib import Path

import pytest
from audit_support import copy_trail, files_in, rewrite, write_trail
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from governed_memory.audit.chain import entry_line, file_name, genesis_line, parse_line
from governed_memory.audit.checkpoint_notes import LogCheckpoint, signed_checkpoint
from governed_memory.audit.merkle import MerkleTree
from governed_memory.audit.notes import Note
from governed_memory.audit.proving import read_leaves
from governed_memory.audit.tile_writer import (
    STAGING,
    TilesConflictError,
    TilesDamagedError,
    publish_tiles,
)
from governed_memory.audit.tiles import (
    TileDirectory,
    TiledTree,
    TileError,
    bundle,
    edge,
    index_path,
    perfect_root,
    tile_path,
    unbundle,
)
from governed_memory.audit.trail_entries import TrailEntries
from governed_memory.audit.verify import TrailProblemError, tree_checkpoint_of

ENTRIES = 600
KEY = Ed25519PrivateKey.generate()
ORIGIN = "audit.example/tiles-test"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("trail")
    asyncio.run(write_trail(directory, ENTRIES))
    return directory


@pytest.fixture(scope="module")
def tree(pristine: Path) -> MerkleTree:
    return read_leaves([pristine]).tree()


@pytest.fixture
def trail(tmp_path: Path, pristine: Path) -> Path:
    copy_trail(pristine, tmp_path / "trail")
    return tmp_path / "trail"


def note_at(tree: MerkleTree, size: int, origin: str = ORIGIN) -> Note:
    return signed_checkpoint(LogCheckpoint(origin, size, tree.root(size)), KEY)


def events(trail: Path) -> list[bytes]:
    """Each entry's event bytes, cut from its line as written."""
    found = []
    for path in files_in(trail):
        for line in path.read_bytes().splitlines():
            if line.startswith(b'{"event":'):
                found.append(line[len(b'{"event":'):line.rfind(b',"hash":"')])
    return found


def snapshot(directory: Path) -> dict[str, bytes]:
    return {path.relative_to(directory).as_posix(): path.read_bytes()
            for path in sorted(directory.rglob("*")) if path.is_file()}


def test_paths_and_partial_tiles_are_the_specs() -> None:
    assert index_path(1234067) == "x001/x234/067"
    assert index_path(0) == "000" and index_path(1000) == "x001/000"
    assert tile_path(4, 1234067, 1) == "tile/4/x001/x234/067.p/1"
    assert tile_path("entries", 5) == "tile/entries/005"
    # the spec's examples: 70,000 entries are 273 full level-0 tiles and one of 112, one
    # full level-1 tile and one of 17, one level-2 tile of 1; 256 entries one full
    # level-0 tile and a level-1 tile of 1
    assert list(edge(70_000)) == [(0, 273, 112), (1, 1, 17), (2, 0, 1)]
    assert list(edge(256)) == [(1, 0, 1)]
    assert list(edge(0)) == []


def test_bundles_are_length_prefixed_entries() -> None:
    entries = [b"", b"a", b"x" * 300]
    data = bundle(entries)
    assert data == b"\x00\x00" + b"\x00\x01a" + b"\x01\x2c" + b"x" * 300
    assert unbundle(data) == entries and unbundle(data + b"\x00\x01b", 3) == entries
    for damaged, width in ((data[:-1], 3), (data[:3], None), (data + b"\x00", None),
                           (data, 4)):
        with pytest.raises(TileError):
            unbundle(damaged, width)
    with pytest.raises(TileError):
        bundle([b"x" * 65536])


def test_tiles_hold_the_trails_tree_and_events(trail: Path, tree: MerkleTree,
                                               tmp_path: Path) -> None:
    out = tmp_path / "tiles"
    done = publish_tiles(TrailEntries([trail]), out, note_at(tree, ENTRIES))
    assert (done.size, done.tiles, done.bundles, done.removed) == (ENTRIES, 4, 3, 0)
    written = snapshot(out)
    assert sorted(written) == ["checkpoint", "tile/0/000", "tile/0/001", "tile/0/002.p/88",
                               "tile/1/000.p/2", "tile/entries/000", "tile/entries/001",
                               "tile/entries/002.p/88"]
    leaves = b"".join(tree.leaf(i) for i in range(ENTRIES))
    assert written["tile/0/000"] == leaves[:8192]
    assert written["tile/0/002.p/88"] == leaves[16384:]
    assert written["tile/1/000.p/2"] == (perfect_root(leaves[:8192])
                                         + perfect_root(leaves[8192:16384]))
    bodies = events(trail)
    assert unbundle(written["tile/entries/001"]) == bodies[256:512]
    assert all(hashlib.sha256(b"\x00" + body).digest() == tree.leaf(i)
               for i, body in enumerate(bodies))
    # the same root as the trail's own Merkle checkpoint
    checkpoint = tree_checkpoint_of([trail], 1.0)
    assert LogCheckpoint.parse(Note.parse(written["checkpoint"]).text).root == \
        checkpoint.root_bytes
    assert {path.stat().st_mode & 0o777 for path in out.rglob("*") if path.is_file()} == {0o644}


def test_proofs_from_tiles_are_the_proofs_from_the_trail(trail: Path, tree: MerkleTree,
                                                         tmp_path: Path) -> None:
    for size in (1, 255, 256, 257, 513, ENTRIES):
        out = tmp_path / f"tiles-{size}"
        publish_tiles(TrailEntries([trail]), out, note_at(tree, size))
        tiled = TiledTree(TileDirectory(out), size)
        assert tiled.root() == tree.root(size)
        for index in {i % size for i in (0, 1, size // 2, 255, 256, size - 1)}:
            assert tiled.inclusion_path(index) == tree.inclusion_path(index, size)
        for first in range(0, size + 1, max(1, size // 17)):
            assert tiled.consistency_path(first) == tree.consistency_path(first, size)


def test_growing_step_by_step_gives_the_bytes_of_writing_at_once(
        trail: Path, tree: MerkleTree, tmp_path: Path) -> None:
    grown, fresh = tmp_path / "grown", tmp_path / "fresh"
    entries = TrailEntries([trail])
    steps = [0, 1, 100, 255, 256, 300, 512, 513, 513, ENTRIES]
    for size in steps:
        done = publish_tiles(entries, grown, note_at(tree, size))
        assert done.size == size
        publish_tiles(entries, fresh / str(size), note_at(tree, size))
        assert snapshot(grown) == snapshot(fresh / str(size)), size
    # the same size again writes nothing
    again = publish_tiles(entries, grown, note_at(tree, ENTRIES))
    assert (again.tiles, again.bundles, again.removed, again.checkpoint_written) == (
        0, 0, 0, False)


def test_only_what_changed_is_written(trail: Path, tree: MerkleTree, tmp_path: Path) -> None:
    out = tmp_path / "tiles"
    entries = TrailEntries([trail])
    publish_tiles(entries, out, note_at(tree, 300))
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()}
    done = publish_tiles(entries, out, note_at(tree, 560))
    # level 0: tile 1 filled (and its bundle), tile 2 partial is new; level 1 grew
    assert (done.previous_size, done.tiles, done.bundles, done.removed) == (300, 3, 2, 3)
    full = out / "tile" / "0" / "000"
    assert (full.stat().st_ino, full.stat().st_mtime_ns) == before[full]
    assert not (out / "tile/0/001.p").exists() and not (out / "tile/entries/001.p").exists()
    assert not (out / "tile/1/000.p/1").exists() and (out / "tile/1/000.p/2").is_file()


def test_a_trail_rewritten_under_published_tiles_is_refused(trail: Path, tree: MerkleTree,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "tiles"
    publish_tiles(TrailEntries([trail]), out, note_at(tree, 300))
    published = snapshot(out)
    # an entry of the partial bundle edited in place: re-read, it no longer matches
    files = files_in(trail)
    target = next(p for p in files if b'"seq":290}' in p.read_bytes())
    lines = target.read_bytes().splitlines()
    at = next(i for i, line in enumerate(lines) if line.endswith(b'"seq":290}'))
    lines[at] = lines[at].replace(b'"outcome":"committed"', b'"outcome":"denied"')
    rewrite(target, lines)
    with pytest.raises(TrailProblemError, match="entry 290 no longer hashes"):
        publish_tiles(TrailEntries([trail]), out, note_at(tree, 400))
    assert snapshot(out) == published and not (out / STAGING).exists()


def test_a_checkpoint_the_trail_does_not_give_is_refused(trail: Path, tree: MerkleTree,
                                                         tmp_path: Path) -> None:
    out = tmp_path / "tiles"
    other = MerkleTree(b"".join(tree.leaf(i) for i in range(299)) + b"\x07" * 32)
    with pytest.raises(TrailProblemError, match="do not hash to the checkpoint's root"):
        publish_tiles(TrailEntries([trail]), out, note_at(other, 300))
    assert not (out / "checkpoint").exists() and not (out / "tile").exists()
    with pytest.raises(TrailProblemError, match="the trail ends at entry 600"):
        publish_tiles(TrailEntries([trail]), out,
                      signed_checkpoint(LogCheckpoint(ORIGIN, 601, b"\x01" * 32), KEY))


def test_a_directory_that_is_not_this_logs_growth_is_refused(trail: Path, tree: MerkleTree,
                                                             tmp_path: Path) -> None:
    out = tmp_path / "tiles"
    entries = TrailEntries([trail])
    publish_tiles(entries, out, note_at(tree, 300))
    with pytest.raises(TilesConflictError, match="more than the checkpoint's 200"):
        publish_tiles(entries, out, note_at(tree, 200))
    with pytest.raises(TilesConflictError, match=r"another\.example"):
        publish_tiles(entries, out, note_at(tree, 400, "another.example/log"))
    # a published partial tile altered: the edge no longer gives the published root
    edge_tile = out / "tile/0/001.p/44"
    damaged = bytearray(edge_tile.read_bytes())
    damaged[0] ^= 1
    edge_tile.write_bytes(bytes(damaged))
    with pytest.raises(TilesDamagedError, match="do not give the root"):
        publish_tiles(entries, out, note_at(tree, 400))
    (out / "checkpoint").write_text("not a note\n")
    with pytest.raises(TilesDamagedError):
        publish_tiles(entries, out, note_at(tree, 400))
    (out / "checkpoint").unlink()
    (tmp_path / "file").write_text("")
    with pytest.raises(TilesConflictError, match="not a directory"):
        publish_tiles(entries, tmp_path / "file", note_at(tree, 1))


def test_what_a_crashed_run_left_is_cleared(trail: Path, tree: MerkleTree,
                                            tmp_path: Path) -> None:
    out, fresh = tmp_path / "tiles", tmp_path / "fresh"
    entries = TrailEntries([trail])
    publish_tiles(entries, out, note_at(tree, 300))
    stale = (out / "tile/0/001.p/44").read_bytes()
    publish_tiles(entries, out, note_at(tree, 400))
    # a crash after the new checkpoint, before the old partial went: it is back
    (out / "tile/0/001.p/44").write_bytes(stale)
    (out / STAGING / "tile").mkdir(parents=True)
    done = publish_tiles(entries, out, note_at(tree, 400))
    assert done.removed == 1
    publish_tiles(entries, fresh, note_at(tree, 400))
    assert snapshot(out) == snapshot(fresh)
    # one writer at a time
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(TilesConflictError, match="another `audit tiles`"):
            publish_tiles(entries, out, note_at(tree, 500))
    finally:
        os.close(fd)


def test_entries_are_read_from_any_position_and_a_damaged_trail_is_named(
        trail: Path, tmp_path: Path) -> None:
    entries = TrailEntries([trail])
    bodies = events(trail)
    assert list(entries.read(0, 3)) == bodies[:3]
    assert list(entries.read(597, 600)) == bodies[597:]
    assert list(entries.read(299, 301)) == bodies[299:301]
    assert list(entries.read(5, 5)) == []
    files = files_in(trail)
    files[10].unlink()
    with pytest.raises(TrailProblemError, match="does not continue"):
        list(TrailEntries([trail]).read(0, ENTRIES))


def test_an_entry_too_long_for_a_bundle_is_refused(tmp_path: Path) -> None:
    trail = tmp_path / "trail"
    trail.mkdir()
    first = genesis_line("chain_" + "aa" * 16, 1.0)
    line, _ = entry_line(1, str(parse_line(first[:-1])["hash"]), {"blob": "x" * 70_000})
    (trail / file_name(1)).write_bytes(first + line)
    leaf = read_leaves([trail]).tree()
    with pytest.raises(TileError, match="does not fit an entry bundle"):
        publish_tiles(TrailEntries([trail]), tmp_path / "tiles", note_at(leaf, 1))
    assert json.loads(line)["seq"] == 1
