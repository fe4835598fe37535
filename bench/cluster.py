"""A two-node rehearsal (issue 29, item 5): two ``governed-memory serve`` processes on
different ports over one PostgreSQL schema and one Redis, driven through both by
concurrent clients; one node is SIGKILLed mid-run and restarted, and PostgreSQL is
restarted once. Checks, printed as a table (never asserted: this is a rehearsal, not a
test), and written to ``bench/results/cluster.md`` and ``.json``:

- **lost writes**: every acknowledged add, update, delete and erasure is in the final
  state of its scope (each client owns one user's scope and is its only writer, so the
  state it expects is exact);
- **trail**: every acknowledged write is in the audit trail exactly once (its committed
  event, by record id and version; an erasure by its user), and the trail, exported from
  PostgreSQL with ``governed-memory audit export``, verifies from genesis with
  ``governed-memory audit verify``;
- **stale reads**: after each acknowledged write through one node, a search through the
  *other* node shows exactly the scope's expected state (its cache is in memory per
  process and Redis for the pair: the provider's scope revisions must keep them right);
- **outage answers**: while PostgreSQL is down, every answer a node gives is a 503 with
  ``Retry-After`` (a killed node's refused connections are counted apart);
- **recovery**: seconds from PostgreSQL's restart until both nodes' ``/readyz`` answer 200
  again, and from the killed node's restart until it serves.

A write whose answer was lost (the node died, the connection dropped, a 503) is not
acknowledged: its scope is re-read (``list``) before the client goes on, and only what it
shows is expected from then on.

    python bench/cluster.py [--seconds 60] [--clients 8]

It restarts the machine's PostgreSQL cluster (``pg_ctlcluster``): run it where nothing
else uses that server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from governed_memory import Permission, Scope
from governed_memory_service import AsyncMemoryClient
from governed_memory_service.postgres_keys import PostgresApiKeyStore
from seeding import POSTGRES_DSN as DSN
from seeding import REDIS_URL, delete_prefix, drop_schema

RESULTS = Path(__file__).resolve().parent / "results"
TENANT = "cluster"
WORDS = ("tea", "kite", "river", "piano", "garden", "orbit", "lantern", "harbor", "maple",
         "comet", "violet", "canyon")

PROFILE = """\
spec_version = 1
id = "cluster-rehearsal"
version = "1.0.0"
description = "bench/cluster.py: two nodes over one PostgreSQL and one Redis"
timeout_s = 10.0

[provider]
name = "native"

[provider.config]
backend = "postgres"
dsn = {dsn}
schema = {schema}

[cache]
enabled = true
store = "redis"
ttl_s = 60.0

[stores.cache]
kind = "redis"
config = {{ url = {redis}, key_prefix = {prefix} }}

[audit.sinks.postgres-trail]
store = "provider"

[policies]
enabled = ["permissions", "write-rules"]
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def load_average() -> float:
    return os.getloadavg()[0]


class Node:
    """One ``serve`` process on a fixed port, so it comes back where clients look."""

    def __init__(self, name: str, profile: Path, keys: str, home: Path) -> None:
        self.name, self.profile, self.keys, self.home = name, profile, keys, home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = home / f"{name}.log"

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "governed_memory.cli.main", "serve", "--profile",
                 str(self.profile), "--keys", self.keys, "--host", "127.0.0.1",
                 "--port", str(self.port), "--shutdown-timeout", "10"],
                stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "GOVERNED_MEMORY_HOME": str(self.home)})

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    async def ready(self, within_s: float = 120.0) -> float:
        """Seconds until ``/readyz`` answers 200."""
        began = time.monotonic()
        async with httpx.AsyncClient(base_url=self.url, timeout=2.0) as http:
            while time.monotonic() - began < within_s:
                try:
                    if (await http.get("/readyz")).status_code == 200:
                        return time.monotonic() - began
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.05)
        raise RuntimeError(f"node {self.name} never became ready (see {self.log})")


class Recording(httpx.AsyncHTTPTransport):
    """Keeps the last answer's status and ``Retry-After``: the client turns a 503 into a
    typed error, and the rehearsal checks what went over the wire."""

    def __init__(self) -> None:
        super().__init__()
        self.last: tuple[int, bool] | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.last = None
        response = await super().handle_async_request(request)
        self.last = (response.status_code, "retry-after" in response.headers)
        return response


