"""Per-turn context cost: what ``MemoryContextBuilder.build`` and a turn append take,
and how often the summary model is called, over a long generated conversation.

Everything runs in process with the scripted model (so the figures are the memory
system's own overhead, not a model's latency): a native provider (memory or SQLite
backend) for long-term memories, a turn store (memory or SQLite), 200 seeded memories,
and a conversation of ``--turns`` turns (a 24-turn, 800-token window, so the summary
refreshes as it fills). Each turn: build the context, append the
question and the answer, and every fifth turn extract one fact.

Writes ``bench/results/context.json`` and ``context.md``.

    python bench/context.py [--turns 400] [--backend sqlite|memory] [--seed 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from governed_memory import GovernedMemoryManager, Principal, Scope
from governed_memory.language_models import ModelCall, ScriptedModel
from governed_memory.plugins import PluginManager
from governed_memory.scope import ScopeLevel, narrow
from governed_memory.tiers import MemoryTiers, TurnDraft
from governed_memory.turncontext import ContextPolicy, MemoryContextBuilder, MemoryExtractor

RESULTS = Path(__file__).parent / "results"
WORDS = ("pipeline", "ingest", "owner", "budget", "deadline", "tea", "coffee", "postgres",
         "redis", "schema", "review", "launch", "customer", "invoice", "travel", "berlin",
         "paris", "meeting", "agenda", "risk")


def respond(call: ModelCall) -> Any:
    if call.task == "summarize":
        return "summary of " + str(call.user.count("\n")) + " lines"
    if call.task == "condense":
        return {"query": call.user.rsplit("\n", 1)[-1][:200], "wanted_types": ["fact"]}
    if call.task == "extract":
        return {"facts": [{"content": "fact " + call.user[-40:], "type": "fact",
                           "scope": "user", "importance": 0.6}]}
    raise ValueError(call.task)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(turns: int, backend: str, seed: int, directory: Path) -> dict[str, Any]:
    rng = random.Random(seed)
    plugins = PluginManager.load()
    config = ({"backend": "memory"} if backend == "memory"
              else {"path": str(directory / "memories.db")})
    manager = GovernedMemoryManager.from_plugins("native", config, plugins=plugins)
    store = (plugins.turn_stores.get("memory").factory({}, manager.clock) if backend == "memory"
             else plugins.turn_stores.get("sqlite").factory(
                 {"path": str(directory / "turns.db")}, manager.clock))
    memory = MemoryTiers(long_term=manager, turns=store)
    model = ScriptedModel(responder=respond)
    policy = ContextPolicy(recent_max_messages=24, recent_max_tokens=800)
    builder = MemoryContextBuilder(memory, policy=policy, model=model)
    extractor = MemoryExtractor(manager, model, policy=policy)
    alice = Principal("user:alice", "user", "bench", "alice")
    owner = Scope("bench", project_id="p", user_id="alice", session_id="s1")
    build_ms: list[float] = []
    append_ms: list[float] = []
    extract_ms: list[float] = []
    over_budget = 0
    async with memory:
        for i in range(200):
            # USER level: the owner narrowed as recall narrows it (the user's memories
            # follow them across projects).
            await manager.add(alice, narrow(owner, ScopeLevel.USER),
                              " ".join(rng.choices(WORDS, k=8)) + f" #{i}")
        for i in range(turns):
            question = " ".join(rng.choices(WORDS, k=rng.randint(4, 30))) + "?"
            began = time.perf_counter()
            context = await builder.build(alice, owner, question)
            build_ms.append((time.perf_counter() - began) * 1000)
            over_budget += context.window_tokens > policy.recent_max_tokens
            began = time.perf_counter()
            asked = await memory.append(alice, owner, TurnDraft.user(question))
            said = await memory.append(alice, owner, TurnDraft.assistant(
                " ".join(rng.choices(WORDS, k=rng.randint(10, 60)))))
            append_ms.append((time.perf_counter() - began) * 1000 / 2)
            if i % 5 == 4:
                began = time.perf_counter()
                await extractor.extract(alice, owner, (asked, said))
                extract_ms.append((time.perf_counter() - began) * 1000)
    tasks = model.tasks()
    return {
        "backend": backend, "turns": turns,
        "build_ms": {"p50": statistics.median(build_ms), "p95": pct(build_ms, 0.95),
                     "max": max(build_ms)},
        "append_ms": {"p50": statistics.median(append_ms), "p95": pct(append_ms, 0.95)},
        "extract_ms": {"p50": statistics.median(extract_ms), "p95": pct(extract_ms, 0.95)},
        "summary_calls": tasks.count("summarize"),
        "condense_calls": tasks.count("condense"),
        "windows_over_budget": over_budget,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--backend", choices=["sqlite", "memory"], nargs="*",
                        default=["memory", "sqlite"])
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rows = []
    for backend in args.backend:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(asyncio.run(run(args.turns, backend, args.seed, Path(tmp))))
    RESULTS.mkdir(exist_ok=True)
    meta = {"python": sys.version.split()[0], "platform": platform.platform(),
            "seed": args.seed}
    (RESULTS / "context.json").write_text(json.dumps({"meta": meta, "rows": rows},
                                                     indent=2) + "\n")
    lines = ["# Per-turn context cost", "",
             f"{args.turns} turns per backend, scripted model, recent_max_messages=24, "
             f"recent_max_tokens=800, 200 stored memories; Python {meta['python']}. "
             "Written by bench/context.py.",
             "",
             "| backend | build p50 ms | build p95 ms | append p50 ms | extract p50 ms "
             "| summary calls | condense calls | windows over budget |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['backend']} | {r['build_ms']['p50']:.2f} | "
                     f"{r['build_ms']['p95']:.2f} | {r['append_ms']['p50']:.2f} | "
                     f"{r['extract_ms']['p50']:.2f} | {r['summary_calls']} | "
                     f"{r['condense_calls']} | {r['windows_over_budget']} |")
    (RESULTS / "context.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
