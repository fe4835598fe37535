"""``AuditSink``: the hash-chained, append-only event sink an auditor verifies.

One process appends to one trail directory at a time (an exclusive ``flock`` on
``.lock`` says so; a second opener gets ``MemoryConfigurationError``). The trail is a
series of files ``audit-000001.jsonl``, ``audit-000002.jsonl``, …: a file past
``max_file_bytes`` is closed and the next opens with a ``continue`` line carrying the
chain's head, so rotation is a link like any other.

Delivery to sinks is at least once (an event outbox redelivers whatever it is not
sure arrived), so the sink drops an event whose ``event_id`` it already holds. The
ids of the newest ``dedup_window`` entries are kept; on open they are read back from
the files, so a restart does not forget what it wrote. Redelivery only ever concerns
recent events, which is why a bounded window is enough.

Durability follows ``fsync``: ``always`` (the default) flushes every entry to disk
before ``emit`` returns; ``interval`` at most every ``fsync_interval_s`` and on
rotation and close; ``never`` leaves it to the operating system. A write that fails
half-way is cut back to the last whole entry, so the file never holds a torn line the
next entry would chain onto; a torn line left by a crash is cut on the next open.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from governed_memory.audit.chain import (
    FILE_PATTERN,
    ChainFormatError,
    Checkpoint,
    continue_line,
    entry_line,
    file_name,
    genesis_line,
    parse_line,
)
from governed_memory.audit.query import json_lines
from governed_memory.audit.verify import _Walker, read_lines
from governed_memory.converter import unstructure
from governed_memory.errors import MemoryConfigurationError, MemoryUnavailableError
from governed_memory.events import MemoryEvent

log = logging.getLogger(__name__)

FSYNC_POLICIES: Final = ("always", "interval", "never")
DEFAULT_MAX_FILE_BYTES: Final = 64 * 1024 * 1024
DEFAULT_DEDUP_WINDOW: Final = 100_000


class AuditChainError(MemoryConfigurationError):
    """The trail on disk does not verify, so nothing more may be chained onto it."""

    code = "audit_chain"


class AuditSink:
    """Appends events to a hash chain in ``directory``. See the module docstring."""

    name = "audit"

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        fsync: str = "always",
        fsync_interval_s: float = 1.0,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        dedup_window: int = DEFAULT_DEDUP_WINDOW,
        checkpoint_path: str | os.PathLike[str] | None = None,
        checkpoint_every: int | None = None,
    ) -> None:
        if fsync not in FSYNC_POLICIES:
            raise MemoryConfigurationError(f"audit fsync must be one of "
                                           f"{', '.join(FSYNC_POLICIES)}, got {fsync!r}")
        if max_file_bytes < 4096 or dedup_window < 1 or not fsync_interval_s > 0:
            raise MemoryConfigurationError("audit max_file_bytes must be at least 4096, "
                                           "dedup_window and fsync_interval_s positive")
        if checkpoint_every is not None and (checkpoint_every < 1 or checkpoint_path is None):
            raise MemoryConfigurationError("audit checkpoint_every needs a checkpoint_path "
                                           "and must be positive")
        self.directory = Path(directory)
        self.fsync = fsync
        self.fsync_interval_s = fsync_interval_s
        self.max_file_bytes = max_file_bytes
        self.dedup_window = dedup_window
        self.checkpoint_path = None if checkpoint_path is None else Path(checkpoint_path)
        self.checkpoint_every = checkpoint_every
        self._lock = threading.Lock()
        self._async_lock = asyncio.Lock()
        self._opened = False
        self._lock_fd: int | None = None
        self._fd: int | None = None
        self._size = 0
        self._file_index = 0
        self._chain_id = ""
        self._seq = 0
        self._head = ""
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._last_sync = 0.0
        self._dirty = False
        self.duplicates = 0
        """Events dropped because their ``event_id`` was already in the trail."""

    # -- the sink protocol ----------------------------------------------------------------

    async def emit(self, event: MemoryEvent) -> None:
        body = unstructure(event)
        async with self._async_lock:
            if not self._opened:  # reads the newest file back: off the event loop
                await asyncio.to_thread(self._open_locked)
            if self.fsync == "never":
                # A page-cache write takes microseconds, less than a thread hop.
                self._append(event.event_id, body)
            else:
                await asyncio.to_thread(self._append, event.event_id, body)

    async def close(self) -> None:
        async with self._async_lock:
            await asyncio.to_thread(self._close)

    # -- inspection ---------------------------------------------------------------------

    async def open(self) -> None:
        """Open (and repair a torn tail of) the trail now rather than on first emit."""
        async with self._async_lock:
            await asyncio.to_thread(self._open_locked)

    @property
    def count(self) -> int:
        """Entries in the chain so far."""
        return self._seq

    @property
    def head(self) -> str:
        return self._head

    @property
    def chain_id(self) -> str:
        return self._chain_id

    def checkpoint(self) -> Checkpoint:
        """The chain's length and head now, to keep somewhere the trail's writers cannot
        reach; ``governed-memory audit verify --checkpoint`` checks the trail against it."""
        with self._lock:
            self._ensure_open()
            return Checkpoint(self._chain_id, self._seq, self._head, time.time())

    def seen(self, event_id: str) -> bool:
        with self._lock:
            self._ensure_open()
            return event_id in self._seen

    # -- appending (in a worker thread, one at a time) ---------------------------------------

    def _open_locked(self) -> None:
        with self._lock:
            self._ensure_open()

    def _append(self, event_id: str, body: dict[str, Any]) -> None:
        with self._lock:
            self._ensure_open()
            if event_id in self._seen:
                self.duplicates += 1
                return
            line, digest = entry_line(self._seq + 1, self._head, body)
            if self._size + len(line) > self.max_file_bytes and self._size > 0:
                self._rotate()
            self._write(line)
            self._seq += 1
            self._head = digest
            self._remember(event_id)
            self._sync(force=False)
            if self.checkpoint_every and self._seq % self.checkpoint_every == 0:
                self._write_checkpoint()

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        before = self._size
        try:
            written = 0
            while written < len(data):
                written += os.write(self._fd, data[written:])
        except OSError as exc:
            # Never leave half an entry for the next one to chain onto.
            try:
                os.ftruncate(self._fd, before)
            except OSError:
                log.error("audit trail %s: could not cut back a failed write",
                          self.directory)
            raise MemoryUnavailableError(
                f"audit trail write failed: {errno.errorcode.get(exc.errno or 0, 'error')}"
            ) from None
        self._size = before + len(data)
        self._dirty = True

    def _sync(self, *, force: bool) -> None:
        if self._fd is None or not self._dirty or self.fsync == "never":
            return
        now = time.monotonic()
        if (force or self.fsync == "always"
                or now - self._last_sync >= self.fsync_interval_s):
            os.fsync(self._fd)
            self._last_sync, self._dirty = now, False

    def _rotate(self) -> None:
        assert self._fd is not None
        self._sync(force=True)
        os.close(self._fd)
        self._fd = None
        self._file_index += 1
        self._create(self._file_index,
                     continue_line(self._chain_id, self._seq, self._head, self._file_index))

    def _create(self, index: int, first_line: bytes) -> None:
        path = self.directory / file_name(index)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o640)
        self._fd, self._size = fd, 0
        self._write(first_line)
        os.fsync(fd)
        _fsync_directory(self.directory)
        self._dirty = False

    def _remember(self, event_id: str) -> None:
        self._seen[event_id] = None
        if len(self._seen) > self.dedup_window:
            self._seen.popitem(last=False)

    def _write_checkpoint(self) -> None:
        assert self.checkpoint_path is not None
        self._sync(force=True)
        checkpoint = Checkpoint(self._chain_id, self._seq, self._head, time.time())
        with open(self.checkpoint_path, "a", encoding="ascii") as handle:
            handle.write(checkpoint.to_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    # -- opening ----------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._opened:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _exclusive_lock(self.directory / ".lock")
        try:
            files = self._drop_empty_tail(sorted(self.directory.glob(FILE_PATTERN)))
            if not files:
                self._chain_id = "chain_" + uuid.uuid4().hex
                self._file_index = 1
                created = time.time()
                self._create(1, genesis_line(self._chain_id, created))
                value = parse_line(genesis_line(self._chain_id, created)[:-1])
                self._head, self._seq = str(value["hash"]), 0
            else:
                self._resume(files)
        except BaseException:
            self._release()
            raise
        self._opened = True

    def _drop_empty_tail(self, files: list[Path]) -> list[Path]:
        """A crash between creating a file and writing its first line leaves an empty
        file (or, after the torn-line cut, one): it never held an entry, so it goes,
        and the chain resumes from the file before it."""
        while files and _torn_only(files[-1]):
            log.warning("audit trail %s: removing a file a crash left without its "
                        "first line", files[-1])
            files[-1].unlink()
            _fsync_directory(self.directory)
            files = files[:-1]
        return files

    def _resume(self, files: list[Path]) -> None:
        last = files[-1]
        self._file_index = _index_of(last)
        walker = _Walker(keep_ids=self.dedup_window)
        valid = 0
        for number, raw, terminated in read_lines(last):
            if not terminated:
                log.warning("audit trail %s: cutting a torn last line (a crash mid-write)",
                            last)
                with open(last, "r+b") as handle:
                    handle.truncate(valid)
                    handle.flush()
                    os.fsync(handle.fileno())
                break
            try:
                value = parse_line(raw)
            except ChainFormatError as exc:
                raise AuditChainError(f"{last}:{number}: {exc}; refusing to append") from None
            try:
                reason = walker.step(value, number == 1, raw)
            except ChainFormatError as exc:
                reason = str(exc)
            if reason is not None:
                raise AuditChainError(f"{last}:{number}: {reason}; refusing to append")
            valid += len(raw) + 1
        if not walker.started or walker.chain_id is None or walker.head is None:
            raise AuditChainError(f"{last}: holds no genesis or continue line; "
                                  "refusing to append")
        self._chain_id, self._seq, self._head = walker.chain_id, walker.seq, walker.head
        ids = list(walker.event_ids)
        for earlier in reversed(files[:-1]):
            if len(ids) >= self.dedup_window:
                break
            ids[:0] = _event_ids(earlier)
        for event_id in ids[-self.dedup_window:]:
            self._seen[event_id] = None
        self._fd = os.open(last, os.O_WRONLY | os.O_APPEND)
        self._size = os.fstat(self._fd).st_size

    def _close(self) -> None:
        with self._lock:
            if self._fd is not None:
                self._sync(force=True)
                os.close(self._fd)
                self._fd = None
            self._release()
            self._opened = False
            self._seen.clear()

    def _release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None


def _torn_only(path: Path) -> bool:
    """Empty, or one line without its newline (nothing was ever completely written)."""
    with open(path, "rb") as handle:
        return b"\n" not in handle.read(4096)  # a first line is a few hundred bytes


def _exclusive_lock(path: Path) -> int:
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise MemoryConfigurationError(
            f"audit trail {path.parent} is open in another sink or process; one writer "
            "per trail keeps the chain linear") from None
    return fd


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _index_of(path: Path) -> int:
    try:
        return int(path.stem.removeprefix("audit-"))
    except ValueError:
        raise AuditChainError(f"{path}: not an audit file name") from None


def _event_ids(path: Path) -> list[str]:
    ids = []
    for value in json_lines(path):
        event = value.get("event") if isinstance(value, dict) else None
        if isinstance(event, dict) and isinstance(event.get("event_id"), str):
            ids.append(event["event_id"])
    return ids


_CONFIG_KEYS: Final = frozenset({"directory", "fsync", "fsync_interval_s", "max_file_bytes",
                                 "dedup_window", "checkpoint_path", "checkpoint_every"})


def audit_sink_from_config(config: Mapping[str, Any]) -> AuditSink:
    """The ``audit`` event-sink plugin's factory: ``{"directory": ..., "fsync": ...}``."""
    unknown = sorted(set(config) - _CONFIG_KEYS)
    if unknown:
        raise MemoryConfigurationError(f"audit sink: unknown config key(s) {unknown}; "
                                       f"known: {sorted(_CONFIG_KEYS)}")
    if not isinstance(config.get("directory"), str | os.PathLike):
        raise MemoryConfigurationError("audit sink: config needs a directory")
    try:
        return AuditSink(**dict(config))
    except TypeError as exc:
        raise MemoryConfigurationError(f"audit sink: {exc}") from None