class Tally:
    def __init__(self) -> None:
        self.ops: Counter[str] = Counter()
        self.acked: Counter[str] = Counter()
        self.unknown: Counter[str] = Counter()
        self.stale = 0
        self.stale_examples: list[str] = []
        self.checks = 0
        self.outage_answers: Counter[str] = Counter()
        self.other_answers: Counter[str] = Counter()
        self.acked_writes: list[tuple[str, int]] = []  # (record id, version)
        self.acked_erasures: Counter[str] = Counter()
        self.outage_served = 0
        self.outage_slowest_s = 0.0
        self.unknown_erasures: Counter[str] = Counter()


class Rehearsal:
    def __init__(self, nodes: list[Node], token: str, clients: int, seconds: float,
                 seed: int) -> None:
        self.nodes, self.token = nodes, token
        self.clients, self.seconds = clients, seconds
        self.rng = random.Random(seed)
        self.tally = Tally()
        self.pg_down = False
        self.killed: Node | None = None
        self.events: list[tuple[float, str]] = []
        self.began = 0.0
        self.final: dict[int, dict[str, str]] = {}

    def client(self, node: Node, transport: Recording) -> AsyncMemoryClient:
        return AsyncMemoryClient(node.url, self.token, timeout_s=15.0, transport=transport)

    def note(self, status: str, node: Node) -> None:
        if self.pg_down:
            self.tally.outage_answers[status] += 1
        elif node is self.killed:
            self.tally.other_answers[f"killed node: {status}"] += 1
        else:
            self.tally.other_answers[status] += 1

    async def call(self, node: Node, kind: str, work: Any) -> tuple[bool, Any]:
        """(acknowledged, value): an answer lost or refused is not acknowledged."""
        self.tally.ops[kind] += 1
        transport = Recording()
        began, outage = time.monotonic(), self.pg_down
        try:
            async with self.client(node, transport) as client:
                value = await work(client)
        except Exception as exc:  # an error answer, a refused or dropped connection
            if transport.last is None:
                self.note(type(exc).__name__, node)
            else:
                status, retry_after = transport.last
                self.note(f"{status}" + (" with Retry-After" if retry_after else "")
                          + f" ({type(exc).__name__})", node)
            return False, None
        finally:
            if outage or self.pg_down:
                self.tally.outage_slowest_s = max(self.tally.outage_slowest_s,
                                                  time.monotonic() - began)
        self.tally.acked[kind] += 1
        if outage or self.pg_down:
            self.tally.outage_served += 1
        return True, value

    async def settle(self, index: int, expected: dict[str, str]) -> None:
        """Re-read a scope whose last write's answer was lost: what it holds now is
        what is expected (the write may or may not have happened)."""
        scope = Scope(TENANT, user_id=f"u{index}")
        while time.monotonic() < self.began + self.seconds + 120:
            node = self.rng.choice(self.nodes)
            items: list[Any] = []

            async def listing(client: AsyncMemoryClient) -> list[Any]:
                found, cursor = [], None
                while True:
                    page = await client.list(scope, limit=100, cursor=cursor)
                    found += page.items
                    if page.next_cursor is None:
                        return found
                    cursor = page.next_cursor

            ok, items = await self.call(node, "list", listing)
            if ok:
                expected.clear()
                expected.update({r.id: r.content for r in items})
                return
            await asyncio.sleep(0.2)

    async def check_other(self, node: Node, index: int, expected: dict[str, str]) -> None:
        other = self.nodes[1] if node is self.nodes[0] else self.nodes[0]
        scope = Scope(TENANT, user_id=f"u{index}")

        async def search(client: AsyncMemoryClient) -> Any:
            return await client.search(scope, " ".join(WORDS), limit=100)

        ok, found = await self.call(other, "search", search)
        if not ok:
            return
        self.tally.checks += 1
        seen = sorted(hit.record.content for hit in found.hits)
        if seen != sorted(expected.values()):
            self.tally.stale += 1
            if len(self.tally.stale_examples) < 5:
                self.tally.stale_examples.append(
                    f"u{index} via {other.name}: saw {len(seen)}, expected {len(expected)}")

    async def drive(self, index: int) -> None:
        rng = random.Random(index * 7919)
        scope = Scope(TENANT, user_id=f"u{index}")
        expected: dict[str, str] = {}
        step = 0
        while time.monotonic() < self.began + self.seconds:
            node = self.nodes[step % 2]
            step += 1
            roll = rng.random()
            ids = sorted(expected)
            kind = ("add" if roll < 0.45 or not ids else "update" if roll < 0.70
                    else "delete" if roll < 0.93 else "delete_user")
            if kind == "add":
                content = f"{rng.choice(WORDS)} {rng.choice(WORDS)} note {index}.{step}"

                async def add(client: AsyncMemoryClient, text: str = content) -> Any:
                    return await client.add(scope, text)

                ok, record = await self.call(node, "add", add)
                if ok:
                    expected[record.id] = record.content
                    self.tally.acked_writes.append((record.id, record.version))
            elif kind == "update":
                target, content = rng.choice(ids), f"{rng.choice(WORDS)} revised {step}"

                async def update(client: AsyncMemoryClient, rid: str = target,
                                 text: str = content) -> Any:
                    return await client.update(scope, rid, content=text)

                ok, record = await self.call(node, "update", update)
                if ok:
                    expected[record.id] = record.content
                    self.tally.acked_writes.append((record.id, record.version))
            elif kind == "delete":
                target = rng.choice(ids)

                async def delete(client: AsyncMemoryClient, rid: str = target) -> Any:
                    return await client.delete(scope, rid)

                ok, result = await self.call(node, "delete", delete)
                if ok:
                    del expected[result.record_id]
                    self.tally.acked_writes.append((result.record_id, result.version))
            else:
                async def erase(client: AsyncMemoryClient) -> Any:
                    return await client.delete_user(TENANT, f"u{index}")

                ok, _ = await self.call(node, "delete_user", erase)
                if ok:
                    expected.clear()
                    self.tally.acked_erasures[f"u{index}"] += 1
                else:
                    self.tally.unknown_erasures[f"u{index}"] += 1
            if not ok:
                self.tally.unknown[kind] += 1
                await asyncio.sleep(0.1)
                await self.settle(index, expected)
                continue
            await self.check_other(node, index, expected)
        self.final[index] = expected

    async def chaos(self, kill_at: float, pg_at: float, cluster: str) -> dict[str, Any]:
        found: dict[str, Any] = {}
        await asyncio.sleep(kill_at * self.seconds)
        victim = self.nodes[0]
        self.killed = victim
        victim.kill()
        self.events.append((time.monotonic() - self.began, f"SIGKILL {victim.name}"))
        await asyncio.sleep(2.0)
        victim.start()
        found["node_restart_to_ready_s"] = round(await victim.ready(), 2)
        self.events.append((time.monotonic() - self.began, f"{victim.name} ready"))
        self.killed = None
        await asyncio.sleep(max(0.0, pg_at * self.seconds
                                - (time.monotonic() - self.began)))
        self.pg_down = True
        self.events.append((time.monotonic() - self.began, "PostgreSQL stopping"))
        await asyncio.to_thread(subprocess.run, ["pg_ctlcluster", "--skip-systemctl-redirect",
                                                 cluster, "main", "stop", "-m", "fast"],
                                check=True)
        await asyncio.sleep(3.0)
        await asyncio.to_thread(subprocess.run, ["pg_ctlcluster", "--skip-systemctl-redirect",
                                                 cluster, "main", "start"], check=True)
        started = time.monotonic()
        self.events.append((started - self.began, "PostgreSQL started"))
        waits = await asyncio.gather(*(node.ready() for node in self.nodes))
        self.pg_down = False
        found["postgres_start_to_both_ready_s"] = round(time.monotonic() - started, 2)
        found["per_node_ready_s"] = [round(w, 2) for w in waits]
        self.events.append((time.monotonic() - self.began, "both nodes ready"))
        return found

    async def run(self, kill_at: float, pg_at: float, cluster: str) -> dict[str, Any]:
        self.began = time.monotonic()
        chaos = asyncio.create_task(self.chaos(kill_at, pg_at, cluster))
        await asyncio.gather(*(self.drive(i) for i in range(self.clients)))
        return await chaos


