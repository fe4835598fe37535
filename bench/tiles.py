"""The trail as C2SP tiles: writing them for a large trail, growing them, proving from them.

A trail of ``--entries`` events (1 000 000 by default) is written to a scratch
directory in the sink's exact format, with the chain module's line functions
(``--writer lines``, the default: the sink's lines and rotation byte for byte, without
its locking and worker thread) or through the real ``AuditSink`` (``--writer sink``,
about 1.5 times slower). The events are the content-free envelopes of
``bench/audit_proofs.py`` (about 1.2 KB a line). The Merkle root is folded while
writing, so the checkpoint to publish costs nothing here; taking one with ``audit
checkpoint`` verifies the whole chain (see ``bench/results/audit_proofs.md``).

Then, each timed with ``time.perf_counter``:

- **fresh**: ``publish_tiles`` of the whole trail into an empty directory (read every
  entry, hash, bundle, write and fsync every tile, bundle and the signed checkpoint);
- **incremental**: ``--increments`` times, ``--step`` more entries appended, then
  ``publish_tiles`` into the same directory; and once more with nothing new;
- **determinism**: the grown directory compared file by file with one written at once;
- **inclusion from tiles**: at ``--samples`` random indices, a proof built from the
  tiles on disk (``TiledTree``, the few tiles read each time) and verified against the
  signed root; the verification alone; and, when Go and golang.org/x/mod are installed,
  the independent verifier (tests/audit/goverify: x/mod's ``TileHashReader``,
  ``ProveRecord`` and ``CheckRecord``, every tile read and authenticated each time).

The load average is recorded at the start and the end. Writes
``bench/results/tiles.json`` and ``.md`` (or ``--out``).

    python bench/tiles.py [--entries 1000000] [--step 10000] [--increments 3]
        [--samples 2000] [--writer lines|sink] [--out bench/results/tiles]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import json
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from governed_memory.audit import AuditSink
from governed_memory.audit.chain import (
    continue_line,
    entry_line,
    file_name,
    genesis_line,
    parse_line,
)
from governed_memory.audit.checkpoint_notes import (
    LogCheckpoint,
    log_verifier_key,
    signed_checkpoint,
)
from governed_memory.audit.merkle import Frontier
from governed_memory.audit.proofs import leaf_hash, root_from_inclusion
from governed_memory.audit.sink import DEFAULT_MAX_FILE_BYTES
from governed_memory.audit.tile_writer import publish_tiles
from governed_memory.audit.tiles import TileDirectory, TiledTree, tile_path
from governed_memory.audit.trail_entries import TrailEntries
from governed_memory.converter import unstructure
from governed_memory.events import MemoryEvent

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
GO_SOURCE = ROOT / "tests" / "audit" / "goverify"
ORIGIN = "bench.example/tiles"
TARGETS = {"fresh_s": 60.0, "increment_s_per_10k": 1.0, "inclusion_ms": 1.0}
"""Issue 32: 1M entries tiled in 60 s, 1 s per 10 000 new entries, a proof from tiles
verified in 1 ms."""


def event(n: int) -> MemoryEvent:
    """A committed write's event as the manager emits it (no content, ever)."""
    return MemoryEvent(
        event_id=f"evt_{n:012d}.{n % 7}", type="memory.write.committed",
        occurred_at=1_780_000_000.0 + n / 100, operation_id=f"op_01K{n:020d}",
        operation="add", principal_id=f"user:u{n % 1000}", tenant_id=f"tenant-{n % 17}",
        scope_hash="sh1:" + f"{n:064x}"[-64:], outcome="committed",
        record_ids=(f"01K{n:023d}",), versions=(1,), count=1,
        content_hashes=("sha256:" + f"{n * 7919:064x}"[-64:],),
        subject_hashes=("su1:" + f"{n % 1000:064x}",),
        decision_id=f"dec_01K{n:020d}", policy_revision="pr1:" + "0b0f" * 16,
        profile_id="chat-assistant", profile_version="1.2.0",
        profile_revision="sha256:" + "6c33" * 16, provider="native",
        provider_revision="native-sqlite@12", duration_ms=0.42,
        trace_id=f"{n:032x}", span_id=f"{n:016x}")


