"""Writing a trail's tiles, entry bundles and signed checkpoint (``audit tiles``).

What is published is what a checkpoint vouches for, and nothing else: the tree is
built from the trail's entries up to the checkpoint's size and its root must be the
checkpoint's, or nothing is published (``TrailProblemError``, as ``prove`` refuses a
trail rewritten since its checkpoint). The checkpoint was taken over a verified trail
(``audit checkpoint``), so tiles never bless damage.

Incremental: a directory already holding tiles is extended from the size its
``checkpoint`` states. Full tiles never change, so only the partial tiles at the right
edge are read back (their hashes must give the published root, or the directory is
refused as damaged), the entries from the start of the partial entry bundle are read
from the trail (those already published must hash to the published leaves: a trail
rewritten under published tiles is refused), and only tiles that are new or grew are
written. A partial tile replaced by a wider or full one is removed, so the directory
depends on the trail alone: extending it step by step or writing it at once gives the
same bytes (Ed25519 signatures are deterministic, and the checkpoint carries no time).

Crash safety: new files are written and synced in a staging directory first, moved into
place once the root is proven, and the checkpoint is replaced last (atomically), so a
reader never sees a checkpoint whose tiles are missing; the superseded partial tiles go
after it. One writer at a time: the directory is ``flock``-ed for the run.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import attrs

from governed_memory.audit.checkpoint_notes import LogCheckpoint, read_checkpoint_note
from governed_memory.audit.notes import Note
from governed_memory.audit.proof_errors import ProofFormatError
from governed_memory.audit.tiles import (
    CHECKPOINT_FILE,
    HEIGHT,
    TILE_BYTES,
    WIDTH,
    TileDirectory,
    TileError,
    bundle,
    edge,
    edge_root,
    perfect_root,
    tile_path,
)
from governed_memory.audit.trail_entries import TrailEntries
from governed_memory.audit.tree_hashing import HASH_SIZE, LEAF_PREFIX
from governed_memory.audit.verify import Problem, TrailProblemError

STAGING: Final = ".tiles-staging"
_MODE: Final = 0o644


class TilesError(ValueError):
    """The tile directory cannot take this checkpoint (the message says why)."""


class TilesConflictError(TilesError):
    """The directory holds another log's tiles, or a larger tree than the checkpoint's."""


class TilesDamagedError(TilesError):
    """The directory's tiles do not give the root its own checkpoint states."""


@attrs.frozen(slots=True)
class TilesWritten:
    origin: str
    previous_size: int
    size: int
    root: bytes
    tiles: int
    """Hash tiles written (new, or partial ones that grew)."""
    bundles: int
    removed: int
    """Superseded partial tiles and bundles removed."""
    checkpoint_written: bool


def publish_tiles(trail: TrailEntries, directory: str | os.PathLike[str], note: Note, *,
                  progress: Callable[[int], None] | None = None) -> TilesWritten:
    """Write the tiles of ``trail``'s first ``size`` entries into ``directory`` and
    ``note`` (a signed C2SP checkpoint of that size) as its ``checkpoint``."""
    body = LogCheckpoint.parse(note.text)
    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise TilesConflictError(f"{target}: not a directory")
    target.mkdir(parents=True, exist_ok=True)
    with _locked(target):
        staging = target / STAGING
        shutil.rmtree(staging, ignore_errors=True)  # a crashed run's
        try:
            return _publish(trail, target, staging, note, body, progress)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TilesConflictError(f"{directory}: another `audit tiles` is writing "
                                     "there") from None
        yield
    finally:
        os.close(fd)


def published(directory: Path) -> tuple[Note, LogCheckpoint] | None:
    """The checkpoint a tile directory publishes, if any."""
    path = directory / CHECKPOINT_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return read_checkpoint_note(data)
    except ProofFormatError as exc:
        raise TilesDamagedError(f"{path}: {exc}") from None