def export_and_verify(out: Path, schema: str) -> dict[str, Any]:
    cli = [sys.executable, "-m", "governed_memory.cli.main", "audit"]
    exported = subprocess.run([*cli, "export", "--store", DSN, "--schema", schema,
                               "--out", str(out)], capture_output=True, text=True)
    verified = subprocess.run([*cli, "verify", str(out)], capture_output=True, text=True)
    from_store = subprocess.run([*cli, "verify", "--store", DSN, "--schema", schema],
                                capture_output=True, text=True)
    entries = []
    for path in sorted(out.glob("audit-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            value = json.loads(line)
            if "event" in value:
                entries.append(value["event"])
    return {"export_exit": exported.returncode, "verify_exit": verified.returncode,
            "verify_output": verified.stdout.strip()[:200],
            "store_verify_exit": from_store.returncode, "entries": entries}


def trail_checks(tally: Tally, entries: list[dict[str, Any]]) -> dict[str, Any]:
    committed: Counter[tuple[str, int]] = Counter()
    erasures: Counter[str] = Counter()
    for event in entries:
        if event.get("type") != "memory.write.committed":
            continue
        if event.get("operation") == "delete_user":
            erasures[event.get("operation_id", "")] += 1
            continue
        for record_id, version in zip(event.get("record_ids", ()), event.get("versions", ()),
                                      strict=False):
            committed[(record_id, version)] += 1
    missing = [write for write in tally.acked_writes if committed[write] == 0]
    doubled = [write for write in tally.acked_writes if committed[write] > 1]
    erasure_events = sum(1 for event in entries if event.get("type") ==
                         "memory.write.committed" and event.get("operation") == "delete_user")
    acked_erasures = sum(tally.acked_erasures.values())
    unknown_erasures = sum(tally.unknown_erasures.values())
    return {"acknowledged writes": len(tally.acked_writes),
            "acknowledged writes missing from the trail": len(missing),
            "acknowledged writes in the trail twice or more": len(doubled),
            "erasures acknowledged": acked_erasures,
            "erasure events": erasure_events,
            "erasures unaccounted for": max(0, acked_erasures - erasure_events)
            + max(0, erasure_events - acked_erasures - unknown_erasures)}


async def final_state(node: Node, token: str, clients: int) -> dict[int, dict[str, str]]:
    found: dict[int, dict[str, str]] = {}
    async with AsyncMemoryClient(node.url, token, timeout_s=30.0) as client:
        for index in range(clients):
            scope, cursor, items = Scope(TENANT, user_id=f"u{index}"), None, {}
            while True:
                page = await client.list(scope, limit=100, cursor=cursor)
                items.update({r.id: r.content for r in page.items})
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            found[index] = items
    return found


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    cluster = args.pg_cluster or sorted(os.listdir("/etc/postgresql"))[-1]
    run_id = uuid.uuid4().hex[:8]
    schema, prefix = f"gm_cluster_{run_id}", f"gm-cluster-{run_id}:"
    home = Path(tempfile.mkdtemp(prefix="gm-cluster-"))
    profile = home / "cluster.toml"
    profile.write_text(PROFILE.format(dsn=json.dumps(DSN), schema=json.dumps(schema),
                                      redis=json.dumps(REDIS_URL),
                                      prefix=json.dumps(prefix)), encoding="utf-8")
    keys_uri = f"{DSN}?schema={schema}_keys" if "?" not in DSN else f"{DSN}&schema={schema}_keys"
    store = PostgresApiKeyStore(DSN, schema=f"{schema}_keys")
    await store.open()
    issued = await store.create(tenant_id=TENANT, kind="service", principal_id="svc:bench",
                                permissions=[Permission.READ, Permission.WRITE,
                                             Permission.DELETE, Permission.ADMIN])
    await store.close()
    nodes = [Node("node-a", profile, keys_uri, home), Node("node-b", profile, keys_uri, home)]
    load_before = load_average()
    for node in nodes:
        node.start()
        await node.ready()
    rehearsal = Rehearsal(nodes, issued.token, args.clients, args.seconds, args.seed)
    try:
        recovery = await rehearsal.run(args.kill_at, args.pg_restart_at, cluster)
        final = await final_state(nodes[1], issued.token, args.clients)
    finally:
        for node in nodes:
            node.stop()
    load_after = load_average()
    lost = sum(1 for index, expected in rehearsal.final.items()
               for rid, content in expected.items() if final[index].get(rid) != content)
    extra = sum(1 for index, expected in rehearsal.final.items()
                for rid in final[index] if rid not in expected)
    audit = export_and_verify(home / "export", schema)
    trail = trail_checks(rehearsal.tally, audit.pop("entries"))
    tally = rehearsal.tally
    outage_bad = sum(count for status, count in tally.outage_answers.items()
                     if not status.startswith("503 with Retry-After")
                     and status not in ("ConnectError", "RemoteProtocolError"))
    result = {
        "schema": schema, "clients": args.clients, "seconds": args.seconds,
        "load_1m_before": round(load_before, 2), "load_1m_after": round(load_after, 2),
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "operations": dict(tally.ops), "acknowledged": dict(tally.acked),
        "answers lost or refused": dict(tally.unknown),
        "checks": {
            "lost acknowledged writes": lost,
            "records no acknowledged write explains": extra,
            **trail,
            "trail verifies from genesis (export)": audit["verify_exit"] == 0,
            "trail verifies from genesis (in PostgreSQL)": audit["store_verify_exit"] == 0,
            "searches through the other node after a write": tally.checks,
            "stale reads": tally.stale,
            "answers during the PostgreSQL outage": dict(tally.outage_answers),
            "answers during the outage other than 503 + Retry-After": outage_bad,
            "operations served while PostgreSQL was stopping or down": tally.outage_served,
            "slowest answer during the outage, s": round(tally.outage_slowest_s, 2),
            "other failed answers": dict(tally.other_answers),
        },
        "stale_examples": tally.stale_examples,
        "recovery": recovery,
        "timeline": [(round(at, 2), what) for at, what in rehearsal.events],
        "audit": audit,
    }
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
        for name in (schema, f"{schema}_keys"):
            await asyncio.to_thread(drop_schema, name)
        delete_prefix(prefix)
    return result


def markdown(result: dict[str, Any]) -> str:
    checks = result["checks"]
    lines = [
        "# Two-node rehearsal (`bench/cluster.py`)", "",
        f"Two `serve` nodes over one PostgreSQL schema and one Redis, {result['clients']} "
        f"clients for {result['seconds']:g} s through both; node-a SIGKILLed and restarted, "
        f"PostgreSQL stopped and started once. {result['cpus']} CPUs, Python "
        f"{result['python']}, 1-minute load {result['load_1m_before']} before, "
        f"{result['load_1m_after']} after.", "",
        "| check | result |", "|---|---|"]
    for name, value in checks.items():
        shown = (", ".join(f"{k}: {v}" for k, v in value.items()) or "none"
                 ) if isinstance(value, dict) else value
        lines.append(f"| {name} | {shown} |")
    lines += ["", "| recovery | seconds |", "|---|---:|"]
    for name, value in result["recovery"].items():
        lines.append(f"| {name} | {value} |")
    lines += ["", "Operations sent: " + ", ".join(
        f"{k} {v}" for k, v in sorted(result["operations"].items())) + "; acknowledged: "
        + ", ".join(f"{k} {v}" for k, v in sorted(result["acknowledged"].items())) + ".", "",
        "Timeline: " + "; ".join(f"{at} s {what}" for at, what in result["timeline"]) + ".",
        "", "Reproduce: `python bench/cluster.py` (restarts the machine's PostgreSQL)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--kill-at", type=float, default=0.3,
                        help="when node-a is SIGKILLed, as a share of the run")
    parser.add_argument("--pg-restart-at", type=float, default=0.6,
                        help="when PostgreSQL is stopped and started, as a share of the run")
    parser.add_argument("--pg-cluster", default=None,
                        help="the PostgreSQL version directory under /etc/postgresql")
    parser.add_argument("--keep", action="store_true", help="keep the schema and files")
    parser.add_argument("--out", type=Path, default=RESULTS / "cluster")
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    text = markdown(result)
    args.out.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
