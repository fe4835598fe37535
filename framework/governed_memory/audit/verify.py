"""Verifying a trail: every line, every link, every file boundary, every checkpoint.

Verification stops at the first broken entry and says where (file, line, entry
number) and why, because everything after a break is unproven: a verifier that went
on would invite reading past the damage.

Three outcomes are not a break and are told apart from one (``Problem.kind``): a
directory holding no trail files (``no_trail``), and a file that was never a hash
chain at all, such as a plain JSON lines event log (``not_a_trail``). ``broken`` is
kept for what tampering or damage leaves, so an alarm on it means something.
"""

from __future__ import annotations

import itertools
import os
import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final

import attrs

from governed_memory.audit.chain import (
    CONTINUE,
    ENTRY,
    FILE_PATTERN,
    GENESIS,
    ChainFormatError,
    Checkpoint,
    entry_hash,
    event_bytes,
    genesis_hash,
    parse_line,
)
from governed_memory.audit.merkle import Frontier
from governed_memory.audit.proofs import TreeCheckpoint, leaf_hash
from governed_memory.audit.stored import StoredEntry, StoredTrail, stored_lines

Pathish = str | os.PathLike[str]
Source = Pathish | StoredTrail
"""Where a trail is read from: a directory or file of it, or a trail store
(:mod:`governed_memory.audit.stored`)."""

BROKEN: Final = "broken"
NOT_A_TRAIL: Final = "not_a_trail"
NO_TRAIL: Final = "no_trail"
PROBLEM_KINDS: Final = (BROKEN, NOT_A_TRAIL, NO_TRAIL)

_TRAIL_FILE: Final = re.compile(r"audit-(\d{6})\.jsonl")


@attrs.frozen(slots=True)
class Problem:
    """The first thing wrong with a trail."""

    path: str
    line: int
    """1-based line number within ``path`` (0: the file as a whole)."""
    seq: int | None
    """The entry number the line holds or should have held, when known."""
    reason: str
    kind: str = BROKEN
    """``broken`` (tampering or damage), ``not_a_trail`` (the file was never a hash
    chain, such as a plain event log) or ``no_trail`` (nothing to verify here)."""

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        entry = f" (entry {self.seq})" if self.seq is not None else ""
        return f"{where}{entry}: {self.reason}"


@attrs.frozen(slots=True)
class Verification:
    files: tuple[str, ...]
    chain_id: str | None
    first_seq: int
    """The entry number the given files start after (0 from a genesis)."""
    entries: int
    """How many entries were proven, counting from ``first_seq``."""
    head: str | None
    checkpoints_checked: int
    problem: Problem | None = None
    root: str | None = None
    """The RFC 9162 Merkle root over the entries proven, when it was asked for (or a
    Merkle checkpoint was checked) and the trail was given from its genesis."""

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def status(self) -> str:
        """``ok``, or the problem's kind (``broken``, ``not_a_trail``, ``no_trail``)."""
        return "ok" if self.problem is None else self.problem.kind

    @property
    def last_seq(self) -> int:
        return self.first_seq + self.entries


def chain_files(paths: Sequence[Source]) -> tuple[Path | StoredTrail, ...]:
    """Files in chain order: a directory stands for its ``audit-*.jsonl`` files (a trail
    store stands for itself)."""
    return tuple(path for path, _ in _expand(paths))


def _expand(paths: Sequence[Source]) -> list[tuple[Path | StoredTrail, bool]]:
    """Each file, and whether it came from a directory (the whole trail) rather than
    being named on its own (a part the caller chose). A trail store is whole, like a
    directory."""
    files: list[tuple[Path | StoredTrail, bool]] = []
    for raw in paths:
        if isinstance(raw, StoredTrail):
            files.append((raw, True))
            continue
        path = Path(raw)
        if path.is_dir():
            files.extend((found, True) for found in sorted(path.glob(FILE_PATTERN)))
        else:
            files.append((path, False))
    return files