def _publish(trail: TrailEntries, target: Path, staging: Path, note: Note,
             body: LogCheckpoint, progress: Callable[[int], None] | None) -> TilesWritten:
    size = body.size
    before = published(target)
    old_size, old_edge = 0, {}
    if before is not None:
        old = before[1]
        if old.origin != body.origin:
            raise TilesConflictError(f"{target} holds the tiles of log {old.origin!r}, not "
                                     f"{body.origin!r}")
        if old.size > size:
            raise TilesConflictError(f"{target} already holds {old.size} entries, more than "
                                     f"the checkpoint's {size}: a log only grows (a "
                                     "truncated trail, or an older checkpoint)")
        old_size, old_edge = old.size, _read_edge(target, old)
    writer = _Writer(target, staging, old_size, old_edge)
    start = (old_size // WIDTH) * WIDTH
    published_leaves = old_edge.get(0, b"")
    position = start
    for entry in trail.read(start, size):
        leaf = hashlib.sha256(LEAF_PREFIX + entry).digest()
        if position < old_size:
            at = (position - start) * HASH_SIZE
            if published_leaves[at:at + HASH_SIZE] != leaf:
                raise TrailProblemError(Problem(
                    trail.location, 0, position + 1,
                    f"entry {position + 1} no longer hashes to the leaf the tiles published "
                    "(the trail was rewritten since)"))
        writer.add(entry, leaf)
        position += 1
        if progress is not None and position % WIDTH == 0:
            progress(position)
    partials = writer.finish()
    if edge_root(partials) != body.root:
        raise TrailProblemError(Problem(trail.location, 0, size,
                                        f"the trail's first {size} entries do not hash to the "
                                        "checkpoint's root (the trail was rewritten, or the "
                                        "checkpoint is of another trail)"))
    writer.move_into_place()
    new_note = note.to_bytes()
    path = target / CHECKPOINT_FILE
    written = not path.exists() or path.read_bytes() != new_note
    if written:
        staged = staging / CHECKPOINT_FILE
        _write(staged, new_note)
        os.replace(staged, path)
        _fsync_directory(target)
    removed = _remove_superseded(target, size)
    return TilesWritten(body.origin, old_size, size, body.root, writer.tiles, writer.bundles,
                        removed, written)


def _read_edge(target: Path, checkpoint: LogCheckpoint) -> dict[int, bytes]:
    """The published partial tiles, checked against the published root."""
    tiles = TileDirectory(target)
    found: dict[int, bytes] = {}
    try:
        for level, index, width in edge(checkpoint.size):
            found[level] = tiles.tile(level, index, width)
    except TileError as exc:
        raise TilesDamagedError(f"{target}: {exc}") from None
    if edge_root(found) != checkpoint.root:
        raise TilesDamagedError(f"{target}: the partial tiles do not give the root its "
                                "checkpoint states (the tiles or the checkpoint were "
                                "altered); write the tiles into a new directory")
    return found


class _Writer:
    """Folds entries into tiles, level by level, staging each tile that is new or grew."""

    def __init__(self, target: Path, staging: Path, old_size: int,
                 old_edge: dict[int, bytes]) -> None:
        self.target, self.staging = target, staging
        self.size = (old_size // WIDTH) * WIDTH
        self.unchanged = set(edge(old_size))
        # level 0 is re-read from the trail; the levels above start from the edge
        self.pending: dict[int, bytearray] = {
            level: bytearray(data) for level, data in old_edge.items() if level > 0}
        self.pending[0] = bytearray()
        self.entries: list[bytes] = []
        self.staged: list[str] = []
        staging.mkdir()
        self.made: set[Path] = {staging}
        self.tiles = self.bundles = 0

    def add(self, entry: bytes, leaf: bytes) -> None:
        self.entries.append(entry)
        self.pending[0] += leaf
        self.size += 1
        if len(self.entries) == WIDTH:
            index = (self.size - 1) // WIDTH
            self._stage(tile_path("entries", index), bundle(self.entries))
            self.bundles += 1
            self.entries = []
            self._full(0, index)

    def _full(self, level: int, index: int) -> None:
        """Level ``level``'s tile ``index`` just filled: stage it, carry its root up."""
        data = bytes(self.pending[level])
        self._stage(tile_path(level, index), data)
        self.tiles += 1
        self.pending[level] = bytearray()
        above = self.pending.setdefault(level + 1, bytearray())
        above += perfect_root(data)
        if len(above) == TILE_BYTES:
            self._full(level + 1, index // WIDTH)

    def finish(self) -> dict[int, bytes]:
        """Stage the partial tiles that changed; return every partial tile's hashes."""
        partials: dict[int, bytes] = {}
        for level, data in self.pending.items():
            if not data:
                continue
            width = len(data) // HASH_SIZE
            index = (self.size >> (HEIGHT * level)) // WIDTH
            partials[level] = bytes(data)
            if (level, index, width) in self.unchanged:
                continue
            self._stage(tile_path(level, index, width), bytes(data))
            self.tiles += 1
            if level == 0:
                self._stage(tile_path("entries", index, width), bundle(self.entries))
                self.bundles += 1
        return partials

    def _stage(self, relative: str, data: bytes) -> None:
        path = self.staging / relative
        if path.parent not in self.made:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.made.add(path.parent)
        _write(path, data)
        self.staged.append(relative)

    def move_into_place(self) -> None:
        """Every staged file into its place, then each directory that changed synced
        (deepest first, up to the tile directory), so the renames are durable before
        the checkpoint that needs them is."""
        changed: set[Path] = set()
        for relative in self.staged:
            final = self.target / relative
            if final.parent not in changed:
                final.parent.mkdir(parents=True, exist_ok=True)
                folder = final.parent
                while folder not in changed and folder != self.target:
                    changed.add(folder)
                    folder = folder.parent
            os.replace(self.staging / relative, final)
        if changed:
            changed.add(self.target)
        for folder in sorted(changed, key=lambda p: len(p.parts), reverse=True):
            _fsync_directory(folder)


def _remove_superseded(target: Path, size: int) -> int:
    """Remove every partial tile and bundle but those of ``size``'s edge (the ones a
    wider or full tile replaced, including any a crashed run left behind)."""
    keep = {tile_path(level, index, width) for level, index, width in edge(size)}
    keep |= {tile_path("entries", index, width)
             for level, index, width in edge(size) if level == 0}
    removed = 0
    root = target / "tile"
    if not root.is_dir():
        return 0
    for folder, directories, files in os.walk(root):
        here = Path(folder)
        if not here.name.endswith(".p"):
            continue
        directories.clear()
        for name in files:
            relative = (here / name).relative_to(target).as_posix()
            if name.isdigit() and relative not in keep:
                (here / name).unlink()
                removed += 1
        with contextlib.suppress(OSError):
            here.rmdir()  # only when nothing is left in it
    return removed


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _MODE)
    try:
        os.fchmod(fd, _MODE)  # whatever the umask: a served file is the same everywhere
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