class LineWriter:
    """The sink's lines and rotation, written straight from the chain module, the
    Merkle frontier folded on the way."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True)
        self.directory = directory
        self.chain_id = "chain_" + os.urandom(16).hex()
        self.index, self.seq = 1, 0
        first = genesis_line(self.chain_id, time.time())
        self.head = str(parse_line(first[:-1])["hash"])
        self.handle = open(directory / file_name(1), "wb")  # noqa: SIM115 - rotated
        self.size = self.handle.write(first)
        self.frontier = Frontier()

    def write(self, count: int) -> None:
        for _ in range(count):
            line, digest = entry_line(self.seq + 1, self.head, unstructure(event(self.seq)))
            if self.size + len(line) > DEFAULT_MAX_FILE_BYTES:
                self.handle.close()
                self.index += 1
                self.handle = open(self.directory / file_name(self.index), "wb")  # noqa: SIM115
                self.size = self.handle.write(continue_line(self.chain_id, self.seq, self.head,
                                                            self.index))
            self.size += self.handle.write(line)
            self.frontier.append(leaf_hash(line[len(b'{"event":'):line.rfind(b',"hash":"')]))
            self.seq, self.head = self.seq + 1, digest
        self.handle.flush()

    def close(self) -> None:
        self.handle.close()


class SinkWriter:
    """The real sink; the frontier is folded from the trail afterwards (not timed)."""

    def __init__(self, directory: Path) -> None:
        self.directory, self.seq = directory, 0
        self.frontier = Frontier()

    def write(self, count: int) -> None:
        async def run() -> None:
            sink = AuditSink(self.directory, fsync="never")
            for n in range(self.seq, self.seq + count):
                await sink.emit(event(n))
            await sink.close()

        asyncio.run(run())
        for entry in TrailEntries([self.directory]).read(self.seq, self.seq + count):
            self.frontier.append(leaf_hash(entry))
        self.seq += count

    def close(self) -> None:
        pass


def timed(work: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    value = work(*args, **kwargs)
    return value, time.perf_counter() - start


def spread(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_us": round(statistics.median(ordered) * 1e6, 1),
            "p95_us": round(ordered[int(0.95 * (len(ordered) - 1))] * 1e6, 1),
            "max_us": round(ordered[-1] * 1e6, 1), "samples": len(ordered)}


def digest_tree(directory: Path) -> tuple[str, int, int]:
    """A digest over every file's path and bytes, the file count and the bytes."""
    total, count, bytes_ = hashlib.sha256(), 0, 0
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        data = path.read_bytes()
        total.update(path.relative_to(directory).as_posix().encode() + b"\0" + data)
        count, bytes_ = count + 1, bytes_ + len(data)
    return total.hexdigest(), count, bytes_


def git_commit() -> str | None:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=ROOT, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no",
                                "--", "framework/governed_memory/audit", "bench"],
                               capture_output=True, text=True, cwd=ROOT, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty.strip() else "")


def build_go(scratch: Path) -> Path | None:
    go = shutil.which("go")
    if go is None or not Path("/usr/share/gocode/src/golang.org/x/mod/sumdb/tlog").is_dir():
        return None
    binary = scratch / "goverify"
    env = {**os.environ, "GOPATH": "/usr/share/gocode", "GO111MODULE": "off",
           "GOCACHE": str(scratch / "gocache")}
    done = subprocess.run([go, "build", "-o", str(binary), "."], cwd=GO_SOURCE, env=env,
                          capture_output=True, text=True, check=False)
    return binary if done.returncode == 0 else None


