"""``governed-memory serve --workers N``: N server processes over one listening socket,
under a parent that prepares the stores, restarts a worker that dies and drains them all.

**Start.** The parent does, once and before any worker exists, everything that must not
race: it builds the manager and starts it and the profile's tier stores (which creates
the database and runs its migrations, SQLite or PostgreSQL), checks the provider's
health, opens the key store (creating its table or schema) and reads the JWT key, then
closes them all. N processes starting together on a fresh or older SQLite file would
otherwise all try to migrate it, each waiting at most ``busy_timeout`` for whichever
holds the write lock, and a long migration would fail every other worker's start. Then
the parent binds the socket, announces ``listening on http://HOST:PORT``, and starts the
workers: ``python -m governed_memory_service.workers``, each a fresh interpreter (no
thread, lock, connection or file handle of the parent's crosses into it), with the
listening socket as an inherited descriptor and the options on its stdin (never on its
argv, which every user of the machine can read: ``--keys`` may carry a password).

**Sharing the port.** ``--listen-mode reuseport`` (the default on Linux): the parent's
socket is bound with ``SO_REUSEPORT`` and never listens (it holds the port ``--port 0``
chose), and each worker binds and listens on a socket of its own beside it; the kernel
spreads new connections over the workers' sockets by a hash of the client's address and
port. ``--listen-mode shared`` (the default elsewhere, where ``SO_REUSEPORT`` does not
spread): every worker accepts from the one socket the parent bound and listens on,
inherited as a descriptor. Measured (``bench/service.py``, ``bench/results/service.md``):
a burst of 32 keep-alive connections split between two workers from 16/16 to 22/10
with reuseport and from 16/16 to 32/0 shared (40 bursts each), because an event loop
that wakes for the shared socket accepts every pending connection before it yields
(libuv and asyncio alike), and clients that keep their connections keep the imbalance.
What reuseport costs: the connections in a dying worker's accept queue are reset (never
acknowledged; the shared queue would keep them for the other workers), and another
process of the same user could bind the port beside it.

**Running.** Each worker is the single-process server: its own manager, key store,
audit sink and caches, the same graceful stop. SQLite is shared safely across processes
(WAL, ``BEGIN IMMEDIATE`` writes with a busy timeout), and so is the file audit trail
(each append holds the trail's ``flock`` and first catches up with what the other
writers appended, so the chain stays one chain). A worker tells the parent when it
accepts (a byte on a pipe). One that exits while the parent is not stopping is
restarted after a back-off (0.5 s, doubling up to 10 s); more than ``--max-restarts``
exits within ``--restart-window`` seconds is a crash loop: the parent reports it (the
last exit status, and whether the worker ever became ready), drains the others and
exits 1. A worker whose parent disappears (its stdin reaches end of file) stops as on
SIGTERM, so no orphan keeps the port.

**Stopping.** SIGTERM or SIGINT to the parent sends SIGTERM to every worker; each stops
accepting, finishes its requests in flight (at most ``--shutdown-timeout`` seconds),
closes its manager, and exits 0. An acknowledged write was committed before its
response was sent, so none is lost. The parent waits for all of them (a worker still
running ``--shutdown-timeout`` + 60 s later is killed and reported) and exits 0 when
every one stopped cleanly. Workers run in a process group of their own, so a terminal's
Ctrl-C reaches the parent only, which then stops them in order.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from typing import Final

import attrs

from governed_memory_service.serve import (
    ServeOptions,
    event_loop_factory,
    serve_app,
    server_parts,
)

__all__ = ["STARTUP_FAILURE", "supervise"]

STARTUP_FAILURE: Final = 3
"""A worker's exit status when its server never started (uvicorn's own convention)."""
DRAIN_GRACE_S: Final = 60.0
"""Beyond ``--shutdown-timeout``: time to close a worker's manager after its requests."""
BACKOFF_FIRST_S: Final = 0.5
BACKOFF_MAX_S: Final = 10.0
LISTEN_BACKLOG: Final = 2048
_READY: Final = b"R"


def _say(message: str) -> None:
    print(f"serve[{os.getpid()}]: {message}", file=sys.stderr, flush=True)


WORKERS_ENV = "GOVERNED_MEMORY_SERVICE_WORKERS"
"""Set in each worker's environment to the number of workers: a provider that sizes
process pools of its own by the host's cores reads it (``docs/deployment.md``)."""