def source_name(source: Path | StoredTrail) -> str:
    return source.location if isinstance(source, StoredTrail) else str(source)


def trail_file_number(path: Path) -> int | None:
    """The number in an ``audit-NNNNNN.jsonl`` name (``None`` for any other name)."""
    match = _TRAIL_FILE.fullmatch(path.name)
    return int(match.group(1)) if match else None


def read_lines(path: Path | StoredTrail) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes without the newline, whether a newline ended it)."""
    for number, raw, terminated, _ in _numbered(path):
        yield number, raw, terminated


def _numbered(source: Path | StoredTrail
              ) -> Iterator[tuple[int, bytes, bool, StoredEntry | None]]:
    """:func:`read_lines` with the stored parts of each line of a trail store."""
    if isinstance(source, StoredTrail):
        for number, (raw, entry) in enumerate(stored_lines(source), start=1):
            yield number, raw, True, entry
        return
    with open(source, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if raw.endswith(b"\n"):
                yield number, raw[:-1], True, None
            else:
                yield number, raw, False, None


class _Walker:
    """Walks a chain line by line, holding the head; ``step`` returns a problem or None."""

    def __init__(self, wanted: frozenset[int] = frozenset(), keep_ids: int = 0,
                 merkle: bool = False) -> None:
        self.chain_id: str | None = None
        self.seq = 0
        self.first_seq = 0
        self.head: str | None = None
        self.started = False
        self.file_index = 0
        self.wanted = wanted
        """Entry numbers whose hashes to keep (the checkpoints'), so memory stays flat."""
        self.hashes: dict[int, str] = {}
        self.event_ids: deque[str] = deque(maxlen=keep_ids)
        self.keep_ids = keep_ids
        self.frontier = Frontier() if merkle else None
        """The Merkle tree so far: two hashes an entry on top of the chain's one, so
        only walks that need a root pay for it."""
        self.roots: dict[int, bytes] = {}
        """Merkle roots at the wanted entry numbers (only with a frontier)."""
        self.last_body = b""
        """The canonical bytes of the last entry's event."""

    def resume_from(self, chain_id: str, seq: int, head: str, file_index: int) -> _Walker:
        """Continue a chain already walked up to entry ``seq`` (whose hash is ``head``)
        in file number ``file_index``: what a writer knows when it reads on from where
        it last was."""
        self.chain_id, self.seq, self.first_seq, self.head = chain_id, seq, seq, head
        self.file_index, self.started = file_index, True
        return self

    def step(self, value: dict[str, object], first_in_file: bool, raw: bytes) -> str | None:
        kind = value["kind"]
        if first_in_file:
            if kind == GENESIS:
                if self.started:
                    return "a genesis line in the middle of a chain"
                chain_id, created_at = str(value["chain_id"]), value["created_at"]
                assert isinstance(created_at, int | float)
                if value["hash"] != genesis_hash(chain_id, float(created_at)):
                    return "genesis hash does not match its header"
                self.chain_id, self.head, self.started = chain_id, str(value["hash"]), True
                self.file_index = 1
                self._keep(0, self.head)
                return None
            if kind == CONTINUE:
                seq, head, index = value["seq"], str(value["head"]), value["file_index"]
                assert isinstance(seq, int) and isinstance(index, int)
                if not self.started:  # verifying from a later file on
                    self.chain_id, self.seq, self.first_seq = str(value["chain_id"]), seq, seq
                    self.file_index = index
                    self.head, self.started = head, True
                    self.frontier = None  # the entries before are not here to hash
                    self._keep(seq, head)
                    return None
                if value["chain_id"] != self.chain_id:
                    return "continues another chain"
                if index != self.file_index + 1:
                    return (f"file number {index} follows file number {self.file_index} "
                            "(a file was removed, repeated or renumbered)")
                self.file_index = index
                if seq != self.seq or head != self.head:
                    return (f"continues from entry {seq}, but the previous file ends at "
                            f"entry {self.seq}" if seq != self.seq
                            else "continues from another head than the previous file's")
                return None
            return "a file must open with a genesis or continue line"
        if kind != ENTRY:
            return f"a {kind} line in the middle of a file"
        seq, prev, digest, event = value["seq"], value["prev"], value["hash"], value["event"]
        assert isinstance(seq, int) and isinstance(prev, str) and isinstance(event, dict)
        if seq != self.seq + 1:
            return f"entry number {seq} where {self.seq + 1} was due (deleted or reordered)"
        if prev != self.head:
            return "prev does not match the previous entry's hash (deleted, reordered or inserted)"
        body = event_bytes(raw, value)
        if digest != entry_hash(prev, body):
            return "hash does not match the entry's event (the event was altered)"
        self.last_body = body
        self.seq, self.head = seq, str(digest)
        if self.frontier is not None:
            self.frontier.append(leaf_hash(body))
        self._keep(seq, self.head)
        event_id = event.get("event_id")
        if self.keep_ids and isinstance(event_id, str):
            self.event_ids.append(event_id)
        return None

    def _keep(self, seq: int, digest: str) -> None:
        if seq in self.wanted:
            self.hashes[seq] = digest
            if self.frontier is not None:
                self.roots[seq] = self.frontier.root()


AnyCheckpoint = Checkpoint | TreeCheckpoint
"""A head-only checkpoint (the sink's), or a Merkle one (``audit checkpoint``'s)."""

PROGRESS_EVERY: Final = 4096
"""Lines between two progress reports (a call per line would be measurable)."""


def size_of(checkpoint: AnyCheckpoint) -> int:
    return checkpoint.tree_size if isinstance(checkpoint, TreeCheckpoint) else checkpoint.count


def verify_trail(paths: Sequence[Source], checkpoints: Sequence[AnyCheckpoint] = (), *,
                 merkle: bool = False,
                 progress: Callable[[int], None] | None = None) -> Verification:
    """Verify the chain across ``paths`` (files in order, or directories, or one trail
    store), then each checkpoint against it: its head, and for a Merkle checkpoint its
    root too.

    A directory is the whole trail, so it must open with its genesis file: a directory
    whose first file continues a chain has lost the files before it. Files named one
    by one may start later (``first_seq`` says where), but a checkpoint is only proven
    over a trail that starts at its genesis, since it vouches for every entry up to it.
    A trail store (:mod:`governed_memory.audit.stored`) is read as the one file an
    export of it would be, and also checked for its stored leaf hashes and head record.
    ``merkle`` computes the Merkle root of the whole trail (``Verification.root``);
    ``progress`` is called now and then with the bytes read since its last call.
    """
    expanded = _expand(paths)
    files = tuple(path for path, _ in expanded)
    stored = any(isinstance(path, StoredTrail) for path in files)
    if stored and len(files) > 1:
        raise ValueError("a trail store is verified on its own, not with other files")
    merkle = merkle or stored or any(isinstance(c, TreeCheckpoint) for c in checkpoints)
    walker = _Walker(frozenset(size_of(c) for c in checkpoints), merkle=merkle)

    def result(problem: Problem | None, checked: int = 0) -> Verification:
        root = (walker.frontier.root().hex()
                if walker.frontier is not None and problem is None else None)
        return Verification(tuple(source_name(f) for f in files), walker.chain_id,
                            walker.first_seq, walker.seq - walker.first_seq, walker.head,
                            checked, problem, root)

    if not files:
        where = ", ".join(str(p) for p in paths)
        return result(Problem(where, 0, None, "no trail here: no audit-*.jsonl files",
                              NO_TRAIL))
    for position, (path, from_directory) in enumerate(expanded):
        name = source_name(path)
        number_in_name = None if isinstance(path, StoredTrail) else trail_file_number(path)
        in_store = isinstance(path, StoredTrail)
        try:
            # A file is read whole (rotation bounds it), a store streamed.
            lines: Iterator[tuple[int, bytes, bool, StoredEntry | None]] = (
                _numbered(path) if isinstance(path, StoredTrail)
                else iter(list(_numbered(path))))
            first = next(lines, None)
        except OSError as exc:
            return result(Problem(name, 0, None, f"cannot read: {exc.strerror}"))
        if first is None:
            if isinstance(path, StoredTrail):
                return result(Problem(name, 0, None, "no trail here: the store holds no "
                                                     "audit trail", NO_TRAIL))
            if position == 0 and number_in_name is None:
                return result(_not_a_trail(path, "the file is empty"))
            return result(Problem(name, 0, None, "empty file (no genesis or continue "
                                                 "line)"))
        unreported = 0
        for number, raw, terminated, stored_entry in itertools.chain((first,), lines):
            if progress is not None:
                unreported += len(raw) + 1
                if number % PROGRESS_EVERY == 0:
                    progress(unreported)
                    unreported = 0
            due = walker.seq + 1
            if not terminated:
                return result(Problem(name, 0 if in_store else number, due,
                                      "incomplete last line (torn write or truncation)"))
            try:
                value = parse_line(raw)
            except ChainFormatError as exc:
                if position == 0 and number == 1 and number_in_name is None and not stored:
                    assert isinstance(path, Path)
                    return result(_not_a_trail(path, "its first line is no chain line"))
                return result(Problem(name, 0 if in_store else number, due, str(exc)))
            try:
                reason = walker.step(value, number == 1, raw)
            except ChainFormatError as exc:
                reason = str(exc)
            if reason is None and number == 1:
                reason = _opening_problem(walker, value, number_in_name,
                                          from_directory and position == 0)
            if (reason is None and stored_entry is not None
                    and stored_entry.leaf != leaf_hash(walker.last_body)):
                reason = ("the stored Merkle leaf hash is not the leaf of the entry's event "
                          "(altered): proofs of it would not verify")
            if reason is not None:
                seq = value.get("seq") if value.get("kind") == ENTRY else None
                return result(Problem(name, 0 if in_store else number,
                                      seq if isinstance(seq, int) else due, reason))
        if progress is not None and unreported:
            progress(unreported)
        if isinstance(path, StoredTrail):
            problem = _stored_head_problem(path, walker)
            if problem is not None:
                return result(problem)
    return result(_check_checkpoints(walker, checkpoints, source_name(files[-1])),
                  len(checkpoints))


def _stored_head_problem(trail: StoredTrail, walker: _Walker) -> Problem | None:
    """What is wrong with a trail store's head record, given the entries it holds: it
    must count them, name the last one's hash and hold the Merkle frontier over them."""
    head = trail.head()
    if head.entries != walker.seq or head.head != walker.head:
        return Problem(trail.location, 0, head.entries,
                       f"the head record says {head.entries} entries ending in "
                       f"{head.head[:16]}…, the entries end at entry {walker.seq} "
                       f"with {str(walker.head)[:16]}… (entries removed or added behind "
                       "the sequencer, or the record altered)")
    try:
        frontier = Frontier.restore(head.entries, head.frontier)
    except ValueError as exc:
        return Problem(trail.location, 0, head.entries,
                       f"the head record's Merkle frontier is malformed: {exc}")
    if walker.frontier is not None and frontier.root() != walker.frontier.root():
        return Problem(trail.location, 0, head.entries,
                       "the head record's Merkle frontier is not the tree of the entries "
                       "(altered): roots and proofs taken from it would not verify")
    return None


def _not_a_trail(path: Path, why: str) -> Problem:
    return Problem(str(path), 0, None,
                   f"not a hash-chained trail: {why} (a trail opens with a genesis or "
                   "continue line; a plain event log, such as the jsonl sink's, cannot be "
                   "verified)", NOT_A_TRAIL)


def _opening_problem(walker: _Walker, value: dict[str, object],
                     number_in_name: int | None, starts_directory: bool) -> str | None:
    """What is wrong with how a file opened, beyond the chain links ``step`` checks:
    its name must carry its file number, and a directory must start at the genesis."""
    if number_in_name is not None and number_in_name != walker.file_index:
        return (f"the file is named number {number_in_name} but holds file number "
                f"{walker.file_index} (renamed)")
    if starts_directory and value["kind"] == CONTINUE:
        return (f"the trail starts at file number {walker.file_index}, after entry "
                f"{walker.first_seq}: the files before it were removed")
    return None


def _check_checkpoints(walker: _Walker, checkpoints: Sequence[AnyCheckpoint],
                       last_file: str) -> Problem | None:
    if checkpoints and walker.first_seq > 0:
        return Problem(last_file, 0, walker.first_seq,
                       f"the given files start after entry {walker.first_seq}, so nothing "
                       "proves the entries before it are all there; a checkpoint is "
                       "checked only from the genesis: pass the trail's directory or "
                       "every file from audit-000001.jsonl on")
    for checkpoint in sorted(checkpoints, key=size_of):
        count = size_of(checkpoint)
        if checkpoint.chain_id != walker.chain_id:
            return Problem(last_file, 0, count,
                           f"checkpoint belongs to chain {checkpoint.chain_id}, "
                           f"the trail is chain {walker.chain_id}")
        if count > walker.seq:
            return Problem(last_file, 0, count,
                           f"truncated: the checkpoint covers {count} entries, "
                           f"the trail ends at entry {walker.seq}")
        if walker.hashes.get(count) != checkpoint.head:
            return Problem(last_file, 0, count,
                           "the trail's hash at the checkpoint differs from the checkpoint's "
                           "head (the trail was rewritten, or the checkpoint altered)")
        if (isinstance(checkpoint, TreeCheckpoint)
                and walker.roots.get(count) != checkpoint.root_bytes):
            return Problem(last_file, 0, count,
                           "the trail's Merkle root at the checkpoint differs from the "
                           "checkpoint's root, though the heads agree (the checkpoint's "
                           "root was altered)")
    return None


class TrailProblemError(ValueError):
    """A trail that does not verify, where a verified one was needed."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(str(problem))
        self.problem = problem


def tree_checkpoint_of(paths: Sequence[Source], created_at: float, *,
                       progress: Callable[[int], None] | None = None) -> TreeCheckpoint:
    """A Merkle checkpoint (unsigned) of a trail that verifies, given from its genesis:
    the whole chain is verified in the same walk that hashes the tree, so a checkpoint
    never blesses damage. Raises ``TrailProblemError`` as :func:`checkpoint_of`."""
    verification = verify_trail(paths, merkle=True, progress=progress)
    if verification.problem is not None:
        raise TrailProblemError(verification.problem)
    if verification.first_seq or verification.root is None:
        raise TrailProblemError(Problem(
            verification.files[-1], 0, verification.first_seq,
            f"the given files start after entry {verification.first_seq}: a Merkle "
            "checkpoint covers the trail from its genesis (pass its directory)"))
    assert verification.chain_id is not None and verification.head is not None
    return TreeCheckpoint(verification.chain_id, verification.last_seq, verification.root,
                          verification.head, created_at)


def checkpoint_of(paths: Sequence[Source], created_at: float) -> Checkpoint:
    """A checkpoint of a verified trail's current head; raises ``TrailProblemError`` (a
    ``ValueError``) with the problem if the trail does not verify (a checkpoint must
    never bless damage)."""
    verification = verify_trail(paths)
    if verification.problem is not None or verification.head is None:
        assert verification.problem is not None
        raise TrailProblemError(verification.problem)
    assert verification.chain_id is not None
    return Checkpoint(verification.chain_id, verification.last_seq, verification.head,
                      created_at)
