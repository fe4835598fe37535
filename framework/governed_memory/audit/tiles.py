"""The trail's Merkle tree as C2SP ``tlog-tiles``: paths, entry bundles, and reading it.

The layout, under a directory that can be served as static files as it is::

    checkpoint                   the signed C2SP checkpoint of the tree the tiles hold
    tile/<L>/<N>[.p/<W>]         hashes: 256 (a full tile) or W < 256 (a partial one)
    tile/entries/<N>[.p/<W>]     the entries under level-0 tile N: each a big-endian
                                 uint16 length, then the entry's bytes

Tile height is 8: tile ``N`` of level ``L`` holds the hashes, left to right, of the
perfect subtrees of ``256**L`` leaves starting at leaf ``(N * 256 + i) * 256**L``; level
0 holds the leaf hashes. ``N`` is written in three-digit path elements, all but the last
prefixed by ``x`` (1234067 is ``x001/x234/067``). A tree of size ``s`` has, at level
``L``, ``(s >> 8L) // 256`` full tiles and, when ``(s >> 8L) % 256`` is not 0, one
partial tile of that width.

An *entry* is an event's canonical bytes, exactly what the hash chain hashes after the
previous head (the ``event`` of its trail line, as written). Its leaf hash, SHA-256(0x00
|| entry), is the trail's Merkle leaf, so the tiles' tree is the tree of ``audit
checkpoint``, ``prove`` and ``consistency``: same leaves, same root, same proofs, and any
RFC 6962 verifier recomputes the leaves from the bundles.

:class:`TiledTree` reads subtree hashes out of a tile directory, which is what a
witness needs to check that a checkpoint extends the last one it cosigned (and what an
auditor needs for a proof): a handful of tiles, never the trail.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final

from governed_memory.audit.proof_errors import ProofFormatError, TreeSizeError
from governed_memory.audit.tree_hashing import EMPTY_ROOT, HASH_SIZE, NODE_PREFIX, split_point

HEIGHT: Final = 8
WIDTH: Final = 1 << HEIGHT
TILE_BYTES: Final = WIDTH * HASH_SIZE
CHECKPOINT_FILE: Final = "checkpoint"
MAX_ENTRY_BYTES: Final = 0xFFFF
"""An entry bundle prefixes each entry with a uint16: longer entries cannot be bundled."""


class TileError(ProofFormatError):
    """A tile or entry bundle that is missing, the wrong size, or not well-formed."""


def index_path(index: int) -> str:
    """``index`` in three-digit path elements, all but the last prefixed by ``x``."""
    if index < 0:
        raise ValueError("a tile index is not negative")
    parts = [f"{index % 1000:03d}"]
    index //= 1000
    while index:
        parts.append(f"x{index % 1000:03d}")
        index //= 1000
    return "/".join(reversed(parts))


def tile_path(level: int | str, index: int, width: int = WIDTH) -> str:
    """The path of a tile (``level`` ``"entries"`` for an entry bundle), relative to
    the log's directory: ``tile/<L>/<N>`` or ``tile/<L>/<N>.p/<W>``."""
    if not 1 <= width <= WIDTH:
        raise ValueError(f"a tile's width is 1 to {WIDTH}")
    suffix = "" if width == WIDTH else f".p/{width}"
    return f"tile/{level}/{index_path(index)}{suffix}"


def tile_width(size: int, level: int, index: int) -> int:
    """How many hashes tile ``index`` of ``level`` holds in a tree of ``size`` (0: none)."""
    count = size >> (HEIGHT * level)
    return max(0, min(WIDTH, count - index * WIDTH))


def levels(size: int) -> int:
    """How many tile levels a tree of ``size`` has (0 for the empty tree)."""
    count = 0
    while size >> (HEIGHT * count):
        count += 1
    return count


def edge(size: int) -> Iterator[tuple[int, int, int]]:
    """The tiles that can change when a tree of ``size`` grows: per level, the partial
    tile, as ``(level, index, width)``; levels whose rightmost tile is full have none."""
    for level in range(levels(size)):
        count = size >> (HEIGHT * level)
        if count % WIDTH:
            yield level, count // WIDTH, count % WIDTH


def bundle(entries: Sequence[bytes]) -> bytes:
    """An entry bundle: each entry as a big-endian uint16 length and its bytes."""
    parts = []
    for entry in entries:
        if len(entry) > MAX_ENTRY_BYTES:
            raise TileError(f"an entry of {len(entry)} bytes does not fit an entry bundle "
                            f"(at most {MAX_ENTRY_BYTES})")
        parts.append(struct.pack(">H", len(entry)))
        parts.append(entry)
    return b"".join(parts)


