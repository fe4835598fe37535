"""The lock that lets several writers share one hash-chained trail.

A CLI command may append next to a running worker, so every append holds an exclusive
``flock`` on the trail directory's ``.lock`` file while it reads what the others wrote
and chains its entry after it. A writer that stays wedged while holding the lock must
not hang every operation that records an event: waiting is bounded, and a lock held
past the timeout fails the append (``MemoryUnavailableError``) instead.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from governed_memory.errors import MemoryUnavailableError

LOCK_FILE: Final = ".lock"
_POLL_MAX_S: Final = 0.02


class TrailLock:
    """The exclusive ``flock`` on ``directory/.lock``, shared by every writer of the
    trail in this process or another, waited for at most ``timeout_s``."""

    __slots__ = ("_fd", "directory", "timeout_s")

    def __init__(self, directory: Path, timeout_s: float) -> None:
        self.directory = directory
        self.timeout_s = timeout_s
        self._fd: int | None = None

    def open(self) -> None:
        """Open (creating it if need be) the lock file of the existing directory."""
        self._fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o640)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops any flock still held
            self._fd = None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lock, waiting at most ``timeout_s`` for it."""
        if not self.try_acquire():
            deadline = time.monotonic() + self.timeout_s
            delay = 0.0005
            while not self.try_acquire():
                if time.monotonic() >= deadline:
                    raise MemoryUnavailableError(
                        f"audit trail {self.directory} stayed locked by another writer "
                        f"for {self.timeout_s} s")
                time.sleep(delay)
                delay = min(delay * 2, _POLL_MAX_S)
        try:
            yield
        finally:
            self.release()

    def try_acquire(self) -> bool:
        """Take the lock if no one holds it; never waits."""
        import fcntl

        assert self._fd is not None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def release(self) -> None:
        import fcntl

        assert self._fd is not None
        fcntl.flock(self._fd, fcntl.LOCK_UN)
