"""Ingest rate with a real embedder: one ``add`` at a time against ``add_many``.

Issue 18 measured 24 adds/s storing one memory per conversation turn with MiniLM (int8)
and ``sync`` indexing on SQLite, while the same texts embed at 175/s in batches. This
bench stores generated conversation turns (``bench/recall_data.py``: 10 conversations,
about 5,880 turns, one scope per conversation, ``"<speaker>: <text>"`` as in the recall
bench) through the governed manager on SQLite with the MiniLM embedder:

- ``add``: one turn after another, awaited one by one (the first ``--sequential``
  turns only: at ~24/s the whole set would take minutes and says nothing more);
- ``add_many``: each conversation's turns in one ``add_many`` call (every turn its own
  governed add, ``--concurrency`` in flight; the profile's embedder batches the model
  calls of adds in flight).

Both sides embed on write (``[indexing] mode = "sync"``), run the same policies and
write to a fresh database. Reported: adds/s, the model calls made and texts per call,
the 1-minute load average before and after each section. Target (issue 18): ≥ 150
adds/s for the whole set with ``add_many``.

    .venv/bin/python bench/ingest.py              # results in bench/results/ingest.*
    .venv/bin/python bench/ingest.py --quick --out /tmp/ingest
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_data import generate

RESULTS = Path(__file__).resolve().parent / "results"
TENANT = "ingest"


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _spec(path: Path) -> Any:
    from governed_memory.profiles import parse_profile

    return parse_profile({
        "id": "ingest-bench", "version": "1.0.0",
        "provider": {"name": "native", "config": {"backend": "sqlite", "path": str(path)}},
        "stores": {"embedder": {"kind": "counted-minilm"}},
        "indexing": {"mode": "sync"},
        "retrieval": {"modes": ["lexical", "vector"]},
        "policies": {"enabled": ["permissions", "write-rules", "secret-guard"]},
    })


class Counted:
    """MiniLM, counting its model calls: registered as the embedder ``counted-minilm``,
    so the manager wraps it in its batching embedder exactly as it would MiniLM."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sizes: list[int] = []

    @property
    def identity(self) -> Any:
        return self.inner.identity

    async def embed(self, texts: Any) -> Any:
        self.sizes.append(len(texts))
        return await self.inner.embed(texts)

    async def close(self) -> None:
        await self.inner.close()


def _plugins(counted: Counted) -> Any:
    from governed_memory import hookimpl
    from governed_memory.plugins import PluginManager

    class Plugin:
        @hookimpl
        def register_embedders(self, register: Any) -> None:
            register("counted-minilm", lambda config: counted, description="bench")

    return PluginManager.load([Plugin()])


async def _section(name: str, turns: list[tuple[Any, list[str]]], *, batched: bool,
                   concurrency: int, directory: Path) -> dict[str, Any]:
    from governed_memory import GovernedMemoryManager, Permission, Principal, PrincipalKind
    from governed_memory.batch import AddItem

    principal = Principal("svc:ingest-bench", PrincipalKind.SERVICE, TENANT,
                          permissions=frozenset({Permission.READ, Permission.WRITE}))
    from governed_memory.plugins import PluginManager

    minilm = PluginManager.load().embedders.get("minilm").factory({})
    counted = Counted(minilm)
    manager = GovernedMemoryManager.from_profile(_spec(directory / f"{name}.db"),
                                                 plugins=_plugins(counted))
    await manager.start()
    try:
        # The model loads on its first call; load it before the clock starts.
        await minilm.embed(["warm up"])
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        stored = refused = 0
        for scope, texts in turns:
            if batched:
                result = await manager.add_many(
                    principal, scope, [AddItem(content=t, memory_type="episode")
                                       for t in texts], concurrency=concurrency)
                stored += len(result.added)
                refused += len(result.refused)
            else:
                for text in texts:
                    await manager.add(principal, scope, text, memory_type="episode")
                    stored += 1
        elapsed = time.perf_counter() - started
    finally:
        await manager.close()
    sizes = counted.sizes
    return {"section": name, "adds": stored, "refused": refused, "seconds": elapsed,
            "adds_per_s": stored / elapsed, "model_calls": len(sizes),
            "texts_per_call": (sum(sizes) / len(sizes)) if sizes else 0.0,
            "largest_call": max(sizes, default=0), "concurrency": concurrency if batched
            else 1, "load_before": load_before, "load_after": os.getloadavg()[0]}


def markdown(report: dict[str, Any]) -> str:
    lines = ["# Ingest with MiniLM on SQLite: add against add_many", "",
             f"Commit `{report['commit']}`, {report['when']}, Python {report['python']}, "
             f"{report['cpus']} cores. {report['turns']} generated turns in "
             f"{report['conversations']} conversations (one scope each, "
             "`bench/recall_data.py`), MiniLM int8 with `sync` indexing, policies "
             "permissions, write-rules, secret-guard. Reproduce: "
             f"`{report['command']}`.", "",
             "| section | adds | refused | seconds | adds/s | model calls | texts per call | "
             "largest call | in flight | load |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for s in report["sections"]:
        lines.append(f"| {s['section']} | {s['adds']} | {s['refused']} | "
                     f"{s['seconds']:.1f} | {s['adds_per_s']:.1f} | {s['model_calls']} | "
                     f"{s['texts_per_call']:.1f} | {s['largest_call']} | "
                     f"{s['concurrency']} | {s['load_before']:.2f} → "
                     f"{s['load_after']:.2f} |")
    target = report["target"]
    lines += ["", f"Target: ≥ {target['adds_per_s']} adds/s with add_many over the whole "
              f"set: **{target['measured']:.1f} adds/s, "
              f"{'met' if target['met'] else 'missed'}**; add_many over add: "
              f"{report['speedup']:.1f}x.", ""]
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from governed_memory import Scope

    data = generate(conversations=args.conversations, turns=args.turns)
    turns = [(Scope(TENANT, project_id="ingest", user_id=c.conversation_id),
              [t.memory_text for t in c.turns]) for c in data.conversations]
    total = sum(len(texts) for _, texts in turns)
    first = turns[0][0], turns[0][1][:args.sequential]
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        one = await _section("add", [first], batched=False, concurrency=1,
                             directory=directory)
        many = await _section("add_many", turns, batched=True,
                              concurrency=args.concurrency, directory=directory)
    return {"commit": _commit(), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "python": platform.python_version(), "cpus": os.cpu_count(),
            "turns": total, "conversations": len(turns),
            "command": "python bench/ingest.py" + (" --quick" if args.quick else ""),
            "sections": [one, many], "speedup": many["adds_per_s"] / one["adds_per_s"],
            "target": {"adds_per_s": 150, "measured": many["adds_per_s"],
                       "met": many["adds_per_s"] >= 150 and not args.quick}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--turns", type=int, default=588)
    parser.add_argument("--sequential", type=int, default=300,
                        help="turns stored one add at a time (the first conversation's)")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--quick", action="store_true", help="2 conversations, 100 turns")
    parser.add_argument("--out", type=Path, default=RESULTS / "ingest")
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.turns, args.sequential = 2, 150, 60
    report = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n",
                                             encoding="utf-8")
    args.out.with_suffix(".md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))


if __name__ == "__main__":
    main()