def unbundle(data: bytes, width: int | None = None) -> list[bytes]:
    """The entries of a bundle; with ``width``, exactly that many (the first ``width``
    of a wider bundle)."""
    entries: list[bytes] = []
    at = 0
    while at < len(data) and (width is None or len(entries) < width):
        if at + 2 > len(data):
            raise TileError("an entry bundle ends inside a length prefix")
        (length,) = struct.unpack_from(">H", data, at)
        if at + 2 + length > len(data):
            raise TileError("an entry bundle ends inside an entry")
        entries.append(data[at + 2:at + 2 + length])
        at += 2 + length
    if width is not None and len(entries) != width:
        raise TileError(f"the entry bundle holds {len(entries)} entries, not {width}")
    return entries


def perfect_root(hashes: bytes) -> bytes:
    """MTH of a power-of-two run of concatenated hashes (a perfect subtree)."""
    sha256, prefix, pair = hashlib.sha256, NODE_PREFIX, 2 * HASH_SIZE
    data = hashes
    while len(data) > HASH_SIZE:
        data = b"".join([sha256(prefix + data[i:i + pair]).digest()
                         for i in range(0, len(data), pair)])
    return data


def _fold(nodes: list[bytes]) -> bytes:
    """The root over perfect subtrees given largest (leftmost) first."""
    if not nodes:
        return EMPTY_ROOT
    node = nodes[-1]
    for left in reversed(nodes[:-1]):
        node = hashlib.sha256(NODE_PREFIX + left + node).digest()
    return node


def edge_root(partials: dict[int, bytes]) -> bytes:
    """The root of a tree from its partial tiles alone (level → concatenated hashes):
    together they cover every leaf, each a run of complete subtrees that splits into
    perfect ones by the bits of its width, largest first."""
    nodes: list[bytes] = []
    for level in sorted(partials, reverse=True):
        data = partials[level]
        width, at = len(data) // HASH_SIZE, 0
        for bit in reversed(range(HEIGHT)):
            if width >> bit & 1:
                run = (1 << bit) * HASH_SIZE
                nodes.append(perfect_root(data[at:at + run]))
                at += run
    return _fold(nodes)