@attrs.define
class _Worker:
    slot: int
    process: subprocess.Popen[bytes]
    ready_fd: int
    ready: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _bind(options: ServeOptions) -> socket.socket:
    """The listening socket (shared mode), or the port's placeholder (reuseport mode:
    bound, never listening, so it takes no connection but holds the port number that
    ``--port 0`` chose for the workers to bind beside it)."""
    family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if options.listen_mode == "reuseport":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((options.host, options.port))
        if options.listen_mode == "shared":
            sock.listen(LISTEN_BACKLOG)
        sock.set_inheritable(True)
    except BaseException:
        sock.close()
        raise
    return sock


def reuseport_socket(host: str, port: int) -> socket.socket:
    """A worker's own listening socket in reuseport mode."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(LISTEN_BACKLOG)
    return sock


async def prepare(options: ServeOptions) -> None:
    """Everything that must happen once, before any worker: migrations of the memory
    database and the tier stores, the key store's table, the JWT key; and the provider
    must answer its health probe."""
    from governed_memory.errors import MemoryUnavailableError
    from governed_memory.tiers import MemoryTiers


    manager, key_store, _jwt = server_parts(options)
    async with MemoryTiers.from_manager(manager):
        health = await manager.health()
        if not health.ok:
            raise MemoryUnavailableError(f"the provider {health.provider} is not healthy: "
                                         f"{health.detail}")
    async with key_store:
        await key_store.check()


class _Supervisor:
    def __init__(self, options: ServeOptions, listener: socket.socket) -> None:
        self.options = options
        self.listener = listener
        self.port = int(listener.getsockname()[1])
        self.workers: dict[int, _Worker] = {}
        self.exits: collections.deque[float] = collections.deque()
        self.restart_at: dict[int, float] = {}
        self.selector = selectors.DefaultSelector()
        self.stopping = False
        self.failed: str | None = None
        self.announced = False
        wake_r, self.wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.wake_r = wake_r
        self.selector.register(wake_r, selectors.EVENT_READ, None)

    # -- workers --------------------------------------------------------------------------

    def start(self, slot: int) -> None:
        """Start the worker of ``slot``; a start the system refuses (no memory for a
        process, say) counts as that worker's exit."""
        try:
            self.spawn(slot)
        except OSError as exc:
            _say(f"could not start a worker for slot {slot}: "
                 f"{errno.errorcode.get(exc.errno or 0, type(exc).__name__)}")
            self.record_exit(slot, "could not be started")

    def spawn(self, slot: int) -> None:
        ready_r, ready_w = os.pipe()
        os.set_blocking(ready_r, False)
        listen_fd = self.listener.fileno()
        command = [sys.executable, "-m", "governed_memory_service.workers",
                   "--ready-fd", str(ready_w), "--slot", str(slot)]
        inherited: tuple[int, ...] = (ready_w,)
        if self.options.listen_mode == "shared":
            command += ["--listen-fd", str(listen_fd)]
            inherited = (listen_fd, ready_w)
        try:
            # How many service workers share this host's cores: a provider that would
            # start processes of its own (the native ranking pool) leaves them to us.
            env = {**os.environ, WORKERS_ENV: str(self.options.workers)}
            process = subprocess.Popen(command, stdin=subprocess.PIPE, close_fds=True,
                                       pass_fds=inherited, process_group=0, env=env)
        except BaseException:
            os.close(ready_r)
            raise
        finally:
            os.close(ready_w)
        worker = _Worker(slot=slot, process=process, ready_fd=ready_r)
        self.workers[slot] = worker
        self.selector.register(ready_r, selectors.EVENT_READ, worker)
        assert process.stdin is not None
        # The port the parent bound (``--port 0`` asks the kernel for one), which a
        # reuseport worker binds beside it.
        options = attrs.evolve(self.options, port=self.port)
        with contextlib.suppress(BrokenPipeError):  # it died already: reaped as an exit
            process.stdin.write(options.to_json().encode() + b"\n")
            process.stdin.flush()  # stdin stays open: its end of file tells it we left

    def on_ready_pipe(self, worker: _Worker) -> None:
        try:
            data = os.read(worker.ready_fd, 64)
        except BlockingIOError:
            return
        if _READY in data and not worker.ready:
            worker.ready = True
            if self.announced:
                _say(f"worker {worker.pid} (slot {worker.slot}) ready")
            elif all(w.ready for w in self.workers.values()) \
                    and len(self.workers) == self.options.workers:
                self.announced = True
                _say(f"{self.options.workers} workers ready (pids "
                     f"{', '.join(str(w.pid) for w in self.workers.values())})")
        if not data:
            self.selector.unregister(worker.ready_fd)
            os.close(worker.ready_fd)
            worker.ready_fd = -1

    def reap(self) -> None:
        """Collect every worker that exited; restart it, or stop on a crash loop."""
        for slot, worker in list(self.workers.items()):
            code = worker.process.poll()
            if code is None:
                continue
            self._forget(worker)
            del self.workers[slot]
            if self.stopping:
                if code == -signal.SIGTERM and not worker.ready:
                    # Told to stop while still importing, before it could handle the
                    # signal: it never served a request, so nothing was cut short.
                    continue
                if code != 0:
                    _say(f"worker {worker.pid} stopped with {_describe_exit(code)}")
                    self.failed = self.failed or f"worker {worker.pid} {_describe_exit(code)}"
                continue
            state = "after it was ready" if worker.ready else "before it was ready"
            _say(f"worker {worker.pid} (slot {slot}) ended with {_describe_exit(code)} "
                 f"{state}")
            self.record_exit(slot, f"worker {worker.pid}, ended with "
                                   f"{_describe_exit(code)} {state}")
            if self.stopping:
                return

    def record_exit(self, slot: int, what: str) -> None:
        """Count an exit in the window; restart the slot after a back-off, or, past
        ``--max-restarts``, report a crash loop and stop every worker."""
        now = time.monotonic()
        self.exits.append(now)
        while self.exits and now - self.exits[0] > self.options.restart_window_s:
            self.exits.popleft()
        if len(self.exits) > self.options.max_restarts:
            self.failed = (f"crash loop: {len(self.exits)} worker exits within "
                           f"{self.options.restart_window_s} s (--max-restarts "
                           f"{self.options.max_restarts}); the last, {what}")
            _say(f"error: {self.failed}; stopping every worker")
            self.begin_stop()
            return
        delay = min(BACKOFF_FIRST_S * 2 ** (len(self.exits) - 1), BACKOFF_MAX_S)
        self.restart_at[slot] = now + delay
        _say(f"restarting slot {slot} in {delay:g} s")

    def _forget(self, worker: _Worker) -> None:
        if worker.ready_fd >= 0:
            self.selector.unregister(worker.ready_fd)
            os.close(worker.ready_fd)
            worker.ready_fd = -1
        if worker.process.stdin is not None:
            with contextlib.suppress(OSError):
                worker.process.stdin.close()

    def begin_stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        self.restart_at.clear()
        for worker in self.workers.values():
            with contextlib.suppress(ProcessLookupError):
                worker.process.send_signal(signal.SIGTERM)

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> int:
        for slot in range(self.options.workers):
            self.start(slot)
        deadline: float | None = None
        while self.workers or (self.restart_at and not self.stopping):
            now = time.monotonic()
            if self.stopping and deadline is None:
                deadline = now + self.options.shutdown_timeout + DRAIN_GRACE_S
            timeout = 1.0
            if self.restart_at:
                timeout = min(timeout, max(0.0, min(self.restart_at.values()) - now))
            if deadline is not None:
                if now >= deadline:
                    self.kill_remaining()
                    break
                timeout = min(timeout, deadline - now)
            for key, _ in self.selector.select(timeout):
                if key.data is None:
                    self.drain_wakeups()
                else:
                    self.on_ready_pipe(key.data)
            if _signals.pending_stop and not self.stopping:
                _say("stopping: draining every worker")
                self.begin_stop()
            self.reap()
            now = time.monotonic()
            for slot, when in list(self.restart_at.items()):
                if when <= now and not self.stopping:
                    del self.restart_at[slot]
                    self.start(slot)
        return 1 if self.failed else 0

    def drain_wakeups(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self.wake_r, 512):
                pass

    def kill_remaining(self) -> None:
        for worker in self.workers.values():
            _say(f"worker {worker.pid} did not stop within --shutdown-timeout + "
                 f"{DRAIN_GRACE_S:g} s; killing it")
            with contextlib.suppress(ProcessLookupError):
                worker.process.kill()
            worker.process.wait()
            self._forget(worker)
        self.failed = self.failed or "a worker had to be killed"
        self.workers.clear()

    def close(self) -> None:
        for worker in self.workers.values():
            self._forget(worker)
        self.selector.close()
        os.close(self.wake_r)
        os.close(self.wake_w)


