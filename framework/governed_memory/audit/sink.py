"""``AuditSink``: the hash-chained, append-only event sink an auditor verifies.

The trail is a series of files ``audit-000001.jsonl``, ``audit-000002.jsonl``, … in one
directory: a file past ``max_file_bytes`` is closed and the next opens with a
``continue`` line carrying the chain's head, so rotation is a link like any other.

Several sinks, in one process or several (a CLI command next to a running worker), may
append to one trail. Each append holds an exclusive ``flock`` on the directory's
``.lock`` and first reads, and checks link by link, whatever other writers appended
since this sink last held it (rotations included), so the chain stays linear and a
trail that no longer verifies is never appended to. A lock held longer than
``lock_timeout_s`` fails the append (``MemoryUnavailableError``) instead of hanging.

Delivery to sinks is at least once (an event outbox redelivers whatever it is not
sure arrived), so the sink drops an event whose ``event_id`` it already holds. The
ids of the newest ``dedup_window`` entries are kept, including the ones other writers
appended; on open they are read back from the files, so a restart does not forget what
was written. Redelivery only ever concerns recent events, which is why a bounded window
is enough.

Durability follows ``fsync``: ``always`` (the default) flushes every entry to disk
before ``emit`` returns; ``interval`` at most every ``fsync_interval_s`` and on
rotation and close; ``never`` leaves it to the operating system. A write that fails
half-way is cut back to the last whole entry, so the file never holds a torn line the
next entry would chain onto; a torn line left by a crash is cut by the next writer.

File work runs on one worker thread per sink, never on the event loop, in the order
``emit`` was called: a single-thread executor is a FIFO queue, so ordering needs no
lock, and an ``emit`` that is cancelled still has its entry written (or refused) in
its place. Only ``fsync = "never"`` appends on the caller's thread, and only when that
cannot block: no job is queued, no other writer holds or has moved the trail, and
neither a rotation nor a checkpoint is due (a page-cache write takes microseconds,
less than a thread hop).

Two parts have modules of their own: the lock shared with other writers
(``trail_lock.TrailLock``) and the file being appended to, with the cut-back of a
failed write and the fsync policy (``trail_file.TrailFile``). This one keeps the chain.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, TypeVar

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
from governed_memory.audit.trail_file import TrailFile, fsync_directory
from governed_memory.audit.trail_lock import TrailLock
from governed_memory.audit.verify import _Walker
from governed_memory.converter import unstructure
from governed_memory.errors import MemoryConfigurationError
from governed_memory.events import MemoryEvent

log = logging.getLogger(__name__)

FSYNC_POLICIES: Final = ("always", "interval", "never")
DEFAULT_MAX_FILE_BYTES: Final = 64 * 1024 * 1024
DEFAULT_DEDUP_WINDOW: Final = 100_000
DEFAULT_LOCK_TIMEOUT_S: Final = 10.0

T = TypeVar("T")


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
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    ) -> None:
        if fsync not in FSYNC_POLICIES:
            raise MemoryConfigurationError(f"audit fsync must be one of "
                                           f"{', '.join(FSYNC_POLICIES)}, got {fsync!r}")
        if (max_file_bytes < 4096 or dedup_window < 1 or not fsync_interval_s > 0
                or not lock_timeout_s > 0):
            raise MemoryConfigurationError("audit max_file_bytes must be at least 4096, "
                                           "dedup_window, fsync_interval_s and "
                                           "lock_timeout_s positive")
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
        self.lock_timeout_s = lock_timeout_s
        self._lock = threading.Lock()
        """One append (or open, close, checkpoint) at a time within this sink."""
        self._executor: ThreadPoolExecutor | None = None
        self._submitted = 0
        """Jobs handed to the worker (written by the caller's thread only)."""
        self._completed = 0
        """Jobs the worker finished (written by the worker only)."""
        self._opened = False
        self._trail_lock = TrailLock(self.directory, lock_timeout_s)
        self._file = TrailFile(self.directory, fsync, fsync_interval_s)
        """The current file, and how much of it this sink has written or read and checked."""
        self._file_index = 0
        self._following_for = -1
        self._following_path = ""
        self._chain_id = ""
        self._seq = 0
        self._head = ""
        self._seen: OrderedDict[str, None] = OrderedDict()
        self.duplicates = 0
        """Events dropped because their ``event_id`` was already in the trail."""

    # -- the sink protocol ----------------------------------------------------------------

    async def emit(self, event: MemoryEvent) -> None:
        body = unstructure(event)
        if self.fsync == "never" and self._append_inline(event.event_id, body):
            return
        await self._in_worker(self._append, event.event_id, body)

    async def close(self) -> None:
        if self._executor is None and not self._opened:
            return
        await self._in_worker(self._close)
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)  # idle: the close job was the last one

    async def _in_worker(self, work: Callable[..., T], *args: Any) -> T:
        """Run ``work`` on this sink's worker thread, after every job handed over
        before it. Cancelling the caller does not cancel the job: it keeps its place."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1,
                                                thread_name_prefix="governed-memory-audit")
        self._submitted += 1
        future = self._executor.submit(self._counted, work, *args)
        return await asyncio.shield(asyncio.wrap_future(future))

    def _counted(self, work: Callable[..., T], *args: Any) -> T:
        try:
            return work(*args)
        finally:
            self._completed += 1

    # -- inspection ---------------------------------------------------------------------

    async def open(self) -> None:
        """Open (and repair a torn tail of) the trail now rather than on first emit."""
        await self._in_worker(self._open_locked)

    @property
    def count(self) -> int:
        """Entries in the chain, as far as this sink has seen it."""
        return self._seq

    @property
    def head(self) -> str:
        return self._head

    @property
    def chain_id(self) -> str:
        return self._chain_id

    def checkpoint(self) -> Checkpoint:
        """The chain's length and head now (after reading what other writers added), to
        keep somewhere the trail's writers cannot reach; ``governed-memory audit verify
        --checkpoint`` checks the trail against it. It reads files: from a coroutine
        while writers are busy, call it through ``asyncio.to_thread``."""
        with self._lock, self._opened_for_now():
            with self._trail_lock.held():
                self._catch_up()
            return Checkpoint(self._chain_id, self._seq, self._head, time.time())

    def seen(self, event_id: str) -> bool:
        with self._lock, self._opened_for_now():
            with self._trail_lock.held():
                self._catch_up()
            return event_id in self._seen

    @contextlib.contextmanager
    def _opened_for_now(self) -> Iterator[None]:
        """Open for the length of a look when the sink is closed, and close again."""
        was_open = self._opened
        self._ensure_open()
        try:
            yield
        finally:
            if not was_open:
                self._shut()

    # -- appending (in the worker thread, one at a time) ----------------------------------

    def _open_locked(self) -> None:
        with self._lock:
            self._ensure_open()

    def _append(self, event_id: str, body: dict[str, Any]) -> None:
        with self._lock:
            self._ensure_open()
            with self._trail_lock.held():
                self._catch_up()
                if event_id in self._seen:
                    self.duplicates += 1
                    return
                line, digest = entry_line(self._seq + 1, self._head, body)
                if self._rotation_due(line):
                    self._rotate()
                self._commit(event_id, line, digest)
                self._file.sync(force=False)
                if self._checkpoint_due():
                    self._write_checkpoint()

    def _append_inline(self, event_id: str, body: dict[str, Any]) -> bool:
        """``fsync = "never"``: append on the caller's thread if nothing could make that
        block or reorder; False hands the event to the worker instead."""
        if not self._opened or self._submitted != self._completed:
            return False  # a queued job would be overtaken
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if not self._opened or not self._trail_lock.try_acquire():
                return False
            try:
                if not self._unchanged_by_others():
                    return False
                if event_id in self._seen:
                    self.duplicates += 1
                    return True
                line, digest = entry_line(self._seq + 1, self._head, body)
                if self._rotation_due(line) or self._checkpoint_due(next_entry=True):
                    return False
                self._commit(event_id, line, digest)
                return True
            finally:
                self._trail_lock.release()
        finally:
            self._lock.release()

    def _rotation_due(self, line: bytes) -> bool:
        return self._file.size + len(line) > self.max_file_bytes and self._file.size > 0

    def _checkpoint_due(self, *, next_entry: bool = False) -> bool:
        seq = self._seq + 1 if next_entry else self._seq
        return bool(self.checkpoint_every) and seq % (self.checkpoint_every or 1) == 0

    def _commit(self, event_id: str, line: bytes, digest: str) -> None:
        self._file.write(line)
        self._seq += 1
        self._head = digest
        self._remember(event_id)

    def _rotate(self) -> None:
        self._file.close()
        self._file_index += 1
        self._file.create(self.directory / file_name(self._file_index),
                          continue_line(self._chain_id, self._seq, self._head,
                                        self._file_index))

    def _remember(self, event_id: str) -> None:
        self._seen[event_id] = None
        if len(self._seen) > self.dedup_window:
            self._seen.popitem(last=False)

    def _write_checkpoint(self) -> None:
        assert self.checkpoint_path is not None
        self._file.sync(force=True)
        checkpoint = Checkpoint(self._chain_id, self._seq, self._head, time.time())
        with open(self.checkpoint_path, "a", encoding="ascii") as handle:
            handle.write(checkpoint.to_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    # -- sharing the trail with other writers ---------------------------------------------

    def _following(self) -> str:
        """The path of the file after the current one, as a string cached per file
        number: it is looked for on every append, so it is built once."""
        if self._following_for != self._file_index:
            self._following_path = os.path.join(self.directory,
                                                 file_name(self._file_index + 1))
            self._following_for = self._file_index
        return self._following_path

    def _unchanged_by_others(self) -> bool:
        return (self._file.size_on_disk() == self._file.size
                and not os.path.exists(self._following()))

    def _catch_up(self) -> None:
        """Read on from where this sink last was: what other writers appended to the
        current file, then every file they rotated to. Each line is checked against the
        chain as this sink knows it; anything that does not link refuses the append."""
        size, known = self._file.size_on_disk(), self._file.size
        if size != known:
            current = self.directory / file_name(self._file_index)
            if size < known:
                raise AuditChainError(f"{current}: shrank from {known} to {size} "
                                      "bytes while open (cut by someone); refusing to "
                                      "append")
            self._take_in(current, known, self._walker(self._file_index))
        while os.path.exists(self._following()):  # another writer rotated
            following = Path(self._following())
            try:
                fd = os.open(following, os.O_WRONLY | os.O_APPEND)
            except FileNotFoundError:
                return
            if _torn_only(following):
                os.close(fd)
                self._drop_torn(following)
                return
            self._file.switch_to(fd)
            self._file_index += 1
            self._take_in(following, 0, self._walker(self._file_index - 1))

    def _walker(self, file_index: int) -> _Walker:
        return _Walker(keep_ids=self.dedup_window).resume_from(
            self._chain_id, self._seq, self._head, file_index)

    def _take_in(self, path: Path, offset: int, walker: _Walker) -> None:
        """Check the lines of ``path`` from byte ``offset`` on with ``walker`` and take
        the chain's new length, head and event ids from it. A torn last line is a dead
        writer's (this sink holds the lock, so no live one is writing): it is cut."""
        valid = 0
        torn = False
        with open(path, "rb") as handle:
            handle.seek(offset)
            for number, line in enumerate(handle, start=1):  # streamed: files are large
                if not line.endswith(b"\n"):
                    torn = True
                    break
                raw = line[:-1]
                where = (f"{path}:{number}" if offset == 0
                         else f"{path} (line {number} after byte {offset})")
                try:
                    value = parse_line(raw)
                except ChainFormatError as exc:
                    raise AuditChainError(f"{where}: {exc}; refusing to append") from None
                try:
                    reason = walker.step(value, offset == 0 and number == 1, raw)
                except ChainFormatError as exc:
                    reason = str(exc)
                if reason is not None:
                    raise AuditChainError(f"{where}: {reason}; refusing to append")
                valid += len(line)
        if torn:
            log.warning("audit trail %s: cutting a torn last line (a crash mid-write)", path)
            with open(path, "r+b") as handle:
                handle.truncate(offset + valid)
                handle.flush()
                os.fsync(handle.fileno())
        if not walker.started or walker.chain_id is None or walker.head is None:
            raise AuditChainError(f"{path}: holds no genesis or continue line; "
                                  "refusing to append")
        self._chain_id, self._seq, self._head = walker.chain_id, walker.seq, walker.head
        self._file.size = offset + valid
        for event_id in walker.event_ids:
            self._remember(event_id)

    def _drop_torn(self, path: Path) -> None:
        """A crash between creating a file and writing its first line leaves an empty
        file (or one torn line): it never held an entry, so it goes."""
        log.warning("audit trail %s: removing a file a crash left without its first line",
                    path)
        path.unlink()
        fsync_directory(self.directory)

    # -- opening ----------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._opened:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        self._trail_lock.open()
        try:
            with self._trail_lock.held():
                files = sorted(self.directory.glob(FILE_PATTERN))
                while files and _torn_only(files[-1]):
                    self._drop_torn(files.pop())
                if not files:
                    self._chain_id = "chain_" + uuid.uuid4().hex
                    self._file_index = 1
                    created = time.time()
                    self._file.create(self.directory / file_name(1),
                                      genesis_line(self._chain_id, created))
                    value = parse_line(genesis_line(self._chain_id, created)[:-1])
                    self._head, self._seq = str(value["hash"]), 0
                else:
                    self._resume(files)
        except BaseException:
            self._shut()
            raise
        self._opened = True

    def _resume(self, files: list[Path]) -> None:
        last = files[-1]
        self._file_index = _index_of(last)
        walker = _Walker(keep_ids=self.dedup_window)
        self._take_in(last, 0, walker)
        if walker.file_index != self._file_index:
            raise AuditChainError(f"{last}: holds file number {walker.file_index} "
                                  "(renamed); refusing to append")
        ids = list(self._seen)
        for earlier in reversed(files[:-1]):
            if len(ids) >= self.dedup_window:
                break
            ids[:0] = _event_ids(earlier)
        self._seen = OrderedDict.fromkeys(ids[-self.dedup_window:])
        self._file.reopen(last)
        # Impossible under the lock, unless the disk lies:
        if self._file.size_on_disk() != self._file.size:
            raise AuditChainError(f"{last}: changed while being read; refusing to append")

    def _close(self) -> None:
        with self._lock:
            self._shut()

    def _shut(self) -> None:
        self._file.close()
        self._trail_lock.close()
        self._opened = False
        self._seen.clear()


def _torn_only(path: Path) -> bool:
    """Empty, or one line without its newline (nothing was ever completely written)."""
    with open(path, "rb") as handle:
        return b"\n" not in handle.read(4096)  # a first line is a few hundred bytes


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
                                 "dedup_window", "checkpoint_path", "checkpoint_every",
                                 "lock_timeout_s"})


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


__all__ = [
    "DEFAULT_DEDUP_WINDOW",
    "DEFAULT_LOCK_TIMEOUT_S",
    "DEFAULT_MAX_FILE_BYTES",
    "FSYNC_POLICIES",
    "AuditChainError",
    "AuditSink",
    "audit_sink_from_config",
    "fsync_directory",
]
