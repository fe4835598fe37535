"""Merkle proofs over a large audit trail: size, verification, build and checkpoint times.

A trail of ``--entries`` events (1 000 000 by default) is written to a scratch
directory by the real ``AuditSink`` (``fsync = "never"``, the default 64 MiB files), one
``emit`` per event, so the lines, rotation and leaves are exactly what production
writes; ``--writer lines`` instead writes the same lines with the chain module's line
functions directly (the sink's format, byte for byte, without its locking and worker
thread; only about 1.5 times faster, since serializing the events is most of the cost).
The events are content-free envelopes with every field a governed write fills in
(decision, policy revision, profile, provider, trace), about 1.2 KB a line.

Then, each timed with ``time.perf_counter``:

- **verify**: ``verify_trail`` alone (the chain, every line parsed), for reference;
- **checkpoint**: ``tree_checkpoint_of`` (the same verification, plus the Merkle tree
  folded in on the way), and signing it, and checking a signature;
- **proof build**: ``prove_inclusion`` end to end (stream the trail, 32 bytes kept per
  entry, build the tree's levels, cut the path, self-check), split into its parts;
  then paths from the built tree at random indices; and ``prove_consistency`` from the
  middle of the trail to its end;
- **proof size**: the JSON document, the compact binary form and the bare hashes;
- **verification**: ``verify_inclusion`` of the event's canonical bytes at random
  indices (p50, p95), also from the proof's and checkpoint's JSON texts and with the
  signature checked, and ``verify_consistency``.

The load average is recorded at the start and the end (the figures mean little on a
busy host). Writes ``bench/results/audit_proofs.json`` and ``.md`` (or ``--out``).

    python bench/audit_proofs.py [--entries 1000000] [--writer sink|lines]
        [--samples 2000] [--out bench/results/audit_proofs]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import random
import shlex
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
    canonical_bytes,
    continue_line,
    entry_line,
    file_name,
    genesis_line,
    parse_line,
)
from governed_memory.audit.merkle import Frontier
from governed_memory.audit.proofs import (
    InclusionProof,
    TreeCheckpoint,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)
from governed_memory.audit.proving import prove_consistency, prove_inclusion, read_leaves
from governed_memory.audit.signing import sign_checkpoint
from governed_memory.audit.sink import DEFAULT_MAX_FILE_BYTES
from governed_memory.audit.verify import tree_checkpoint_of, verify_trail
from governed_memory.converter import unstructure
from governed_memory.events import MemoryEvent

RESULTS = Path(__file__).parent / "results"
TARGETS = {"proof_bytes": 1024, "verify_p50_ms": 1.0}
"""Issue 19: an inclusion proof for 1M entries is at most 1 KB and verifies in 1 ms."""


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


def write_with_sink(directory: Path, entries: int) -> None:
    async def run() -> None:
        sink = AuditSink(directory, fsync="never")
        for n in range(entries):
            await sink.emit(event(n))
        await sink.close()

    asyncio.run(run())


def write_lines(directory: Path, entries: int) -> None:
    """The sink's lines and rotation, written straight from the chain module."""
    directory.mkdir(parents=True)
    chain_id, index = "chain_" + os.urandom(16).hex(), 1
    first = genesis_line(chain_id, time.time())
    head = str(parse_line(first[:-1])["hash"])
    handle = open(directory / file_name(index), "wb")  # noqa: SIM115 - rotated below
    handle.write(first)
    size = len(first)
    for n in range(entries):
        line, digest = entry_line(n + 1, head, unstructure(event(n)))
        if size + len(line) > DEFAULT_MAX_FILE_BYTES:
            handle.close()
            index += 1
            handle = open(directory / file_name(index), "wb")  # noqa: SIM115
            opening = continue_line(chain_id, n, head, index)
            handle.write(opening)
            size = len(opening)
        handle.write(line)
        size += len(line)
        head = digest
    handle.close()