class _Signals:
    pending_stop = False


_signals = _Signals()


def _stop_signal(signum: int, frame: object) -> None:
    _signals.pending_stop = True


def _child_signal(signum: int, frame: object) -> None:
    """Only wakes the loop (through the wake-up descriptor) to reap the child."""


def supervise(options: ServeOptions) -> int:
    """Prepare, bind, run ``options.workers`` workers until SIGTERM; the exit status.

    SIGTERM and SIGINT request the drain from the start: one that arrives while the
    stores are prepared ends the command (exit 0) before anything listens."""
    from governed_memory.cli.common import EXIT_CODES
    from governed_memory.errors import GovernedMemoryError

    if os.name != "posix":
        _say("error (configuration): --workers above 1 needs a POSIX system")
        return EXIT_CODES["configuration"]
    _signals.pending_stop = False
    handled = (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)
    previous = {sig: signal.getsignal(sig) for sig in handled}
    signal.signal(signal.SIGTERM, _stop_signal)
    signal.signal(signal.SIGINT, _stop_signal)
    try:
        try:
            with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
                runner.run(prepare(options))
        except GovernedMemoryError as exc:
            print(f"error ({exc.code}): {exc}", file=sys.stderr, flush=True)
            return EXIT_CODES.get(exc.code, 1)
        if _signals.pending_stop:
            return 0
        try:
            listener = _bind(options)
        except OSError as exc:
            print(f"error (configuration): cannot listen on {options.host}:{options.port}: "
                  f"{errno.errorcode.get(exc.errno or 0, exc.strerror)}", file=sys.stderr,
                  flush=True)
            return EXIT_CODES["configuration"]
        with listener:
            return _run(options, listener)
    finally:
        signal.set_wakeup_fd(-1)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(options: ServeOptions, listener: socket.socket) -> int:
    host = f"[{options.host}]" if ":" in options.host else options.host
    port = int(listener.getsockname()[1])
    _say(f"listening on http://{host}:{port} with {options.workers} workers "
         f"({options.listen_mode} socket; SIGTERM drains them)")
    supervisor = _Supervisor(options, listener)
    try:
        signal.set_wakeup_fd(supervisor.wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, _child_signal)
        status = supervisor.run()
    except BaseException:
        # Whatever went wrong here, no worker is left running without its parent.
        supervisor.begin_stop()
        raise
    finally:
        supervisor.close()
    if supervisor.failed:
        _say(f"error: {supervisor.failed}")
    else:
        _say("every worker stopped cleanly")
    return status


