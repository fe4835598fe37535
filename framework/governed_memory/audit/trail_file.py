"""The trail file a writer appends to, written so that it never holds a torn entry.

An entry is chained onto the bytes before it, so a write that fails half-way (a full
disk) is cut back to the last whole entry at once: the next entry must not chain onto
half a line. Durability follows the sink's ``fsync`` policy: ``always`` flushes every
entry, ``interval`` at most every ``fsync_interval_s`` (and whenever the file is left),
``never`` leaves it to the operating system. A new file is made durable, its first line
and its name in the directory both, before anything is chained onto it.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from pathlib import Path

from governed_memory.errors import MemoryUnavailableError

# The sink's logger: what the trail's writer logs keeps one name, whichever module says it.
log = logging.getLogger("governed_memory.audit.sink")


class TrailFile:
    """The open file of a trail: its descriptor, how many of its bytes the writer has
    written or read and checked (``size``), and whether they are flushed yet."""

    __slots__ = ("_dirty", "_last_sync", "directory", "fd", "fsync", "fsync_interval_s",
                 "size")

    def __init__(self, directory: Path, fsync: str, fsync_interval_s: float) -> None:
        self.directory = directory
        self.fsync = fsync
        self.fsync_interval_s = fsync_interval_s
        self.fd: int | None = None
        self.size = 0
        self._last_sync = 0.0
        self._dirty = False

    def create(self, path: Path, first_line: bytes) -> None:
        """A new file (it must not exist yet) holding ``first_line``, made durable."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o640)
        self.fd, self.size = fd, 0
        self.write(first_line)
        os.fsync(fd)
        fsync_directory(self.directory)
        self._dirty = False

    def reopen(self, path: Path) -> None:
        """Append to an existing file whose ``size`` bytes were read and checked."""
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND)

    def switch_to(self, fd: int) -> None:
        """Leave this file (flushed) for the next one, opened as ``fd``, from its start."""
        self.close()
        self.fd, self.size, self._dirty = fd, 0, False

    def size_on_disk(self) -> int:
        """The file's size now, which other writers may have grown."""
        assert self.fd is not None
        return os.fstat(self.fd).st_size

    def write(self, data: bytes) -> None:
        assert self.fd is not None
        before = self.size
        try:
            written = 0
            while written < len(data):
                written += os.write(self.fd, data[written:])
        except OSError as exc:
            # Never leave half an entry for the next one to chain onto.
            try:
                os.ftruncate(self.fd, before)
            except OSError:
                log.error("audit trail %s: could not cut back a failed write",
                          self.directory)
            raise MemoryUnavailableError(
                f"audit trail write failed: {errno.errorcode.get(exc.errno or 0, 'error')}"
            ) from None
        self.size = before + len(data)
        self._dirty = True

    def sync(self, *, force: bool) -> None:
        """Flush what is written, if the policy says now (``force``: whatever it says,
        unless it is ``never``)."""
        if self.fd is None or not self._dirty or self.fsync == "never":
            return
        now = time.monotonic()
        if (force or self.fsync == "always"
                or now - self._last_sync >= self.fsync_interval_s):
            os.fsync(self.fd)
            self._last_sync, self._dirty = now, False

    def close(self) -> None:
        """Flush and close the file, if one is open."""
        if self.fd is not None:
            self.sync(force=True)
            os.close(self.fd)
            self.fd = None


def fsync_directory(directory: Path) -> None:
    """Make a file's creation or rename in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
