"""The HTTP service: worker processes against one (issue 29), what authenticating a
request costs on each key store (issue 29), and the service against the same operations
in process (issue 16); add and search, on SQLite and PostgreSQL.

Full run (the figures in ``bench/results/service.md``; about 30 min on 2 cores; needs the
``service`` extra, and PostgreSQL for the ``postgres`` rows)::

    .venv/bin/python bench/service.py

``--part workers``, ``--part keys`` or ``--part in-process`` measures one part and keeps
the other parts' figures already in ``<out>.json``. Quick proof that everything runs::

    .venv/bin/python bench/service.py --quick --out /tmp/service

**Worker processes** (``--part workers``). The server as ``serve --workers 1`` and
``--workers 2``, at ``--worker-clients`` (1, 8, 32, 128) concurrent clients, over the
same seeded store, profile and keys as below. ``--rounds`` paired rounds: in each, one
worker, two workers in ``serve``'s default listen mode, and two in the other mode (at
``--listen-clients`` only) serve in turn, each a fresh server, in the opposite order
every other round (A B C, C B A), so the shared machine's drift falls on all of them
alike; a figure is the median over rounds, the 2-over-1 ratio the median of the
per-round ratios. Around every section: the 1-minute load average, the CPU of the parent
and of each worker (``/proc``: the busiest worker's share of the workers' CPU says how
evenly the port spread the work), of the clients, and the machine's busy share. Before
each 2-worker configuration's sections, a burst of 32 keep-alive connections opened at
once is counted per worker from ``/proc`` (5 trials): how the listen mode spreads
connections. Targets (reported, never asserted): 2 workers ≥ 1.6 x one worker at 32
clients, on SQLite and PostgreSQL; at no client level below one client's; p99 at 32
clients ≤ 3 x p50.

**The key store** (``--part keys``). ``verify`` of a valid key, back to back in one
process, ``--key-calls`` times: the SQLite store, the PostgreSQL store with its cache
(time-to-live 0.5 s) and without (``cache_ttl_s=0``); microseconds and point reads per
call.

**HTTP against in process** (``--part in-process``). What is measured, per backend:

- **The store.** A fresh store (a SQLite file in a temporary directory, or a PostgreSQL
  schema dropped afterwards) seeded with ``--records`` memories in one scope (tenant
  ``bench``, project ``p``, user ``u1``; 12-word sentences of the Zipf corpus in
  ``bench/corpus.py``) through ``bench/seeding.py``, before anything opens it.
- **The profile.** The rules of the built-in ``local`` profile (policies
  ``permissions``, ``write-rules``, ``secret-guard``; no ``[quotas]``, so nothing
  rate-limits or refuses the bench's writes; no search cache, so every search reaches
  storage) with the provider config pointing at the bench store, written as a TOML file
  into the run's temporary directory. Both sides build their manager from that file with
  ``governed_memory_service.serve.build_manager``, i.e. exactly as ``governed-memory
  serve`` does, which includes the CLI's hash-chained audit trail under the store's
  directory (``fsync = "always"``): the ratio isolates what HTTP costs, not a difference
  of composition.
- **In process.** ``GovernedMemoryManager`` in the bench process, called by N asyncio
  tasks, as the principal the API key proves (``ApiKey.principal()``): every section
  before the server starts, and the 1-client sections again after it stopped; the
  1-client reference pools both passes, so drift during the HTTP sections shows.
- **Over HTTP.** ``python -m governed_memory_service serve --profile FILE --keys FILE
  --host 127.0.0.1 --port 0`` (the ``governed-memory serve`` command: uvicorn with the
  extra's httptools and uvloop, access log off as ``serve`` defaults, its log written to
  a file) in its own process; the bound port is read from uvicorn's log; loopback
  only. N concurrent clients, each its own
  ``AsyncMemoryClient`` (one httpx connection, keep-alive) and asyncio task, spread over
  ``--client-procs`` client processes (default 2), so neither the server's nor one
  client's event loop carries the other's work. The HTTP latency is what the
  application sees: request, server, response and the client's decoding into
  ``MemoryRecord`` / ``SearchResult``. ``GET /healthz`` from one client (no
  credentials, no storage) is the floor: what uvicorn, Starlette and httpx cost a
  request that does nothing. SQLite ``search`` at the largest N is run a second time
  from one client process, to show whether a single client process could have
  generated that load.

Each section (backend, side, operation, N) is bounded: every task first runs
``--warmup`` untimed operations, then all tasks start together (a shared wall-clock
instant) and issue operations back to back for ``--seconds``; throughput is the
successful operations divided by the time from the start to the last completion.
Searches are top 10 with a 2-word query (drawn from the 300 most common words, as
``bench/scale.py`` draws them) in the seeded scope; each add goes to its task's own scope
(a user id per task and section), so writes never contend on one scope. Any failed
operation (a non-2xx answer, raised by the client as its typed error, or a transport
error) is counted by kind and kept out of the latencies.

Around every section the bench records the 1-minute load average, the CPU time of the
server process (``/proc/<pid>/stat``), of the client processes (their
``time.process_time``) and the whole machine's busy share (``/proc/stat``), so a
section whose clients, server or machine were saturated can be told apart. Targets
(reported, never asserted): HTTP add and search p50 at 1 client ≤ 1.5 x the in-process
p50 + 1 ms; 64 clients on SQLite sustain ≥ 8 x one client's search throughput with no
error. Writes ``<out>.json`` and ``<out>.md`` (default ``bench/results/service``).

PostgreSQL comes from ``GOVERNED_MEMORY_POSTGRES_DSN`` (default
``postgresql://postgres@127.0.0.1:5432/test``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# A bench file named after a package (bench/mem0.py, bench/cache.py) must not shadow it.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.append(str(HERE))

from corpus import Corpus  # noqa: E402  (after the path fix above, on purpose)
from governed_memory import Permission, Scope  # noqa: E402
from seeding import POSTGRES_DSN, seed_texts, storage  # noqa: E402

RESULTS = HERE / "results"
ROOT = HERE.parent
SYLLABLES = tuple("kalominuperasitovuwexayozabecodifugahijulamenopuqiresutivowu"[i:i + 2]
                  for i in range(0, 60, 2))
CORPUS = Corpus(SYLLABLES, seed=11, query_pool=300)
TENANT = "bench"
SEARCH_SCOPE = Scope(TENANT, project_id="p", user_id="u1")
PERMISSIONS = (Permission.READ, Permission.WRITE, Permission.DELETE)
OPERATIONS = ("search", "add")
TOKEN_ENV = "GM_BENCH_SERVICE_TOKEN"
PROTOCOL = "@@bench "
GLOBAL_WARMUP = 20
SEARCH_LIMIT = 10
P50_FACTOR, P50_SLACK_MS, SCALE_TARGET = 1.5, 1.0, 8.0
WORKER_RATIO_TARGET, TARGET_CLIENTS, TAIL_TARGET = 1.6, 32, 3.0
SPREAD_CONNECTIONS, SPREAD_TRIALS = 32, 5
UNEVEN_SHARE = 0.6

PROFILE = """\
# The built-in `local` profile's rules over the bench's store (bench/service.py).
spec_version = 1
id = "service-bench"
version = "1.0.0"
description = "bench/service.py: the local profile's rules (no quotas, no cache)"
timeout_s = 30.0

[provider]
name = "native"

[provider.config]
{provider}

[privacy]
secret_guard = "reject"

[policies]
enabled = ["permissions", "write-rules", "secret-guard"]
"""


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def ms(values_ns: list[int], q: float) -> float | None:
    return round(quantile([float(v) for v in values_ns], q) / 1e6, 3) if values_ns else None


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all cores, from /proc/stat (zeros where it is absent)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def process_cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (0 where /proc is absent)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = raw.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def parents() -> dict[int, int]:
    """Every live process's parent, from /proc (empty where it is absent)."""
    found = {}
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return {}
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            found[int(entry.name)] = int(fields[1])
    return found