# -- the worker process -------------------------------------------------------------------


def worker_main(argv: list[str]) -> int:
    """One worker: the options from stdin, the socket from the parent, serve until
    SIGTERM or until the parent is gone; tell the parent on ``--ready-fd`` once
    accepting."""
    import argparse

    # Until uvicorn takes SIGTERM over, a stop is remembered here and honoured as soon
    # as the server runs (the default action would kill a worker mid-start).
    early: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: early.append(signum))
                for sig in (signal.SIGTERM, signal.SIGINT)}
    parser = argparse.ArgumentParser(prog="governed_memory_service.workers")
    parser.add_argument("--ready-fd", type=int, required=True)
    parser.add_argument("--listen-fd", type=int, default=None)
    parser.add_argument("--slot", type=int, default=0)
    args = parser.parse_args(argv)
    options = ServeOptions.from_json(sys.stdin.buffer.readline().decode())
    if args.listen_fd is not None:
        sock = socket.socket(fileno=args.listen_fd)
    else:
        sock = reuseport_socket(options.host, options.port)
    parent_fd = sys.stdin.fileno()
    os.set_blocking(parent_fd, False)
    ready_fd = args.ready_fd

    def started() -> None:
        with contextlib.suppress(OSError):
            os.write(ready_fd, _READY)

    from governed_memory.errors import GovernedMemoryError


    # The early handler stays: uvicorn installs its own while it serves, and on the way
    # out puts this one back and re-raises the signal it caught, which must not kill
    # the process after a clean stop.
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            ok = runner.run(serve_app(options, sockets=[sock], on_started=started,
                                      parent_fd=parent_fd, stopped_early=lambda: bool(early)))
    except GovernedMemoryError as exc:
        print(f"worker {os.getpid()}: error ({exc.code}): {exc}", file=sys.stderr,
              flush=True)
        return STARTUP_FAILURE
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        with contextlib.suppress(OSError):
            os.close(ready_fd)
    return 0 if ok else STARTUP_FAILURE


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