class TileDirectory:
    """Tiles and bundles read from a directory (a served copy, or what ``audit tiles``
    wrote). A partial tile that was replaced by a wider one is read as the wider one's
    beginning: tile hashes never change once written, only more follow."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _read(self, level: int | str, index: int, width: int) -> bytes:
        for candidate in (width, *range(width + 1, WIDTH + 1)):
            path = self.root / tile_path(level, index, candidate)
            try:
                return path.read_bytes()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise TileError(f"{path}: cannot read ({exc.strerror})") from None
        raise TileError(f"{self.root / tile_path(level, index, width)}: no such tile")

    def tile(self, level: int, index: int, width: int) -> bytes:
        data = self._read(level, index, width)
        if len(data) < width * HASH_SIZE or len(data) % HASH_SIZE:
            raise TileError(f"tile {tile_path(level, index, width)} holds {len(data)} "
                            f"bytes, not {width} hashes")
        return data[:width * HASH_SIZE]

    def entries(self, index: int, width: int) -> list[bytes]:
        return unbundle(self._read("entries", index, width), width)


class TiledTree:
    """The subtree hashes RFC 9162's proofs ask for, in the tree of ``size`` leaves,
    read from tiles (each tile read once). Nothing read is trusted: a proof built from
    tiles holds only if it verifies against a checkpoint's root."""

    def __init__(self, tiles: TileDirectory, size: int) -> None:
        self.tiles = tiles
        self.size = size
        self._cache: dict[tuple[int, int], bytes] = {}

    def _tile(self, level: int, index: int) -> bytes:
        key = (level, index)
        data = self._cache.get(key)
        if data is None:
            width = tile_width(self.size, level, index)
            if width == 0:
                raise TreeSizeError(f"no tile {level}/{index} in a tree of {self.size}")
            data = self._cache[key] = self.tiles.tile(level, index, width)
        return data

    def perfect(self, start: int, height: int) -> bytes:
        """MTH(D[start : start + 2**height]), ``start`` a multiple of ``2**height``."""
        level, within = divmod(height, HEIGHT)
        first = start >> (HEIGHT * level)  # index among the level's hashes
        data = self._tile(level, first // WIDTH)
        at = (first % WIDTH) * HASH_SIZE
        return perfect_root(data[at:at + (HASH_SIZE << within)])

    def subtree(self, start: int, end: int) -> bytes:
        """MTH(D[start:end]) for a range RFC 9162's recursion visits."""
        if not 0 <= start <= end <= self.size:
            raise TreeSizeError(f"leaves {start}..{end} are not within {self.size}")
        nodes: list[bytes] = []
        while end > start:
            count = end - start
            part = count if count & (count - 1) == 0 else split_point(count)
            nodes.append(self.perfect(start, part.bit_length() - 1))
            start += part
        return _fold(nodes)

    def root(self) -> bytes:
        return self.subtree(0, self.size)

    def leaf(self, index: int) -> bytes:
        return self.perfect(index, 0)

    def inclusion_path(self, index: int) -> list[bytes]:
        return inclusion_path(self.subtree, index, self.size)

    def consistency_path(self, first: int) -> list[bytes]:
        return consistency_path(self.subtree, first, self.size)


Subtree = Callable[[int, int], bytes]


def inclusion_path(subtree: Subtree, index: int, size: int) -> list[bytes]:
    """RFC 9162 §2.1.3.1 ``PATH(index, D[0:size])``, from the leaf up."""
    if not 0 <= index < size:
        raise TreeSizeError(f"leaf {index} is not within a tree of {size} entries")
    path: list[bytes] = []
    start, count, offset = 0, size, index
    while count > 1:
        split = split_point(count)
        if offset < split:
            path.append(subtree(start + split, start + count))
            count = split
        else:
            path.append(subtree(start, start + split))
            start, count, offset = start + split, count - split, offset - split
    path.reverse()
    return path


def consistency_path(subtree: Subtree, first: int, second: int) -> list[bytes]:
    """RFC 9162 §2.1.4.1 ``PROOF(first, D[0:second])``; empty when ``first`` is 0 or
    ``second``."""
    if not 0 <= first <= second:
        raise TreeSizeError(f"no consistency proof from {first} to {second} entries")
    if first in (0, second):
        return []
    path: list[bytes] = []
    start, count, wanted, whole = 0, second, first, True
    while wanted != count:
        split = split_point(count)
        if wanted <= split:
            path.append(subtree(start + split, start + count))
            count = split
        else:
            path.append(subtree(start, start + split))
            start, count, wanted, whole = start + split, count - split, wanted - split, False
    if not whole:
        path.append(subtree(start, start + count))
    path.reverse()
    return path


def check_directory(directory: str | os.PathLike[str], root: bytes, size: int, *,
                    strict: bool = True) -> tuple[int, int]:
    """Recompute the whole tree from a tile directory's entry bundles and refuse
    (:class:`TileError`) unless every tile served is the recomputed one and the root is
    ``root``: what an auditor (or the project's own ``audit verify-tiles``) runs over a
    copy of the log. With ``strict``, a file under ``tile/`` that the tree of ``size``
    does not have is refused too. Returns (tiles, bundles) checked."""
    base = Path(directory)
    expected: set[str] = set()

    def read(relative: str) -> bytes:
        expected.add(relative)
        try:
            return (base / relative).read_bytes()
        except FileNotFoundError:
            raise TileError(f"{relative}: missing") from None

    def compare(level: int, index: int, data: bytes) -> None:
        relative = tile_path(level, index, len(data) // HASH_SIZE)
        if read(relative) != data:
            raise TileError(f"{relative} differs from the tile its entries give")

    pending: dict[int, bytearray] = {}
    tiles = bundles = 0
    for index in range(-(-size // WIDTH)):
        width = min(WIDTH, size - index * WIDTH)
        relative = tile_path("entries", index, width)
        entries = unbundle(read(relative))
        if len(entries) != width:
            raise TileError(f"{relative} holds {len(entries)} entries, not {width}")
        bundles += 1
        data = b"".join(hashlib.sha256(b"\x00" + entry).digest() for entry in entries)
        level, at = 0, index
        while True:
            compare(level, at, data)
            tiles += 1
            if len(data) < TILE_BYTES:
                pending[level] = bytearray(data)
                break
            above = pending.setdefault(level + 1, bytearray())
            above += perfect_root(data)
            if len(above) < TILE_BYTES:
                break
            data, level, at = bytes(above), level + 1, at // WIDTH
            pending[level] = bytearray()
    for level, run in pending.items():
        if run and level > 0 and len(run) < TILE_BYTES:
            compare(level, (size >> (HEIGHT * level)) // WIDTH, bytes(run))
            tiles += 1
    partials = {level: bytes(run) for level, run in pending.items() if run}
    if edge_root(partials) != root:
        raise TileError("the entries do not hash to the checkpoint's root")
    if strict and (base / "tile").is_dir():
        extra = sorted(path.relative_to(base).as_posix() for path in (base / "tile").rglob("*")
                       if path.is_file() and path.relative_to(base).as_posix() not in expected)
        if extra:
            raise TileError(f"files the tree of {size} entries does not have: "
                            f"{', '.join(extra[:5])}")
    return tiles, bundles