def children(pid: int, family: dict[int, int] | None = None) -> list[int]:
    """The live child processes of ``pid``."""
    family = parents() if family is None else family
    return sorted(child for child, parent in family.items() if parent == pid)


def descendants(pid: int, family: dict[int, int]) -> list[int]:
    """``pid`` and every process below it (a worker's ranking processes, say)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children(current, family)
    return found


def commit() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,
                              text=True, check=False)
        return done.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "framework",
                "providers", "policies", "profiles", "service", "bench/service.py")
    return head + ("+dirty" if dirty else "")


# -- driving load: the same loop in process and in every client process ------------------

Call = Callable[[], Awaitable[Any]]


def task_calls(target: Any, op: str, scopes: list[Scope], seed: int) -> list[Call]:
    """One call per task: a search of the seeded scope, or an add to the task's scope;
    each draws its own text from its own random stream."""
    calls: list[Call] = []
    for index, scope in enumerate(scopes):
        rng = random.Random(seed * 1000 + index)
        if op == "add":
            def call(index: int = index, scope: Scope = scope,
                     rng: random.Random = rng) -> Awaitable[Any]:
                return target(index).add(scope, CORPUS.sentence(rng))
        else:
            def call(index: int = index, rng: random.Random = rng) -> Awaitable[Any]:
                return target(index).search(SEARCH_SCOPE, CORPUS.query_text(rng),
                                            limit=SEARCH_LIMIT)
        calls.append(call)
    return calls


def healthz_call(http: Any) -> Call:
    """``GET /healthz`` (no credentials, no storage): what uvicorn, Starlette and httpx
    cost for a request that does nothing."""
    async def call() -> None:
        (await http.get("/healthz")).raise_for_status()
    return call


def error_kind(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    return f"{type(exc).__name__}({code})" if code else type(exc).__name__


async def warm(calls: list[Call], count: int) -> dict[str, int]:
    errors: dict[str, int] = {}

    async def one(call: Call) -> None:
        for _ in range(count):
            try:
                await call()
            except Exception as exc:  # counted, never fatal: the section reports it
                errors[error_kind(exc)] = errors.get(error_kind(exc), 0) + 1

    await asyncio.gather(*(one(call) for call in calls))
    return errors


async def drive(calls: list[Call], start: float, end: float) -> dict[str, Any]:
    """Every task waits for the shared ``start`` (wall clock), then calls back to back
    until ``end``; latencies of the successful calls, errors by kind."""
    latencies: list[int] = []
    errors: dict[str, int] = {}
    finished: list[float] = []

    async def task(call: Call) -> None:
        delay = start - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        while time.time() < end:
            began = time.perf_counter_ns()
            try:
                await call()
            except Exception as exc:
                errors[error_kind(exc)] = errors.get(error_kind(exc), 0) + 1
            else:
                latencies.append(time.perf_counter_ns() - began)
        finished.append(time.time())

    cpu = time.process_time()
    await asyncio.gather(*(task(call) for call in calls))
    return {"latencies_ns": latencies, "errors": errors, "last_done": max(finished),
            "cpu_s": time.process_time() - cpu}


# -- the client process ------------------------------------------------------------------


def client_worker(base_url: str) -> None:
    """A client process: JSON commands on stdin (prepare, go, quit), answers on stdout
    after ``PROTOCOL``. The credential comes from the environment, never argv."""
    import httpx
    from governed_memory_service.client import AsyncMemoryClient

    token = os.environ[TOKEN_ENV]
    loop = asyncio.new_event_loop()
    clients: list[Any] = []
    calls: list[Call] = []

    def answer(value: dict[str, Any]) -> None:
        sys.stdout.write(PROTOCOL + json.dumps(value) + "\n")
        sys.stdout.flush()

    async def close() -> None:
        await asyncio.gather(*(client.aclose() for client in clients))
        clients.clear()

    for line in sys.stdin:
        command = json.loads(line)
        if command["do"] == "prepare":
            loop.run_until_complete(close())
            if command["op"] == "healthz":
                clients.extend(httpx.AsyncClient(base_url=base_url) for _ in command["users"])
                calls = [healthz_call(client) for client in clients]
            else:
                clients.extend(AsyncMemoryClient(base_url, token) for _ in command["users"])
                scopes = [Scope(TENANT, project_id="p", user_id=user)
                          for user in command["users"]]
                calls = task_calls(clients.__getitem__, command["op"], scopes,
                                   command["seed"])
            warm_errors = loop.run_until_complete(warm(calls, command["warmup"]))
            answer({"ready": True, "warmup_errors": warm_errors})
        elif command["do"] == "go":
            result = loop.run_until_complete(drive(calls, command["start"], command["end"]))
            loop.run_until_complete(close())
            answer(result)
        else:
            break
    loop.run_until_complete(close())
    loop.close()


class ClientPool:
    """``count`` client processes against ``base_url``."""

    def __init__(self, base_url: str, token: str, count: int) -> None:
        env = {**os.environ, TOKEN_ENV: token}
        self.procs = [subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--client-worker", base_url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
            for _ in range(count)]

    def _send(self, proc: subprocess.Popen[str], command: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(command) + "\n")
        proc.stdin.flush()

    def _receive(self, proc: subprocess.Popen[str]) -> dict[str, Any]:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(PROTOCOL):
                return json.loads(line[len(PROTOCOL):])
        raise RuntimeError(f"client process {proc.pid} ended (rc {proc.wait()})")

    def prepare(self, procs: int, op: str, users: list[str], seed: int,
                warmup: int) -> dict[str, int]:
        errors: dict[str, int] = {}
        shares = [users[i::procs] for i in range(procs)]
        for index, share in enumerate(shares):
            self._send(self.procs[index], {"do": "prepare", "op": op, "users": share,
                                           "seed": seed * 10 + index, "warmup": warmup})
        for index in range(procs):
            for kind, n in self._receive(self.procs[index])["warmup_errors"].items():
                errors[kind] = errors.get(kind, 0) + n
        return errors

    def go(self, procs: int, start: float, end: float) -> list[dict[str, Any]]:
        for index in range(procs):
            self._send(self.procs[index], {"do": "go", "start": start, "end": end})
        return [self._receive(self.procs[index]) for index in range(procs)]

    def close(self) -> None:
        for proc in self.procs:
            try:
                self._send(proc, {"do": "quit"})
                assert proc.stdin is not None
                proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# -- the server process ------------------------------------------------------------------


class Server:
    """``python -m governed_memory_service serve`` on 127.0.0.1, port chosen by the
    kernel and read back from the log (uvicorn's line with one worker, the supervising
    parent's with ``--workers`` above 1)."""

    def __init__(self, profile: Path, keys: Path, db: Path | None, home: Path,
                 log: Path, *, workers: int = 1, listen_mode: str = "shared") -> None:
        command = [sys.executable, "-m", "governed_memory_service", "serve",
                   "--profile", str(profile), "--keys", str(keys),
                   "--host", "127.0.0.1", "--port", "0", "--shutdown-timeout", "10"]
        if db is not None:
            command += ["--db", str(db)]
        if workers > 1:
            command += ["--workers", str(workers), "--listen-mode", listen_mode]
        self.workers = workers
        self.log_path = log
        self.log = log.open("w")
        self.proc = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "GOVERNED_MEMORY_HOME": str(home)})
        self.base_url = self._wait_for_port(timeout=120.0)

    def _wait_for_port(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        pattern = re.compile(
            r"(?:Uvicorn running on|listening on) (http://127\.0\.0\.1:\d+)")
        while time.monotonic() < deadline:
            found = pattern.search(self.log_path.read_text())
            if found:
                return found.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        tail = self.log_path.read_text()[-2000:]
        self.stop()
        raise RuntimeError(f"the server did not start:\n{tail}")

    async def ready(self) -> None:
        import httpx

        async with httpx.AsyncClient(base_url=self.base_url) as http:
            for _ in range(600):
                try:
                    if (await http.get("/readyz")).status_code == 200 and (
                            self.workers == 1 or "workers ready" in self.log_path.read_text()):
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError("the server never became ready")

    def worker_pids(self) -> list[int]:
        """The worker processes (none with one worker: the server is the process)."""
        return children(self.proc.pid) if self.workers > 1 else []

    def cpu_by_process(self) -> dict[int, float]:
        """CPU seconds of the server, by pid: the parent, and each worker with every
        process it started (the native provider's ranking processes) counted as its own.
        With one worker, the one server process and what it started."""
        family = parents()
        tops = children(self.proc.pid, family) if self.workers > 1 else []
        totals = {self.proc.pid: process_cpu_s(self.proc.pid)}
        below = [] if self.workers > 1 else descendants(self.proc.pid, family)[1:]
        totals[self.proc.pid] += sum(process_cpu_s(pid) for pid in below)
        for top in tops:
            totals[top] = sum(process_cpu_s(pid) for pid in descendants(top, family))
        return totals

    def cpu_s(self) -> float:
        return sum(self.cpu_by_process().values())

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


# -- one backend -------------------------------------------------------------------------


class InProcess:
    """The manager's add and search as the key's principal, shaped like the client."""

    def __init__(self, manager: Any, principal: Any) -> None:
        self.manager, self.principal = manager, principal

    def add(self, scope: Scope, content: str) -> Awaitable[Any]:
        return self.manager.add(self.principal, scope, content)

    def search(self, scope: Scope, query: str, *, limit: int) -> Awaitable[Any]:
        return self.manager.search(self.principal, scope, query, limit=limit)


def profile_text(config: dict[str, Any], trail_fsync: str = "always") -> str:
    """The bench's profile over ``config``. With ``trail_fsync`` other than ``always``
    the profile names the trail itself (``[audit] path = "audit"``, where the CLI would
    put it) with that flush policy: a diagnosis of what the trail's fsync costs, never
    the figures of record."""
    lines = [f"{key} = {json.dumps(value)}" for key, value in config.items()]
    text = PROFILE.format(provider="\n".join(lines))
    if trail_fsync != "always":
        text += f'\n[audit]\npath = "audit"\nfsync = "{trail_fsync}"\n'
    return text


async def seed_store(config: dict[str, Any], records: int) -> float:
    from governed_memory.clock import SystemClock
    from governed_memory_native import build_native_provider

    rng = random.Random(7)
    texts = [CORPUS.sentence(rng) for _ in range(records)]
    began = time.perf_counter()
    provider = build_native_provider(config, SystemClock())
    await provider.start()
    try:
        await seed_texts(provider.backend, SEARCH_SCOPE, texts)
    finally:
        await provider.close()
    return round(time.perf_counter() - began, 2)


def summarise(section: dict[str, Any], runs: list[dict[str, Any]], start: float,
              seconds_cpu_server: float | None, busy: tuple[int, int]) -> dict[str, Any]:
    latencies = [v for run in runs for v in run["latencies_ns"]]
    errors: dict[str, int] = {}
    for run in runs:
        for kind, n in run["errors"].items():
            errors[kind] = errors.get(kind, 0) + n
    wall = max(run["last_done"] for run in runs) - start
    section.update(
        _latencies_ns=latencies, ops=len(latencies), errors=errors,
        error_count=sum(errors.values()),
        wall_s=round(wall, 3),
        throughput=round(len(latencies) / wall, 1) if wall > 0 else None,
        p50_ms=ms(latencies, 0.5), p99_ms=ms(latencies, 0.99),
        mean_ms=(round(sum(latencies) / len(latencies) / 1e6, 3) if latencies else None),
        client_cores=round(sum(run["cpu_s"] for run in runs) / wall, 2),
        server_cores=(None if seconds_cpu_server is None
                      else round(seconds_cpu_server / wall, 2)),
        client_cpu_ms_per_op=(round(sum(run["cpu_s"] for run in runs) * 1000 / len(latencies),
                                    3) if latencies else None),
        server_cpu_ms_per_op=(round(seconds_cpu_server * 1000 / len(latencies), 3)
                              if latencies and seconds_cpu_server is not None else None),
        machine_busy=(round(busy[0] / busy[1], 2) if busy[1] else None),
    )
    return section


async def run_in_process(manager: Any, principal: Any, op: str, clients: int, tag: str,
                         args: argparse.Namespace, seed: int, when: str) -> dict[str, Any]:
    target = InProcess(manager, principal)
    scopes = [Scope(TENANT, project_id="p", user_id=f"{tag}-{i}") for i in range(clients)]
    calls = task_calls(lambda _index: target, op, scopes, seed)
    section: dict[str, Any] = {"side": "in-process", "op": op, "clients": clients,
                               "procs": 1, "pass": when, "load_before": load_average()}
    section["warmup_errors"] = await warm(calls, args.warmup)
    busy0 = machine_ticks()
    start = time.time() + 0.05
    run = await drive(calls, start, start + args.seconds)
    busy1 = machine_ticks()
    section["load_after"] = load_average()
    return summarise(section, [run], start, None,
                     (busy1[0] - busy0[0], busy1[1] - busy0[1]))


def run_http(pool: ClientPool, server: Server, op: str, clients: int, procs: int, tag: str,
             args: argparse.Namespace, seed: int) -> dict[str, Any]:
    procs = min(procs, clients)
    users = [f"{tag}-{i}" for i in range(clients)]
    section: dict[str, Any] = {"side": "http", "op": op, "clients": clients, "procs": procs,
                               "load_before": load_average()}
    section["warmup_errors"] = pool.prepare(procs, op, users, seed, args.warmup)
    cpu0, busy0 = server.cpu_by_process(), machine_ticks()
    start = time.time() + 0.2
    runs = pool.go(procs, start, start + args.seconds)
    cpu1, busy1 = server.cpu_by_process(), machine_ticks()
    section["load_after"] = load_average()
    used = {pid: cpu1[pid] - cpu0.get(pid, 0.0) for pid in cpu1}
    workers = [used[pid] for pid in server.worker_pids() if pid in used]
    if len(workers) > 1 and sum(workers) > 0:
        # How evenly the kernel spread the work: the busiest worker's share of the
        # workers' CPU (0.5 is an even split of two).
        section["busiest_worker_share"] = round(max(workers) / sum(workers), 2)
    return summarise(section, runs, start, sum(used.values()),
                     (busy1[0] - busy0[0], busy1[1] - busy0[1]))


def log_section(backend: str, section: dict[str, Any]) -> None:
    print(f"{backend} {section['side']} {section.get('pass', '')} {section['op']} "
          f"x{section['clients']}"
          f" ({section['procs']} proc): {section['throughput']} ops/s, p50 "
          f"{section['p50_ms']} ms, p99 {section['p99_ms']} ms, errors "
          f"{section['error_count']}, load {section['load_before']} -> "
          f"{section['load_after']}", file=sys.stderr, flush=True)


async def bench_backend(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    from governed_memory_service.api_keys import ApiKeyStore
    from governed_memory_service.client import AsyncMemoryClient
    from governed_memory_service.serve import build_manager

    result: dict[str, Any] = {"backend": backend, "sections": []}
    with ExitStack() as stack:
        config = stack.enter_context(storage(backend))
        home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gm-svc-")))
        db = Path(config["path"]) if "path" in config else None
        profile = home / "service-bench.toml"
        profile.write_text(profile_text(config))
        result["seed_seconds"] = await seed_store(config, args.records)
        keys_path = home / "keys.db"
        async with ApiKeyStore(keys_path) as keys:
            issued = await keys.create(tenant_id=TENANT, kind="service",
                                       principal_id="svc:bench", permissions=PERMISSIONS,
                                       label="bench/service.py")
        principal = issued.key.principal()
        os.environ["GOVERNED_MEMORY_HOME"] = str(home)  # where the CLI's trail goes

        async def in_process(when: str, clients_list: list[int]) -> None:
            print(f"{backend}: in process ({when})", file=sys.stderr, flush=True)
            manager = build_manager(str(profile), db)
            async with manager:
                local = InProcess(manager, principal)
                warm_calls = task_calls(lambda _index: local, "search", [SEARCH_SCOPE], 1)
                warm_calls += task_calls(lambda _index: local, "add", [
                    Scope(TENANT, project_id="p", user_id=f"warm-in-{when}")], 1)
                await warm(warm_calls, GLOBAL_WARMUP)
                for op in OPERATIONS:
                    for clients in clients_list:
                        section = await run_in_process(manager, principal, op, clients,
                                                       f"in-{when}-{op}-{clients}", args,
                                                       seed=len(result["sections"]) + 1,
                                                       when=when)
                        log_section(backend, section)
                        result["sections"].append(section)

        await in_process("before", args.clients)

        print(f"{backend}: over HTTP", file=sys.stderr, flush=True)
        server = Server(profile, keys_path, db, home, home / "server.log")
        try:
            await server.ready()
            result["server"] = {"base_url": server.base_url}
            async with AsyncMemoryClient(server.base_url, issued.token) as client:
                await warm(task_calls(lambda _index: client, "search", [SEARCH_SCOPE], 2),
                           GLOBAL_WARMUP)
                await warm(task_calls(lambda _index: client, "add",
                                      [Scope(TENANT, project_id="p", user_id="warm-http")],
                                      2), GLOBAL_WARMUP)
            pool = ClientPool(server.base_url, issued.token, args.client_procs)
            try:
                plan = [("healthz", 1, 1)] + [(op, clients, args.client_procs)
                                              for op in OPERATIONS for clients in args.clients]
                if backend == "sqlite" and args.client_procs > 1 and max(args.clients) > 1:
                    plan.append(("search", max(args.clients), 1))  # one client process
                for op, clients, procs in plan:
                    section = run_http(pool, server, op, clients, procs,
                                       f"http-{op}-{clients}-{procs}", args,
                                       seed=len(result["sections"]) + 1)
                    log_section(backend, section)
                    result["sections"].append(section)
            finally:
                pool.close()
        finally:
            rc = server.stop()
            result["server"] = {**result.get("server", {}), "exit_code": rc,
                                "log_lines": sum(1 for _ in server.log_path.open())}
        # The 1-client in-process figures again, so drift over the HTTP sections shows
        # and the reference pools both passes.
        await in_process("after", [1])
        os.environ.pop("GOVERNED_MEMORY_HOME", None)
    return result


# -- worker processes (issue 29) ---------------------------------------------------------


def worker_configs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """What one round serves: 1 worker, and 2 workers in ``serve``'s default listen mode
    at every client level; and 2 workers in the other mode at the levels
    ``--listen-clients`` names, to compare the two ways of sharing a port."""
    from governed_memory_service.serve import DEFAULT_LISTEN_MODE, LISTEN_MODES

    other = next(mode for mode in LISTEN_MODES if mode != DEFAULT_LISTEN_MODE)
    configs = [{"workers": 1, "listen_mode": "single", "clients": args.worker_clients},
               {"workers": 2, "listen_mode": DEFAULT_LISTEN_MODE,
                "clients": args.worker_clients}]
    if args.listen_clients:
        configs.append({"workers": 2, "listen_mode": other, "clients": args.listen_clients})
    return configs


async def bench_workers(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    """Paired, interleaved rounds: in each round every configuration serves in turn, in
    the opposite order from the round before (A B C, then C B A), so drift of the shared
    machine falls on all of them alike; each section is one (operation, clients) of one
    configuration."""
    from governed_memory_service.api_keys import ApiKeyStore
    from governed_memory_service.client import AsyncMemoryClient

    result: dict[str, Any] = {"backend": backend, "sections": []}
    with ExitStack() as stack:
        config = stack.enter_context(storage(backend))
        home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gm-wrk-")))
        db = Path(config["path"]) if "path" in config else None
        profile = home / "service-bench.toml"
        profile.write_text(profile_text(config, args.trail_fsync))
        result["seed_seconds"] = await seed_store(config, args.records)
        keys_path = home / "keys.db"
        async with ApiKeyStore(keys_path) as keys:
            issued = await keys.create(tenant_id=TENANT, kind="service",
                                       principal_id="svc:bench", permissions=PERMISSIONS,
                                       label="bench/service.py")
        configs = worker_configs(args)
        for round_index in range(args.rounds):
            order = configs if round_index % 2 == 0 else configs[::-1]
            for plan in order:
                name = f"{plan['workers']}w-{plan['listen_mode']}"
                print(f"{backend}: round {round_index + 1}, {name}", file=sys.stderr,
                      flush=True)
                server = Server(profile, keys_path, db, home,
                                home / f"server-{round_index}-{name}.log",
                                workers=plan["workers"],
                                listen_mode=plan["listen_mode"].replace("single", "shared"))
                try:
                    await server.ready()
                    if plan["workers"] > 1:
                        result.setdefault("spread", []).append({
                            "round": round_index + 1, "listen_mode": plan["listen_mode"],
                            "connections": SPREAD_CONNECTIONS,
                            "by_worker": await connection_spread(
                                server, SPREAD_CONNECTIONS, SPREAD_TRIALS)})
                    async with AsyncMemoryClient(server.base_url, issued.token) as client:
                        await warm(task_calls(lambda _index: client, "search",
                                              [SEARCH_SCOPE], 2), GLOBAL_WARMUP)
                    pool = ClientPool(server.base_url, issued.token, args.client_procs)
                    try:
                        for op in OPERATIONS:
                            for clients in plan["clients"]:
                                tag = f"w-{round_index}-{name}-{op}-{clients}"
                                section = run_http(pool, server, op, clients,
                                                   args.client_procs, tag, args,
                                                   seed=len(result["sections"]) + 1)
                                section.update(round=round_index + 1,
                                               workers=plan["workers"],
                                               listen_mode=plan["listen_mode"])
                                log_section(f"{backend} {name}", section)
                                result["sections"].append(section)
                    finally:
                        pool.close()
                finally:
                    server.stop()
    return result


def established_inodes(port: int) -> set[str]:
    """Socket inodes of the established TCP connections whose local port is ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                found.add(fields[9])
    return found


def connections_by_worker(server: Server) -> list[int]:
    """How many of the server's established connections each worker holds, largest
    first (from /proc: the workers' socket descriptors against the TCP table)."""
    port = int(server.base_url.rsplit(":", 1)[1])
    inodes = established_inodes(port)
    counts = []
    for pid in server.worker_pids():
        held = 0
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    link = os.readlink(fd)
                    if link.startswith("socket:[") and link[8:-1] in inodes:
                        held += 1
        except OSError:
            continue
        counts.append(held)
    return sorted(counts, reverse=True)


async def connection_spread(server: Server, connections: int, trials: int) -> list[list[int]]:
    """Open ``connections`` keep-alive connections at once (a burst, as clients that
    start together make), ``trials`` times: how many each worker took."""
    import httpx

    spread = []
    for _ in range(trials):
        clients = [httpx.AsyncClient(base_url=server.base_url) for _ in range(connections)]
        try:
            await asyncio.gather(*(client.get("/healthz") for client in clients))
            spread.append(connections_by_worker(server))
        finally:
            await asyncio.gather(*(client.aclose() for client in clients))
        await asyncio.sleep(0.3)
    return spread


def median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def by_round(sections: list[dict[str, Any]], op: str, clients: int, workers: int,
             mode: str) -> dict[int, dict[str, Any]]:
    """One configuration's sections at (op, clients), by round."""
    return {s["round"]: s for s in sections
            if (s["op"], s["clients"], s["workers"], s["listen_mode"])
            == (op, clients, workers, mode)}


def worker_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (backend, operation, clients): each configuration's throughput (the
    median over rounds), the paired ratio (2 workers in the default listen mode over 1,
    per round, then the median), and the 2-worker latencies; the other listen mode's
    throughput beside it."""
    from governed_memory_service.serve import DEFAULT_LISTEN_MODE, LISTEN_MODES

    default = DEFAULT_LISTEN_MODE
    other = next(mode for mode in LISTEN_MODES if mode != default)
    rows = []
    for backend in results:
        sections = backend["sections"]
        levels = sorted({(s["op"], s["clients"]) for s in sections},
                        key=lambda k: (OPERATIONS.index(k[0]), k[1]))
        for op, clients in levels:
            one, two, port = (by_round(sections, op, clients, workers, mode)
                              for workers, mode in ((1, "single"), (2, default), (2, other)))
            paired = [two[r]["throughput"] / one[r]["throughput"] for r in one
                      if r in two and one[r]["throughput"] and two[r]["throughput"]]
            two_p50 = [two[r]["p50_ms"] for r in two if two[r]["p50_ms"]]
            two_p99 = [two[r]["p99_ms"] for r in two if two[r]["p99_ms"]]
            rows.append({
                "backend": backend["backend"], "op": op, "clients": clients,
                "one_worker": median([s["throughput"] for s in one.values()
                                      if s["throughput"]]),
                "two_workers": median([s["throughput"] for s in two.values()
                                       if s["throughput"]]),
                "ratio_by_round": [round(v, 2) for v in paired],
                "ratio": median(paired),
                "two_p50_ms": median(two_p50), "two_p99_ms": median(two_p99),
                "one_p50_ms": median([s["p50_ms"] for s in one.values() if s["p50_ms"]]),
                "one_p99_ms": median([s["p99_ms"] for s in one.values() if s["p99_ms"]]),
                "mode": default, "other_mode": other,
                "busiest_share": median([s["busiest_worker_share"] for s in two.values()
                                         if "busiest_worker_share" in s]),
                "other": median([s["throughput"] for s in port.values()
                                 if s["throughput"]]),
                "busiest_share_other": median([s["busiest_worker_share"]
                                               for s in port.values()
                                               if "busiest_worker_share" in s]),
                "errors": sum(s["error_count"] for group in (one, two, port)
                              for s in group.values()),
                "server_cores_one": median([s["server_cores"] for s in one.values()
                                            if s["server_cores"] is not None]),
                "server_cores_two": median([s["server_cores"] for s in two.values()
                                            if s["server_cores"] is not None]),
                "client_cores_two": median([s["client_cores"] for s in two.values()]),
                "machine_busy_two": median([s["machine_busy"] for s in two.values()
                                            if s["machine_busy"] is not None]),
            })
    return rows


def worker_targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's targets, each with what was measured and whether it was met."""
    found = []
    by_key = {(r["backend"], r["op"], r["clients"]): r for r in rows}
    for (backend, op, clients), row in sorted(by_key.items()):
        if clients == TARGET_CLIENTS and row["ratio"] is not None:
            found.append({
                "target": f"2 workers ≥ {WORKER_RATIO_TARGET}x one worker at "
                          f"{TARGET_CLIENTS} clients",
                "backend": backend, "op": op,
                "measured": f"{row['ratio']}x (rounds: "
                            f"{', '.join(str(v) for v in row['ratio_by_round'])})",
                "met": row["ratio"] >= WORKER_RATIO_TARGET})
            if row["two_p50_ms"] and row["two_p99_ms"]:
                tail = round(row["two_p99_ms"] / row["two_p50_ms"], 2)
                found.append({
                    "target": f"p99 ≤ {TAIL_TARGET:g} x p50 at {TARGET_CLIENTS} clients "
                              "(2 workers)",
                    "backend": backend, "op": op,
                    "measured": f"p50 {row['two_p50_ms']} ms, p99 {row['two_p99_ms']} ms "
                                f"({tail}x)", "met": tail <= TAIL_TARGET})
        single = by_key.get((backend, op, 1))
        if clients > 1 and single and single["two_workers"] and row["two_workers"]:
            found.append({
                "target": "throughput at no client level below one client's (2 workers)",
                "backend": backend, "op": f"{op} x{clients}",
                "measured": f"{row['two_workers']} vs {single['two_workers']} ops/s at 1",
                "met": row["two_workers"] >= single["two_workers"]})
    return found


async def bench_keys(args: argparse.Namespace) -> dict[str, Any]:
    """What authenticating one request costs: ``verify`` of a valid key, back to back,
    on the SQLite store (a point read each), on the PostgreSQL store with its cache (the
    default 0.5 s time-to-live: reads only when an entry ages out) and without it
    (``cache_ttl_s=0``: a point read each); microseconds per call and reads per call."""
    from governed_memory_service.api_keys import ApiKeyStore
    from governed_memory_service.postgres_keys import PostgresApiKeyStore

    calls = 300 if args.quick else args.key_calls
    rows = []
    with tempfile.TemporaryDirectory(prefix="gm-keys-") as tmp:
        stores: list[tuple[str, Any]] = [("sqlite", ApiKeyStore(Path(tmp) / "keys.db"))]
        schema = f"gm_bench_keys_{os.getpid()}"
        if "postgres" in args.backends:
            stores += [("postgres, cached (ttl 0.5 s)",
                        PostgresApiKeyStore(POSTGRES_DSN, schema=schema)),
                       ("postgres, no cache (ttl 0)",
                        PostgresApiKeyStore(POSTGRES_DSN, schema=schema, cache_ttl_s=0))]
        try:
            for name, store in stores:
                await store.open()
                issued = await store.create(tenant_id=TENANT, kind="service",
                                            principal_id="svc:keys", permissions=PERMISSIONS)
                for _ in range(50):
                    await store.verify(issued.token)
                reads_before = getattr(getattr(store, "stats", None), "reads", None)
                began = time.perf_counter_ns()
                for _ in range(calls):
                    assert await store.verify(issued.token) is not None
                elapsed = time.perf_counter_ns() - began
                reads = getattr(getattr(store, "stats", None), "reads", None)
                rows.append({
                    "store": name, "calls": calls,
                    "us_per_verify": round(elapsed / calls / 1000, 1),
                    "reads_per_verify": (1.0 if reads is None else
                                         round((reads - (reads_before or 0)) / calls, 4)),
                    "load": load_average()})
                print(f"keys {name}: {rows[-1]}", file=sys.stderr, flush=True)
        finally:
            for _, store in stores:
                await store.close()
            if "postgres" in args.backends:
                import psycopg

                with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
                    conn.execute(psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                        psycopg.sql.Identifier(schema)))
    return {"rows": rows}


# -- results -----------------------------------------------------------------------------


def find(sections: list[dict[str, Any]], side: str, op: str, clients: int,
         procs: int | None = None) -> dict[str, Any] | None:
    for section in sections:
        if (section["side"], section["op"], section["clients"]) == (side, op, clients) and (
                procs is None or section["procs"] == procs):
            return section
    return None


def in_process_reference(sections: list[dict[str, Any]], op: str,
                         clients: int) -> dict[str, Any] | None:
    """The in-process figure for (op, clients): every pass's samples pooled (1 client is
    measured before and after the HTTP sections), throughput the mean of the passes."""
    passes = [s for s in sections
              if (s["side"], s["op"], s["clients"]) == ("in-process", op, clients)]
    if not passes:
        return None
    pooled = [v for s in passes for v in s["_latencies_ns"]]
    rates = [s["throughput"] for s in passes if s["throughput"]]
    return {"p50_ms": ms(pooled, 0.5),
            "throughput": round(sum(rates) / len(rates), 1) if rates else None,
            "pass_p50_ms": {s["pass"]: s["p50_ms"] for s in passes}}


def table_rows(results: list[dict[str, Any]], client_procs: int) -> list[dict[str, Any]]:
    rows = []
    for backend in results:
        sections = backend["sections"]
        for section in sections:
            if section["side"] != "http":
                continue
            local = in_process_reference(sections, section["op"], section["clients"])
            one = find(sections, "http", section["op"], 1, 1)
            row: dict[str, Any] = {
                "backend": backend["backend"], "op": section["op"],
                "clients": section["clients"], "procs": section["procs"],
                "throughput": section["throughput"], "p50_ms": section["p50_ms"],
                "p99_ms": section["p99_ms"], "errors": section["error_count"],
                "in_process_p50_ms": local and local["p50_ms"],
                "in_process_pass_p50_ms": local and local["pass_p50_ms"],
                "in_process_throughput": local and local["throughput"],
                "ratio": (round(section["p50_ms"] / local["p50_ms"], 2)
                          if local and local["p50_ms"] and section["p50_ms"] else None),
                "target": None, "measured": None, "met": None}
            if section["op"] == "healthz":
                row["target"] = "reference: the HTTP floor (no auth, no storage)"
            elif section["clients"] == 1 and local and local["p50_ms"] is not None:
                bound = round(P50_FACTOR * local["p50_ms"] + P50_SLACK_MS, 3)
                row.update(target=f"p50 ≤ 1.5 x in-process + 1 ms = {bound} ms",
                           measured=f"{section['p50_ms']} ms",
                           met=(section["p50_ms"] is not None
                                and section["p50_ms"] <= bound))
            elif (backend["backend"] == "sqlite" and section["op"] == "search"
                  and section["clients"] == 64 and one and one["throughput"]):
                scale = round((section["throughput"] or 0) / one["throughput"], 2)
                row.update(target="≥ 8 x one client's ops/s, 0 errors",
                           measured=f"{scale}x, {section['error_count']} errors",
                           met=scale >= SCALE_TARGET and section["error_count"] == 0)
                if section["procs"] != client_procs:
                    row["target"] += " (one client process: a check, not the target)"
                    row["met"] = None
            rows.append(row)
    return rows


def notes(data: dict[str, Any]) -> list[str]:
    """What the CPU figures say about each HTTP section, computed, not written by hand."""
    found = []
    for backend in data["results"]:
        sections = backend["sections"]
        for s in sections:
            if s["side"] != "http":
                continue
            name = f"{backend['backend']} {s['op']} x{s['clients']} ({s['procs']} proc)"
            if s["client_cores"] >= 0.85 * s["procs"]:
                found.append(f"{name}: the client processes used {s['client_cores']} "
                             f"cores of {s['procs']}: client-bound, the server may have "
                             "had more to give.")
            if s["server_cores"] is not None and s["server_cores"] >= 0.9:
                found.append(f"{name}: the server process used {s['server_cores']} cores "
                             f"({s['server_cpu_ms_per_op']} ms CPU per operation): one "
                             "Python process, whose event loop and storage threads share "
                             "one GIL, was the ceiling.")
            if s["machine_busy"] is not None and s["machine_busy"] >= 0.9:
                found.append(f"{name}: the machine was {round(100 * s['machine_busy'])} % "
                             f"busy (server {s['server_cores']} cores, clients "
                             f"{s['client_cores']}): CPU-bound on {os.cpu_count()} cores.")
        single = find(sections, "http", "search", 1, 1)
        if single and single["server_cores"] and single["throughput"]:
            ceiling = round(1 / single["server_cores"], 2)
            found.append(
                f"{backend['backend']} search: one client already kept the server process "
                f"{single['server_cores']} cores busy ({single['server_cpu_ms_per_op']} ms "
                f"CPU a search), so a one-process server can give at most about "
                f"{ceiling}x one client's {single['throughput']} ops/s; "
                f"{SCALE_TARGET:g}x would need about "
                f"{round(SCALE_TARGET * single['server_cores'], 1)} cores of server at that "
                "CPU per search.")
        top = max((s["clients"] for s in sections), default=0)
        one_proc = find(sections, "http", "search", top, 1)
        many = next((s for s in sections if s["side"] == "http" and s["op"] == "search"
                     and s["clients"] == top and s["procs"] > 1), None)
        if one_proc and many and many["throughput"] and one_proc["throughput"]:
            found.append(
                f"{backend['backend']} search x{top} from one client process: "
                f"{one_proc['throughput']} ops/s (client {one_proc['client_cores']} cores, "
                f"server {one_proc['server_cores']}), against {many['throughput']} ops/s "
                f"from {many['procs']} (client {many['client_cores']}, server "
                f"{many['server_cores']}).")
    return found


def cell(value: Any) -> str:
    return "-" if value is None else str(value)


MET = {True: "yes", False: "**no**", None: "-"}


def document(data: dict[str, Any]) -> str:
    """The results page: the worker processes and the key store (issue 29), then the
    service against the same operations in process (issue 16), each part as measured
    last."""
    lines = ["# The HTTP service: worker processes, the key store, and the cost of HTTP",
             ""]
    if "workers" in data:
        lines += workers_markdown(data["workers"])
    if "keys" in data:
        lines += keys_markdown(data["keys"])
    if "results" in data:
        lines += markdown(data)
    return "\n".join(lines) + "\n"


def workers_markdown(part: dict[str, Any]) -> list[str]:
    meta = part["meta"]
    lines = [
        "## Worker processes: `serve --workers 2` against one worker (issue 29)", "",
        f"Commit `{meta['commit']}`, {meta['when']}, Python {meta['python']}, SQLite "
        f"{meta['sqlite']}, uvicorn {meta['uvicorn']} ({meta['http_stack']}), "
        f"{meta['machine']}, shared with other work while it ran. {meta['records']:,} "
        f"memories seeded; each section {meta['seconds']} s after {meta['warmup']} untimed "
        f"operations per client, clients spread over {meta['client_procs']} client "
        f"processes on the same machine (one connection each, opened before the section). "
        f"{meta['rounds']} paired rounds: in each, one worker, two workers in `serve`'s "
        f"default listen mode ({meta.get('listen_mode', '-')}) and two in the other (at "
        "fewer client levels) serve in turn, in the opposite order every other round; a "
        "figure is the median over rounds, a ratio the median of the per-round ratios. "
        "`reuseport`: a SO_REUSEPORT socket per worker; `shared`: one socket every worker "
        "accepts from. The profile is the `local` profile's rules and the CLI's audit "
        f"trail (fsync {meta.get('trail_fsync', 'always')}), which every worker appends to "
        "under its lock. 1-minute load "
        f"average {meta['load_min']} to {meta['load_max']} over the run"
        + (" (a `--quick` run: a smoke test, not figures)" if meta["quick"] else "") + ".",
        "",
        "| backend | operation | clients | 1 worker ops/s | 2 workers ops/s | ratio | ratio "
        "by round | 2 workers p50 / p99 ms | 1 worker p50 / p99 ms | busiest worker | "
        "2 workers, other socket ops/s | busiest worker (other) | server cores 1 → 2 "
        "| client cores | machine busy | errors |",
        "|---|---|---:|---:|---:|---:|---|---|---|---:|---:|---:|---|---:|---:|---:|"]
    for r in part["rows"]:
        lines.append(
            f"| {r['backend']} | {r['op']} | {r['clients']} | {cell(r['one_worker'])} | "
            f"{cell(r['two_workers'])} | {cell(r['ratio'])} | "
            f"{', '.join(str(v) for v in r['ratio_by_round']) or '-'} | "
            f"{cell(r['two_p50_ms'])} / {cell(r['two_p99_ms'])} | "
            f"{cell(r['one_p50_ms'])} / {cell(r['one_p99_ms'])} | "
            f"{cell(r['busiest_share'])} | {cell(r['other'])} | "
            f"{cell(r['busiest_share_other'])} | {cell(r['server_cores_one'])} → "
            f"{cell(r['server_cores_two'])} | {cell(r['client_cores_two'])} | "
            f"{cell(r['machine_busy_two'])} | {r['errors']} |")
    spread = [(b["backend"], x) for b in part["results"] for x in b.get("spread", [])]
    if spread:
        lines += ["", "How a burst of keep-alive connections opened at once (as clients that "
                  "start together open them) lands on the two workers, counted from /proc "
                  "once every connection answered; each pair is one trial:", "",
                  "| backend | round | socket | connections | per worker, each trial |",
                  "|---|---:|---|---:|---|"]
        lines += [f"| {backend} | {x['round']} | {x['listen_mode']} | {x['connections']} | "
                  + ", ".join("/".join(str(n) for n in trial) for trial in x["by_worker"])
                  + " |" for backend, x in spread]
    lines += ["", "`busiest worker` is the busiest worker's share of the two workers' CPU "
              "time in the section (0.5 is an even split); `server cores` counts the "
              "parent and every worker with the processes it started (the provider's "
              "ranking processes); `client cores` and `machine busy` are the 2-worker "
              "sections'.", "", "### The issue's targets", "",
              "| target | backend | operation | measured | met |", "|---|---|---|---|---|"]
    lines += [f"| {t['target']} | {t['backend']} | {t['op']} | {t['measured']} | "
              f"{MET[t['met']]} |" for t in part["targets"]]
    if part.get("notes"):
        lines += ["", "Notes:", ""] + [f"- {note}" for note in part["notes"]]
    lines += ["", "### Every section", "",
              "| backend | round | workers | socket | operation | clients | ops/s | p50 ms | "
              "p99 ms | errors | server cores | busiest worker | client cores | machine "
              "busy | load |", "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"
              "---:|---:|---|"]
    for backend in part["results"]:
        for s in backend["sections"]:
            lines.append(
                f"| {backend['backend']} | {s['round']} | {s['workers']} | "
                f"{s['listen_mode']} | {s['op']} | {s['clients']} | {cell(s['throughput'])} "
                f"| {cell(s['p50_ms'])} | {cell(s['p99_ms'])} | {s['error_count']} | "
                f"{cell(s['server_cores'])} | {cell(s.get('busiest_worker_share'))} | "
                f"{s['client_cores']} | {cell(s['machine_busy'])} | "
                f"{s['load_before']} → {s['load_after']} |")
    lines += ["", f"Reproduce: `{meta['command']}` (`--part workers` measures this part "
              "only and keeps the others)", ""]
    return lines


def keys_markdown(part: dict[str, Any]) -> list[str]:
    meta = part["meta"]
    lines = ["## Authenticating a request: the key store's cost (issue 29)", "",
             f"Commit `{meta['commit']}`, {meta['when']}, load {meta['load']}. `verify` of "
             "a valid key, back to back, in one process; PostgreSQL on 127.0.0.1. A "
             "revocation is seen within the cache's time-to-live (0.5 s by default, at "
             "most 1 s), so the cached store reads once per key per time-to-live at most; "
             "made-up key ids are never cached (a read each).", "",
             "| store | calls | µs per verify | point reads per verify |",
             "|---|---:|---:|---:|"]
    lines += [f"| {r['store']} | {r['calls']} | {r['us_per_verify']} | "
              f"{r['reads_per_verify']} |" for r in part["rows"]]
    lines += ["", f"Reproduce: `{meta['command']}` (`--part keys` measures this part only)",
              ""]
    return lines


def markdown(data: dict[str, Any]) -> list[str]:
    meta = data["meta"]
    met = MET
    lines = [
        "## The HTTP service against the same operations in process (issue 16)",
        "",
        f"Commit `{meta['commit']}`, {meta['when']}, Python {meta['python']}, SQLite "
        f"{meta['sqlite']}, uvicorn {meta['uvicorn']} ({meta['http_stack']}), "
        f"{meta['machine']}. {meta['records']:,} memories seeded in the searched scope; "
        f"each section {meta['seconds']} s after {meta['warmup']} untimed operations per "
        f"client; HTTP clients spread over {meta['client_procs']} client processes (one "
        "`AsyncMemoryClient` and connection each), the server in its own process on "
        "127.0.0.1. Profile: the `local` profile's rules (permissions, write-rules, "
        "secret-guard; no quotas, no cache) plus the CLI's audit trail (fsync always), "
        "built the same way on both sides. 1-minute load average "
        f"{meta['load_min']} to {meta['load_max']} over the run"
        + (" (a `--quick` run: a smoke test, not figures)" if meta["quick"] else "")
        + ". See the docstring of `bench/service.py` for the method.",
        "",
        "### Throughput and latency over HTTP, with the in-process figure",
        "",
        "| backend | operation | clients | procs | throughput ops/s | p50 ms | p99 ms "
        "| errors | in-process ops/s | in-process p50 ms | ratio p50 | target | measured "
        "| met? |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for row in data["rows"]:
        lines.append(
            f"| {row['backend']} | {row['op']} | {row['clients']} | {row['procs']} | "
            f"{cell(row['throughput'])} | {cell(row['p50_ms'])} | {cell(row['p99_ms'])} | "
            f"{row['errors']} | {cell(row['in_process_throughput'])} | "
            f"{cell(row['in_process_p50_ms'])} | {cell(row['ratio'])} | "
            f"{cell(row['target'])} | {cell(row['measured'])} | {met[row['met']]} |")
    lines += ["", "`ratio p50` is the HTTP p50 over the in-process p50 at the same number "
              "of clients; at 1 client the in-process samples of the passes before and "
              "after the HTTP sections are pooled. `procs` is the number of client "
              "processes. `healthz` is `GET /healthz` (no credentials, no storage): what "
              "uvicorn, Starlette and httpx cost a request that does nothing.", "",
              "### The issue's targets", "", "| target | backend | operation | measured "
              "| met |", "|---|---|---|---|---|"]
    lines += [f"| {row['target']} | {row['backend']} | {row['op']} x{row['clients']} "
              f"({row['procs']} proc) | {row['measured']} | {met[row['met']]} |"
              for row in data["rows"] if row["measured"] is not None]
    lines += ["", "### Every section: CPU and load", "",
              "`server` and `client` cores are the CPU used on average over the section "
              "(the server process; the client processes, or the bench process itself "
              "in process), and per operation in ms; `machine` is the busy share of all "
              "cores (PostgreSQL and anything else running included). In-process rows "
              "ran before the server started, and at 1 client again after it stopped.",
              "", "| backend | side | operation | clients | procs | ops | ops/s | p50 ms | "
              "p99 ms | errors | server cores | server CPU ms/op | client cores | client "
              "CPU ms/op | machine busy | load |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for backend in data["results"]:
        for s in backend["sections"]:
            errors = ", ".join(f"{k} {v}" for k, v in sorted(s["errors"].items())) or "0"
            if s["warmup_errors"]:
                errors += " (warm-up: " + ", ".join(
                    f"{k} {v}" for k, v in sorted(s["warmup_errors"].items())) + ")"
            side = s["side"] + (f" ({s['pass']})" if "pass" in s else "")
            lines.append(
                f"| {backend['backend']} | {side} | {s['op']} | {s['clients']} | "
                f"{s['procs']} | {s['ops']} | {cell(s['throughput'])} | {cell(s['p50_ms'])} "
                f"| {cell(s['p99_ms'])} | {errors} | {cell(s['server_cores'])} | "
                f"{cell(s['server_cpu_ms_per_op'])} | {s['client_cores']} | "
                f"{cell(s['client_cpu_ms_per_op'])} | {cell(s['machine_busy'])} | "
                f"{s['load_before']} → {s['load_after']} |")
    lines += ["", "Seeding (not timed): " + ", ".join(
        f"{b['backend']} {b['seed_seconds']} s" for b in data["results"]) + "."]
    if data.get("notes"):
        lines += ["", "Notes:", ""] + [f"- {note}" for note in data["notes"]]
    lines += ["", f"Reproduce: `{meta['command']}` (`--part in-process` measures this "
              "part only)"]
    return lines


def stack_meta(args: argparse.Namespace) -> dict[str, Any]:
    import uvicorn

    try:
        import httptools  # noqa: F401
        parser = "httptools"
    except ImportError:
        parser = "h11"
    try:
        import uvloop  # noqa: F401
        loop_name = "uvloop installed"
    except ImportError:
        loop_name = "asyncio loop"
    return {"commit": commit(), "python": sys.version.split()[0],
            "sqlite": sqlite3.sqlite_version, "uvicorn": uvicorn.__version__,
            "http_stack": f"{parser} parser, {loop_name}",
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "records": args.records, "seconds": args.seconds, "warmup": args.warmup,
            "client_procs": args.client_procs, "backends": args.backends,
            "quick": args.quick, "postgres_dsn_host": POSTGRES_DSN.rsplit("@", 1)[-1],
            "command": " ".join(["python bench/service.py", *sys.argv[1:]])}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    loads = [load_average()]
    results = []
    for backend in args.backends:
        result = await bench_backend(backend, args)
        loads += [v for s in result["sections"] for v in (s["load_before"], s["load_after"])]
        results.append(result)
    loads.append(load_average())
    return {
        "meta": {**stack_meta(args), "clients": args.clients,
                 "load_min": min(loads), "load_max": max(loads)},
        "results": results,
    }


async def workers_async(args: argparse.Namespace) -> dict[str, Any]:
    loads = [load_average()]
    results = []
    for backend in args.backends:
        result = await bench_workers(backend, args)
        loads += [v for s in result["sections"] for v in (s["load_before"], s["load_after"])]
        results.append(result)
    loads.append(load_average())
    for result in results:
        for section in result["sections"]:
            section.pop("_latencies_ns", None)
    rows = worker_rows(results)
    from governed_memory_service.serve import DEFAULT_LISTEN_MODE

    return {"meta": {**stack_meta(args), "clients": args.worker_clients,
                     "listen_mode": DEFAULT_LISTEN_MODE, "trail_fsync": args.trail_fsync,
                     "listen_clients": args.listen_clients, "rounds": args.rounds,
                     "load_min": min(loads), "load_max": max(loads)},
            "results": results, "rows": rows, "targets": worker_targets(rows),
            "notes": worker_notes(rows)}


def worker_notes(rows: list[dict[str, Any]]) -> list[str]:
    """What the CPU figures say about the 2-worker sections, computed."""
    found = []
    for row in rows:
        if row["clients"] != TARGET_CLIENTS or row["machine_busy_two"] is None:
            continue
        name = f"{row['backend']} {row['op']} x{row['clients']}"
        one, two = row["server_cores_one"], row["server_cores_two"]
        if one and two and row["ratio"] is not None and row["ratio"] < WORKER_RATIO_TARGET:
            found.append(
                f"{name}: 2 workers {row['ratio']}x one worker, below "
                f"{WORKER_RATIO_TARGET}x: the server got {round(two / one, 2)}x the CPU with "
                f"two workers ({two} cores against {one}) while the machine was "
                f"{round(100 * row['machine_busy_two'])} % busy; a second worker adds "
                "throughput only with a core free to run it.")
        if row["two_p50_ms"] and row["two_p99_ms"] and row["one_p50_ms"] \
                and row["one_p99_ms"] and row["busiest_share"] is not None:
            share = row["busiest_share"]
            why = (f"the busier worker did {share} of the work, and a request on the fuller "
                   "worker (more connections, each keeping its worker) waits longer than one "
                   "on the other" if share >= UNEVEN_SHARE else
                   f"the work was even ({share}), so the tail is the workers waiting for "
                   "each other, not measured apart here: every event append takes the audit "
                   "trail's flock, which a waiting process polls for (sleeping up to 20 ms "
                   "between tries)" + (", and SQLite's writers poll for its write lock the "
                                       "same way" if row["backend"] == "sqlite" else ""))
            found.append(
                f"{name}: p99/p50 {round(row['two_p99_ms'] / row['two_p50_ms'], 2)} with 2 "
                f"workers, {round(row['one_p99_ms'] / row['one_p50_ms'], 2)} with one; "
                f"{why}.")
        room = round((os.cpu_count() or 1) - (row["client_cores_two"] or 0), 2)
        found.append(
            f"{name}: with 2 workers the machine was {round(100 * row['machine_busy_two'])} "
            f"% busy; the server used {row['server_cores_two']} cores (1 worker: "
            f"{row['server_cores_one']}) and the clients {row['client_cores_two']}, on "
            f"{os.cpu_count()} cores shared with the clients, PostgreSQL and whatever else "
            f"ran: at most about {room} cores were left for the server and PostgreSQL.")
        if row["busiest_share"] is not None:
            found.append(
                f"{name}: the busiest of the 2 workers did {row['busiest_share']} of "
                f"their CPU work ({row['mode']})"
                + (f", {row['busiest_share_other']} with {row['other_mode']}"
                   if row["busiest_share_other"] is not None else "") + " (0.5 is even).")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--part", choices=["all", "in-process", "workers", "keys", "report"],
                        default="all",
                        help="what to measure; the others' figures already in <out>.json "
                             "are kept (report: measure nothing, write <out>.md again from "
                             "<out>.json)")
    parser.add_argument("--records", type=int, default=5000,
                        help="memories seeded in the searched scope")
    parser.add_argument("--seconds", type=float, default=5.0, help="timed length of a section")
    parser.add_argument("--warmup", type=int, default=3,
                        help="untimed operations per client before a section")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--worker-clients", type=int, nargs="+", default=[1, 8, 32, 128],
                        help="client levels of the workers comparison")
    parser.add_argument("--listen-clients", type=int, nargs="*", default=[8, 32],
                        help="client levels of the SO_REUSEPORT comparison (none: skip it)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="paired rounds of the workers comparison (order reversed "
                             "every other round)")
    parser.add_argument("--trail-fsync", choices=["always", "interval", "never"],
                        default="always",
                        help="workers comparison only: the audit trail's flush policy "
                             "(always, as `serve` builds it; the others diagnose its cost)")
    parser.add_argument("--key-calls", type=int, default=5000,
                        help="verifications timed per key store")
    parser.add_argument("--client-procs", type=int, default=2,
                        help="client processes the HTTP clients are spread over")
    parser.add_argument("--backends", nargs="+", choices=["sqlite", "postgres"],
                        default=["sqlite", "postgres"])
    parser.add_argument("--quick", action="store_true",
                        help="300 records, 1 s sections: proves everything runs")
    parser.add_argument("--out", type=Path, default=RESULTS / "service",
                        help="path stem: writes <out>.json and <out>.md")
    parser.add_argument("--client-worker", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client_worker:
        client_worker(args.client_worker)
        return
    if args.quick:
        args.records, args.seconds, args.rounds = 300, 1.0, min(args.rounds, 2)
    args.clients = sorted(set(args.clients))
    args.worker_clients = sorted(set(args.worker_clients))
    args.listen_clients = sorted(set(args.listen_clients))
    if (args.client_procs < 1 or args.seconds <= 0 or args.rounds < 1
            or min(args.clients + args.worker_clients) < 1):
        parser.error("--client-procs, --seconds, --rounds and --clients must be positive")
    out_json = Path(f"{args.out}.json")
    data: dict[str, Any] = {}
    if out_json.exists():
        with contextlib.suppress(ValueError):
            data = json.loads(out_json.read_text())
    if args.part in ("all", "in-process"):
        measured = asyncio.run(main_async(args))
        measured["rows"] = table_rows(measured["results"], args.client_procs)
        measured["notes"] = notes(measured)
        for backend in measured["results"]:
            for section in backend["sections"]:
                section.pop("_latencies_ns", None)
        data.update(measured)
    if args.part in ("all", "workers"):
        data["workers"] = asyncio.run(workers_async(args))
    if args.part == "report" and "workers" in data:
        workers = data["workers"]
        workers["rows"] = worker_rows(workers["results"])
        workers["targets"] = worker_targets(workers["rows"])
        workers["notes"] = worker_notes(workers["rows"])
    if args.part in ("all", "keys"):
        data["keys"] = {"meta": {**stack_meta(args), "load": load_average()},
                        **asyncio.run(bench_keys(args))}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    text = document(data)
    Path(f"{args.out}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
