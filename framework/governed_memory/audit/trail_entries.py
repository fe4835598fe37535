"""A trail's entries from any position on, as the bytes its Merkle leaves hash.

Publishing tiles incrementally reads only the entries a tree grew by, so this reader
starts where it is asked: each file after the first opens with a ``continue`` line
stating how many entries came before it, so the files wholly before the start are
skipped after one line each, and the lines before the start in the file it starts in
are counted, not parsed. An entry's bytes are cut from its line as ``proving`` cuts
them (``{"event":`` + the event's canonical bytes + a fixed tail), the tail's ``seq``
checked against the count so a missing or doubled line shows. Nothing here verifies
the chain: the caller compares the Merkle root of what it read with a checkpoint
taken over a verified trail, which refuses any other bytes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from governed_memory.audit.chain import CONTINUE, GENESIS, ChainFormatError, parse_line
from governed_memory.audit.stored import StoredTrail
from governed_memory.audit.verify import (
    BROKEN,
    NO_TRAIL,
    NOT_A_TRAIL,
    Problem,
    Source,
    TrailProblemError,
    chain_files,
)

_HEAD: Final = b'{"event":'
_TAIL: Final = b',"hash":"'


class TrailEntries:
    """The entries of one trail (files from its genesis, or one trail store)."""

    def __init__(self, sources: Sequence[Source]) -> None:
        files = chain_files(sources)
        if not files:
            where = ", ".join(str(s) for s in sources)
            raise TrailProblemError(Problem(where, 0, None, "no trail here: no "
                                                            "audit-*.jsonl files", NO_TRAIL))
        stores = [f for f in files if isinstance(f, StoredTrail)]
        if stores and len(files) > 1:
            raise ValueError("a trail store is read on its own, not with other files")
        self.store: StoredTrail | None = stores[0] if stores else None
        self.files: list[tuple[Path, int]] = []
        """Each file and the number of entries before it."""
        if self.store is not None:
            opening = self.store.opening()
            if opening is None:
                raise TrailProblemError(Problem(self.store.location, 0, None, "no trail "
                                                "here: the store holds no audit trail",
                                                NO_TRAIL))
            self.chain_id = opening.chain_id
            return
        chain_id = ""
        for position, path in enumerate(files):
            assert isinstance(path, Path)
            first = _first_line(path, position)
            if position == 0:
                chain_id = str(first["chain_id"])
                before = 0
            else:
                before = int(str(first["seq"]))
                if first["chain_id"] != chain_id or before < self.files[-1][1]:
                    raise TrailProblemError(Problem(str(path), 1, None, "the file does not "
                                                    "continue the previous one (another "
                                                    "chain, or files out of order)"))
            self.files.append((path, before))
        self.chain_id = chain_id

    @property
    def location(self) -> str:
        return self.store.location if self.store is not None else str(self.files[-1][0])

    def read(self, start: int, stop: int) -> Iterator[bytes]:
        """The entries ``start + 1`` to ``stop`` (entry numbers, ``seq``), in order.
        Raises ``TrailProblemError`` if the trail ends before ``stop`` or a line there
        is not the entry it should be."""
        if not 0 <= start <= stop:
            raise ValueError(f"no entries from {start} to {stop}")
        if start == stop:
            return
        if self.store is not None:
            yield from self._stored(start, stop)
            return
        first = max(i for i, (_, before) in enumerate(self.files) if before <= start)
        seq = count = start
        for position, (path, before) in enumerate(self.files[first:]):
            if position and before != count:
                raise TrailProblemError(Problem(str(path), 1, count + 1, "the file does not "
                                                "continue where the previous one ended"))
            count = before
            with open(path, "rb", buffering=1 << 20) as handle:
                next(handle, None)  # the genesis or continue line, read already
                for number, line in enumerate(handle, start=2):
                    count += 1
                    if count <= seq:
                        continue
                    if count > stop:
                        return
                    yield _entry(line, count, path, number)
                    seq = count
        if seq < stop:
            raise TrailProblemError(Problem(self.location, 0, seq + 1,
                                            f"truncated: {stop} entries are asked for, the "
                                            f"trail ends at entry {seq}"))

    def _stored(self, start: int, stop: int) -> Iterator[bytes]:
        assert self.store is not None
        seq = start
        for entry in self.store.entries(stop):
            if entry.seq <= start:
                continue
            if entry.seq != seq + 1:
                raise TrailProblemError(Problem(self.store.location, 0, seq + 1,
                                                f"entry {seq + 1} is missing from the store"))
            seq = entry.seq
            yield entry.event
        if seq < stop:
            raise TrailProblemError(Problem(self.store.location, 0, seq + 1,
                                            f"truncated: {stop} entries are asked for, the "
                                            f"store ends at entry {seq}"))


def _first_line(path: Path, position: int) -> dict[str, object]:
    try:
        with open(path, "rb") as handle:
            line = handle.readline()
    except OSError as exc:
        raise TrailProblemError(Problem(str(path), 0, None,
                                        f"cannot read: {exc.strerror}")) from None
    try:
        value = parse_line(line.removesuffix(b"\n"))
    except ChainFormatError as exc:
        kind = NOT_A_TRAIL if position == 0 else BROKEN
        raise TrailProblemError(Problem(str(path), 1, None, str(exc), kind)) from None
    wanted = GENESIS if position == 0 else CONTINUE
    if value["kind"] != wanted:
        raise TrailProblemError(Problem(str(path), 1, None,
                                        f"the file opens with a {value['kind']} line, not a "
                                        f"{wanted} line (pass the trail from its first file)"))
    return value


def _entry(line: bytes, seq: int, path: Path, number: int) -> bytes:
    """The event's bytes cut from an entry line, which must be entry ``seq``."""
    if not line.endswith(b"\n"):
        raise TrailProblemError(Problem(str(path), number, seq, "incomplete line (torn "
                                        "write or truncation)"))
    cut = line.rfind(_TAIL)
    if not line.startswith(_HEAD) or cut < 0 or not line.endswith(b',"seq":%d}\n' % seq):
        raise TrailProblemError(Problem(str(path), number, seq, f"not the line of entry {seq}"))
    return line[len(_HEAD):cut]