def timed(work: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    value = work(*args, **kwargs)
    return value, time.perf_counter() - start


def from_texts(body: bytes, proof_text: str, checkpoint_text: str) -> None:
    """What an auditor does with the files: parse both documents, then verify."""
    verify_inclusion(body, InclusionProof.from_json(proof_text),
                     TreeCheckpoint.from_json(checkpoint_text))


def spread(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_us": round(statistics.median(ordered) * 1e6, 1),
            "p95_us": round(ordered[int(0.95 * (len(ordered) - 1))] * 1e6, 1),
            "max_us": round(ordered[-1] * 1e6, 1), "samples": len(ordered)}


def git_commit() -> str | None:
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=root, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no",
                                "--", "framework/governed_memory/audit", "bench"],
                               capture_output=True, text=True, cwd=root, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty.strip() else "")


def bench(entries: int, writer: str, samples: int, scratch: Path) -> dict[str, Any]:
    rng = random.Random(19)
    trail = scratch / "trail"
    load_start = os.getloadavg()
    started = time.time()
    print(f"writing {entries} entries with the {writer} writer ...", file=sys.stderr)
    _, write_s = timed(write_with_sink if writer == "sink" else write_lines, trail, entries)
    files = sorted(trail.glob("audit-*.jsonl"))
    trail_bytes = sum(path.stat().st_size for path in files)

    print("verifying, then checkpointing ...", file=sys.stderr)
    verification, verify_s = timed(verify_trail, [trail])
    assert verification.ok and verification.entries == entries, verification.problem
    checkpoint, checkpoint_s = timed(tree_checkpoint_of, [trail], time.time())
    key = Ed25519PrivateKey.generate()
    public = key.public_key()
    sign_times, check_times = [], []
    for _ in range(200):
        signed, took = timed(sign_checkpoint, checkpoint, key)
        sign_times.append(took)
        _, took = timed(signed.verify_signature, public)
        check_times.append(took)

    print("building proofs ...", file=sys.stderr)
    picks = [0, entries // 2, entries - 1]
    builds = []
    for index in picks:
        wanted = event(index).event_id
        (proof, _), took = timed(prove_inclusion, [trail], wanted, signed)
        assert proof.leaf_index == index
        builds.append(took)
    leaves, read_s = timed(read_leaves, [trail], heads_at=frozenset({entries // 2}))
    tree, tree_s = timed(leaves.tree)

    def fold() -> bytes:
        frontier = Frontier()
        for at in range(0, len(leaves.leaves), 32):
            frontier.append(leaves.leaves[at:at + 32])
        return frontier.root()

    folded, fold_s = timed(fold)
    assert folded == checkpoint.root_bytes
    assert tree.root() == checkpoint.root_bytes
    indices = [rng.randrange(entries) for _ in range(samples)]
    path_times, proofs = [], []
    for index in indices:
        path, took = timed(tree.inclusion_path, index)
        path_times.append(took)
        proofs.append(InclusionProof(checkpoint.chain_id, event(index).event_id, index,
                                     entries, tuple(node.hex() for node in path)))
    middle = TreeCheckpoint(checkpoint.chain_id, entries // 2,
                            tree.root(entries // 2).hex(), leaves.heads[entries // 2],
                            time.time())
    consistency, consistency_s = timed(prove_consistency, [trail], middle, checkpoint)

    print("verifying proofs ...", file=sys.stderr)
    bodies = [canonical_bytes(unstructure(event(index))) for index in indices]
    assert all(leaf_hash(body) == tree.leaf(index) for body, index in zip(bodies, indices,
                                                                          strict=True))
    texts = [proof.to_json() for proof in proofs]
    checkpoint_text = signed.to_json()
    plain, from_json, with_signature = [], [], []
    for proof, body, text in zip(proofs, bodies, texts, strict=True):
        _, took = timed(verify_inclusion, body, proof, checkpoint)
        plain.append(took)
        _, took = timed(from_texts, body, text, checkpoint_text)
        from_json.append(took)
        _, took = timed(verify_inclusion, body, proof, signed, public_key=public)
        with_signature.append(took)
    consistency_times = []
    for _ in range(samples):
        _, took = timed(verify_consistency, middle, checkpoint, consistency)
        consistency_times.append(took)

    json_sizes = [len(text.encode()) for text in texts]
    compact_sizes = [len(proof.to_bytes()) for proof in proofs]
    path_lengths = [len(proof.audit_path) for proof in proofs]
    load_end = os.getloadavg()
    return {
        "meta": {
            "entries": entries, "writer": writer, "samples": samples,
            "files": len(files), "trail_bytes": trail_bytes,
            "bytes_per_entry": round(trail_bytes / entries, 1),
            "load_start": [round(x, 2) for x in load_start],
            "load_end": [round(x, 2) for x in load_end],
            "command": shlex.join([Path(sys.executable).name, *sys.argv]),
            "commit": git_commit(), "python": platform.python_version(),
            "machine": platform.machine(), "cpus": os.cpu_count(),
            "when": dt.datetime.fromtimestamp(started, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "duration_s": round(time.time() - started, 1),
        },
        "write": {"seconds": round(write_s, 2), "entries_per_s": round(entries / write_s)},
        "checkpoint": {
            "verify_only_s": round(verify_s, 2),
            "checkpoint_s": round(checkpoint_s, 2),
            "merkle_fold_s": round(fold_s, 2),
            "json_bytes": len(checkpoint_text.encode()),
            "sign": spread(sign_times), "signature_verify": spread(check_times),
        },
        "proof_build": {
            "prove_inclusion_s": [round(x, 2) for x in builds],
            "prove_inclusion_at": picks,
            "read_leaves_s": round(read_s, 2),
            "tree_levels_s": round(tree_s, 2),
            "path_from_built_tree": spread(path_times),
            "prove_consistency_s": round(consistency_s, 2),
            "consistency_from_to": [entries // 2, entries],
            "memory_leaf_mb": round(leaves.size * 32 / 2**20, 1),
        },
        "proof_size": {
            "json_bytes_max": max(json_sizes), "json_bytes_p50": statistics.median(json_sizes),
            "compact_bytes_max": max(compact_sizes),
            "hashes_bytes_max": 32 * max(path_lengths), "path_length_max": max(path_lengths),
            "consistency_json_bytes": len(consistency.to_json().encode()),
            "consistency_path_length": len(consistency.path),
        },
        "verify": {
            "inclusion": spread(plain), "inclusion_from_json": spread(from_json),
            "inclusion_signed": spread(with_signature),
            "consistency": spread(consistency_times),
        },
    }


def targets(run: dict[str, Any]) -> list[dict[str, Any]]:
    size, verify = run["proof_size"], run["verify"]
    return [
        {"target": "inclusion proof ≤ 1 KB (compact form)", "limit": TARGETS["proof_bytes"],
         "measured": size["compact_bytes_max"],
         "met": size["compact_bytes_max"] <= TARGETS["proof_bytes"]},
        {"target": "inclusion proof ≤ 1 KB (JSON document, hex)",
         "limit": TARGETS["proof_bytes"], "measured": size["json_bytes_max"],
         "met": size["json_bytes_max"] <= TARGETS["proof_bytes"]},
        {"target": "verification p50 ≤ 1 ms", "limit": TARGETS["verify_p50_ms"],
         "measured": round(verify["inclusion"]["p50_us"] / 1000, 3),
         "met": verify["inclusion"]["p50_us"] <= TARGETS["verify_p50_ms"] * 1000},
        {"target": "verification p50 ≤ 1 ms (from JSON texts, signature checked too)",
         "limit": TARGETS["verify_p50_ms"],
         "measured": round((verify["inclusion_from_json"]["p50_us"]
                            + run["checkpoint"]["signature_verify"]["p50_us"]) / 1000, 3),
         "met": verify["inclusion_from_json"]["p50_us"]
         + run["checkpoint"]["signature_verify"]["p50_us"] <= TARGETS["verify_p50_ms"] * 1000},
    ]


def markdown(run: dict[str, Any]) -> str:
    meta, check, build = run["meta"], run["checkpoint"], run["proof_build"]
    size, verify = run["proof_size"], run["verify"]

    def row(name: str, figures: dict[str, float]) -> str:
        return (f"| {name} | {figures['p50_us']} | {figures['p95_us']} | {figures['max_us']} "
                f"| {figures['samples']} |")

    lines = [
        "# Merkle proofs over the audit trail",
        "",
        f"A trail of {meta['entries']:,} entries written by the "
        + ("real `AuditSink` (`fsync = \"never\"`, 64 MiB files)" if meta["writer"] == "sink"
           else "chain module's line functions (the sink's format, without the sink)")
        + f": {meta['files']} files, {meta['trail_bytes'] / 2**20:,.0f} MiB "
        f"({meta['bytes_per_entry']} bytes an entry), written in {run['write']['seconds']} s "
        f"({run['write']['entries_per_s']:,} entries/s). Commit {meta['commit']}, Python "
        f"{meta['python']} on {meta['machine']} ({meta['cpus']} CPUs), {meta['when']}, "
        f"{meta['duration_s']} s in all; load average {', '.join(map(str, meta['load_start']))}"
        f" at the start, {', '.join(map(str, meta['load_end']))} at the end.",
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
        "## Proof size (bytes)",
        "",
        "| what | bytes |",
        "|---|---:|",
        f"| inclusion proof, JSON document (hex hashes), largest | {size['json_bytes_max']} |",
        f"| inclusion proof, compact binary form (`to_bytes`), largest | "
        f"{size['compact_bytes_max']} |",
        f"| the audit path's hashes alone ({size['path_length_max']} x 32 bytes) | "
        f"{size['hashes_bytes_max']} |",
        f"| consistency proof {build['consistency_from_to'][0]:,} → "
        f"{build['consistency_from_to'][1]:,}, JSON ({size['consistency_path_length']} hashes)"
        f" | {size['consistency_json_bytes']} |",
        f"| signed checkpoint, JSON | {check['json_bytes']} |",
        "",
        "## Verification (µs)",
        "",
        "| what | p50 | p95 | max | samples |",
        "|---|---:|---:|---:|---:|",
        row("`verify_inclusion` (event bytes, proof, checkpoint)", verify["inclusion"]),
        row("the same from the proof's and checkpoint's JSON texts", verify["inclusion_from_json"]),
        row("`verify_inclusion` with the checkpoint's signature checked",
            verify["inclusion_signed"]),
        row("Ed25519 signature check alone", check["signature_verify"]),
        row("`verify_consistency`", verify["consistency"]),
        "",
        "## Building (seconds, once each)",
        "",
        "| what | s |",
        "|---|---:|",
        f"| `verify_trail` alone (every line parsed and hashed) | {check['verify_only_s']} |",
        f"| `tree_checkpoint_of` (the same, plus the Merkle tree) | {check['checkpoint_s']} |",
        f"| the Merkle part alone (the frontier folded over the leaf hashes) | "
        f"{check['merkle_fold_s']} |",
        "| `prove_inclusion` end to end, at entries "
        f"{', '.join(map(str, build['prove_inclusion_at']))} | "
        f"{', '.join(map(str, build['prove_inclusion_s']))} |",
        f"| of which streaming the leaves ({build['memory_leaf_mb']} MiB kept) | "
        f"{build['read_leaves_s']} |",
        f"| of which the tree's levels | {build['tree_levels_s']} |",
        f"| `prove_consistency` end to end | {build['prove_consistency_s']} |",
        "",
        f"A path from a built tree: p50 {build['path_from_built_tree']['p50_us']} µs. Signing "
        f"a checkpoint: p50 {check['sign']['p50_us']} µs.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--writer", choices=("sink", "lines"), default="sink")
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=RESULTS / "audit_proofs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="audit-proofs-") as scratch:
        run = bench(args.entries, args.writer, args.samples, Path(scratch))
    run["targets"] = targets(run)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{args.out}.json").write_text(json.dumps(run, indent=2) + "\n", encoding="utf-8")
    Path(f"{args.out}.md").write_text(markdown(run), encoding="utf-8")
    print(markdown(run))


if __name__ == "__main__":
    main()
