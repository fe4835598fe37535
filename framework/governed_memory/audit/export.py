"""Writing a stored trail out as files: ``governed-memory audit export``.

A trail kept in a database (:mod:`governed_memory.audit.stored`) is exported as exactly
the files the ``audit`` sink writes: ``audit-000001.jsonl`` opening with the genesis
line, entry lines, and a file past ``max_file_bytes`` closed and continued in the next
by a ``continue`` line, by the sink's own rule. Every line is the stored parts as they
are, so the export is a faithful copy: ``audit verify``, ``prove``, ``verify-proof``
and the rest take it as they take the sink's files, and an altered row is the break
they report in the files too (the export itself checks nothing).

The export goes to a directory holding no trail yet, files written and synced one by
one and the directory synced at the end; a failure part-way removes what it wrote, so
a directory never holds half an export that would verify as a shorter trail.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import attrs

from governed_memory.audit.chain import (
    FILE_PATTERN,
    continue_line,
    file_name,
    stated_genesis_line,
)
from governed_memory.audit.sink import DEFAULT_MAX_FILE_BYTES, fsync_directory
from governed_memory.audit.stored import StoredTrail


class ExportError(ValueError):
    """The export cannot be written where it was asked (the message says why)."""


@attrs.frozen(slots=True)
class Exported:
    chain_id: str
    entries: int
    head: str
    files: tuple[str, ...]


def export_trail(trail: StoredTrail, directory: str | os.PathLike[str], *,
                 max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
                 progress: Callable[[int], None] | None = None) -> Exported:
    """Write ``trail`` as ``audit-*.jsonl`` files in ``directory`` (created if needed,
    and holding no trail files). ``progress`` is called with each entry's number.
    Raises :class:`ExportError` for a directory that cannot take it, and whatever the
    store raises (``MemoryUnavailableError``) if it cannot be read."""
    if max_file_bytes < 4096:
        raise ExportError("max_file_bytes must be at least 4096")
    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise ExportError(f"{target}: not a directory")
    if target.is_dir() and any(target.glob(FILE_PATTERN)):
        raise ExportError(f"{target}: already holds a trail (audit-*.jsonl); export into "
                          "an empty directory")
    opening = trail.opening()
    if opening is None:
        raise ExportError(f"{trail.location}: holds no audit trail to export")
    target.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    try:
        entries, head = _write(trail, opening.chain_id, opening.created_at, opening.genesis,
                               target, max_file_bytes, written, progress)
        fsync_directory(target)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    return Exported(opening.chain_id, entries, head, tuple(str(p) for p in written))


def _write(trail: StoredTrail, chain_id: str, created_at: float, genesis: str,
           target: Path, max_file_bytes: int, written: list[Path],
           progress: Callable[[int], None] | None) -> tuple[int, str]:
    index = 1
    handle = _create(target / file_name(index), written)
    size = handle.write(stated_genesis_line(chain_id, created_at, genesis))
    seq, head = 0, genesis
    try:
        for entry in trail.entries():
            line = entry.line()
            if size + len(line) > max_file_bytes and size > 0:  # the sink's rotation rule
                _finish(handle)
                index += 1
                handle = _create(target / file_name(index), written)
                size = handle.write(continue_line(chain_id, seq, head, index))
            size += handle.write(line)
            seq, head = entry.seq, entry.hash
            if progress is not None:
                progress(seq)
    finally:
        _finish(handle)
    return seq, head


def _create(path: Path, written: list[Path]) -> _File:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
    written.append(path)
    return _File(fd)


class _File:
    """An exported file being written: buffered, synced and closed by :func:`_finish`."""

    def __init__(self, fd: int) -> None:
        self.handle = os.fdopen(fd, "wb", buffering=1 << 20)

    def write(self, data: bytes) -> int:
        return self.handle.write(data)


def _finish(file: _File) -> None:
    if file.handle.closed:
        return
    file.handle.flush()
    os.fsync(file.handle.fileno())
    file.handle.close()