def bench(entries: int, step: int, increments: int, samples: int, writer_kind: str,
          scratch: Path) -> dict[str, Any]:
    rng = random.Random(32)
    key = Ed25519PrivateKey.generate()
    load_start = os.getloadavg()
    started = time.time()
    trail, tiles = scratch / "trail", scratch / "tiles"
    print(f"writing {entries} entries with the {writer_kind} writer ...", file=sys.stderr)
    writer: LineWriter | SinkWriter = (LineWriter(trail) if writer_kind == "lines"
                                       else SinkWriter(trail))
    _, write_s = timed(writer.write, entries)
    trail_bytes = sum(p.stat().st_size for p in trail.glob("audit-*.jsonl"))

    def note() -> Any:
        size = writer.frontier.size
        return signed_checkpoint(LogCheckpoint(ORIGIN, size, writer.frontier.root()), key)

    print("tiles from scratch ...", file=sys.stderr)
    fresh, fresh_s = timed(publish_tiles, TrailEntries([trail]), tiles, note())
    _, files, tile_bytes = digest_tree(tiles)
    steps = []
    for _ in range(increments):
        writer.write(step)
        done, took = timed(publish_tiles, TrailEntries([trail]), tiles, note())
        steps.append({"entries_before": done.previous_size, "entries_after": done.size,
                      "seconds": round(took, 3), "tiles_written": done.tiles,
                      "bundles_written": done.bundles, "partials_replaced": done.removed})
    nothing, nothing_s = timed(publish_tiles, TrailEntries([trail]), tiles, note())
    writer.close()

    print("determinism: the same trail written at once ...", file=sys.stderr)
    once = scratch / "once"
    publish_tiles(TrailEntries([trail]), once, note())
    grown_digest, grown_files, _ = digest_tree(tiles)
    once_digest, _, _ = digest_tree(once)
    shutil.rmtree(once)

    print("proofs from tiles ...", file=sys.stderr)
    size = writer.frontier.size
    root = writer.frontier.root()
    directory = TileDirectory(tiles)
    built, checked = [], []
    for _ in range(samples):
        index = rng.randrange(size)

        def prove(index: int = index) -> tuple[bytes, list[bytes]]:
            tree = TiledTree(directory, size)  # no cache across proofs: tiles read each time
            return tree.leaf(index), tree.inclusion_path(index)

        (leaf, path), took = timed(prove)
        built.append(took)
        found, took = timed(root_from_inclusion, leaf, index, size, path)
        assert found == root
        checked.append(took)
    go: dict[str, Any] | None = None
    binary = build_go(scratch)
    if binary is not None:
        vkey = log_verifier_key(key, ORIGIN).text()
        done_go = subprocess.run([str(binary), "inclusion", "-base", str(tiles), "-log-key", vkey,
                                  "-repeat", str(samples)], capture_output=True, text=True,
                                 check=True)
        go = json.loads(done_go.stdout)
    load_end = os.getloadavg()
    return {
        "meta": {
            "entries": entries, "writer": writer_kind, "step": step,
            "increments": increments, "samples": samples, "trail_bytes": trail_bytes,
            "trail_files": len(list(trail.glob("audit-*.jsonl"))),
            "load_start": [round(x, 2) for x in load_start],
            "load_end": [round(x, 2) for x in load_end],
            "command": shlex.join([Path(sys.executable).name, *sys.argv]),
            "commit": git_commit(), "python": platform.python_version(),
            "machine": platform.machine(), "cpus": os.cpu_count(),
            "when": dt.datetime.fromtimestamp(started, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "duration_s": round(time.time() - started, 1),
        },
        "write": {"seconds": round(write_s, 2), "entries_per_s": round(entries / write_s)},
        "fresh": {"seconds": round(fresh_s, 2), "tiles": fresh.tiles,
                  "bundles": fresh.bundles, "files": files, "bytes": tile_bytes,
                  "entries_per_s": round(entries / fresh_s)},
        "incremental": steps,
        "nothing_new_s": round(nothing_s, 3),
        "nothing_new_written": nothing.tiles + nothing.bundles,
        "deterministic": {"identical": grown_digest == once_digest, "files": grown_files,
                          "sha256": grown_digest},
        "inclusion": {"from_tiles": spread(built), "verify_only": spread(checked),
                      "go_x_mod": go, "example_path": tile_path(0, (size - 1) // 256,
                                                                (size - 1) % 256 + 1)},
    }


def targets(run: dict[str, Any]) -> list[dict[str, Any]]:
    entries = run["meta"]["entries"]
    per_10k = max(s["seconds"] * 10_000 / max(1, s["entries_after"] - s["entries_before"])
                  for s in run["incremental"]) if run["incremental"] else 0.0
    proof_ms = (run["inclusion"]["from_tiles"]["p50_us"]
                + run["inclusion"]["verify_only"]["p50_us"]) / 1000
    rows = [
        {"target": f"tiles for {entries:,} entries ≤ 60 s", "limit": TARGETS["fresh_s"],
         "measured": run["fresh"]["seconds"], "met": run["fresh"]["seconds"] <= 60.0},
        {"target": "incrementally ≤ 1 s per 10,000 new entries (worst step)",
         "limit": TARGETS["increment_s_per_10k"], "measured": round(per_10k, 3),
         "met": per_10k <= 1.0},
        {"target": "inclusion proof from tiles, built and verified, p50 ≤ 1 ms",
         "limit": TARGETS["inclusion_ms"], "measured": round(proof_ms, 3),
         "met": proof_ms <= 1.0},
    ]
    go = run["inclusion"]["go_x_mod"]
    if go is not None:
        rows.append({"target": "the same with Go's x/mod (mean, tiles authenticated) ≤ 1 ms",
                     "limit": TARGETS["inclusion_ms"],
                     "measured": round(go["us_per_proof"] / 1000, 3),
                     "met": go["us_per_proof"] <= 1000})
    return rows


def markdown(run: dict[str, Any]) -> str:
    meta, fresh, inclusion = run["meta"], run["fresh"], run["inclusion"]
    go = inclusion["go_x_mod"]
    lines = [
        "# The trail as C2SP tiles",
        "",
        f"A trail of {meta['entries']:,} entries written "
        + ("with the chain module's line functions (the sink's format and rotation, byte "
           "for byte, without the sink)" if meta["writer"] == "lines"
           else "by the real `AuditSink`")
        + f": {meta['trail_files']} files, {meta['trail_bytes'] / 2**20:,.0f} MiB, written in "
        f"{run['write']['seconds']} s. Commit {meta['commit']}, Python {meta['python']} on "
        f"{meta['machine']} ({meta['cpus']} CPUs), {meta['when']}, {meta['duration_s']} s in "
        f"all; load average {', '.join(map(str, meta['load_start']))} at the start, "
        f"{', '.join(map(str, meta['load_end']))} at the end.",
        "",
        f"Command: `{meta['command']}`",
        "",
        "## The issue's targets",
        "",
        "| target | limit | measured | met |",
        "|---|---:|---:|---|",
        *(f"| {t['target']} | {t['limit']} | {t['measured']} | {'yes' if t['met'] else 'no'} |"
          for t in run["targets"]),
        "",
        "## Writing",
        "",
        "| what | s | written |",
        "|---|---:|---|",
        f"| from scratch, {meta['entries']:,} entries | {fresh['seconds']} | {fresh['tiles']} "
        f"tiles, {fresh['bundles']} bundles ({fresh['files']} files, "
        f"{fresh['bytes'] / 2**20:,.0f} MiB) |",
        *(f"| {s['entries_before']:,} → {s['entries_after']:,} | {s['seconds']} | "
          f"{s['tiles_written']} tiles, {s['bundles_written']} bundles, "
          f"{s['partials_replaced']} partial ones replaced |" for s in run["incremental"]),
        f"| nothing new | {run['nothing_new_s']} | {run['nothing_new_written']} files |",
        "",
        f"Grown step by step and written at once: "
        f"{'byte-identical' if run['deterministic']['identical'] else 'DIFFERENT'} "
        f"({run['deterministic']['files']} files).",
        "",
        "## Inclusion proofs from the tiles (µs)",
        "",
        "| what | p50 | p95 | max | samples |",
        "|---|---:|---:|---:|---:|",
        *(f"| {name} | {f['p50_us']} | {f['p95_us']} | {f['max_us']} | {f['samples']} |"
          for name, f in (("proof built from the tiles on disk (`TiledTree`)",
                           inclusion["from_tiles"]),
                          ("its verification (`root_from_inclusion`)",
                           inclusion["verify_only"]))),
        "",
        (f"Go's x/mod (tests/audit/goverify, `TileHashReader` + `ProveRecord` + `CheckRecord`, "
         f"every tile read and authenticated against the signed root each time): "
         f"{go['us_per_proof']} µs a proof on average, {go['tile_reads_per_proof']} tile "
         f"reads a proof." if go else "Go's x/mod was not installed: no independent timing."),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--step", type=int, default=10_000)
    parser.add_argument("--increments", type=int, default=3)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--writer", choices=("lines", "sink"), default="lines")
    parser.add_argument("--out", type=Path, default=RESULTS / "tiles")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tiles-bench-") as scratch:
        run = bench(args.entries, args.step, args.increments, args.samples, args.writer,
                    Path(scratch))
    run["targets"] = targets(run)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{args.out}.json").write_text(json.dumps(run, indent=2) + "\n", encoding="utf-8")
    Path(f"{args.out}.md").write_text(markdown(run), encoding="utf-8")
    print(markdown(run))


if __name__ == "__main__":
    main()
