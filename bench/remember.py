"""What ``manager.remember`` costs the framework: memories formed per second from a
600-turn conversation, and model calls per turn.

Everything runs in process with the scripted model, which answers at once, so the
figures are governed memory's own cost (the searches that decide each fact, the
governed writes, their events), not a model's latency. A generated conversation of
``--turns`` messages (user and assistant alternating, seeded): a user message states a
new fact about one of 40 subjects, changes one (a contradiction: superseded), refines
one (updated in place), restates one (unchanged) or is small talk. The model proposes
the facts each message states and, when a fact has close memories, relates it to them
by subject, as a real model would be asked to.

Two ways to call it, on each backend (native provider, in-memory and SQLite):

- ``whole``: one ``remember`` call with the whole conversation (windows of 20
  messages: one extraction call per window, one reconcile call per window with a fact
  that has stored memories close to it);
- ``per-turn``: one call per user and assistant pair, as a chat loop would after each
  turn (one extraction call per pair, plus reconcile).

Then the ``whole`` call is retried: every fact is unchanged and nothing is written
(checked). Writes ``bench/results/remember.json`` and ``remember.md`` with the 1-minute
load before and after.

    python bench/remember.py [--turns 600] [--seed 7] [--backends memory sqlite]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from governed_memory import GovernedMemoryManager, Principal, Scope
from governed_memory.events import InMemoryEventSink
from governed_memory.language_models import ModelCall, ScriptedModel
from governed_memory.remembering import RememberResult

RESULTS = Path(__file__).parent / "results"
ALICE = Principal("user:alice", "user", "acme", "alice")
SCOPE = Scope("acme", user_id="alice")
WORDS = ("pipeline", "ingest", "owner", "budget", "deadline", "tea", "coffee", "postgres",
         "redis", "schema", "review", "launch", "customer", "invoice", "travel", "berlin",
         "paris", "meeting", "agenda", "risk")
VALUES = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "granite", "harbor",
          "indigo", "juniper", "kestrel", "lagoon", "meadow", "nectar", "onyx", "prairie",
          "quartz", "raven", "sierra", "tundra")
SUBJECTS = tuple(f"{WORDS[i % 20]} {WORDS[(i * 7 + 3) % 20]}" for i in range(40))
FORMED = ("added", "updated", "superseded", "held_for_review")
_FACT = re.compile(r"^Alice's (.+?) choice is (\w+)(, mostly)?$")


def conversation(turns: int, seed: int) -> list[dict[str, str]]:
    """``turns`` messages: a user message and an acknowledgement, alternating."""
    rng = random.Random(seed)
    known: dict[str, str] = {}
    messages: list[dict[str, str]] = []
    for n in range(turns // 2):
        roll = rng.random()
        subject = rng.choice(SUBJECTS)
        if roll < 0.25:
            text = f"Small talk about the weather, number {n}."
        elif roll < 0.40 and known:
            subject = rng.choice(sorted(known))
            text = f"As I said, for {subject} I choose {known[subject]}."
        elif roll < 0.50 and known:
            subject = rng.choice(sorted(known))
            text = f"For {subject} I choose {known[subject]}, mostly."
        else:
            value = rng.choice(VALUES)
            known[subject] = value
            text = f"For {subject} I choose {value}."
        messages.append({"role": "user", "content": text, "turn_id": f"u{n}"})
        messages.append({"role": "assistant", "content": "Noted.", "turn_id": f"a{n}"})
    return messages


_SAYS = re.compile(r"^\[(\d+)\] user: .*?[Ff]or (.+?) I choose (\w+)(, mostly)?\.$")


def respond(call: ModelCall) -> Any:
    if call.task == "remember":
        facts = []
        for line in call.user.splitlines():
            said = _SAYS.match(line)
            if said:
                number, subject, value, mostly = said.groups()
                facts.append({"content": f"Alice's {subject} choice is {value}"
                                         + (", mostly" if mostly else ""),
                              "type": "preference", "importance": 0.6, "confidence": 0.9,
                              "turns": [int(number)]})
        return {"facts": facts}
    if call.task == "reconcile":
        facts = [json.loads(m.group(1)) for m in re.finditer(r"^\d+\. (\".*\")$", call.user,
                                                             re.M)]
        memories = re.findall(r"^\[M(\d+)\] \(\w+\) (.*)$", call.user, re.M)
        decisions = []
        for number, fact in enumerate(facts, start=1):
            new = _FACT.match(fact)
            for ref, content in memories:
                old = _FACT.match(content)
                if new is None or old is None or new.group(1) != old.group(1):
                    continue
                if new.group(2) != old.group(2):
                    action = "supersede"
                elif new.group(3) and not old.group(3):
                    action = "update"
                else:
                    action = "none"
                decisions.append({"fact": number, "action": action, "memory": f"M{ref}"})
                break
        return {"decisions": decisions}
    raise ValueError(call.task)


def manager_for(backend: str, directory: Path, sink: InMemoryEventSink,
                model: ScriptedModel) -> GovernedMemoryManager:
    config: dict[str, Any] = {"backend": backend}
    if backend == "sqlite":
        config["path"] = str(directory / f"remember-{time.monotonic_ns()}.db")
    return GovernedMemoryManager.from_plugins("native", config, sinks=[sink],
                                              language_model=model)


def summary(results: list[RememberResult], elapsed: float, turns: int,
            sink: InMemoryEventSink) -> dict[str, Any]:
    counts = Counter(d.decision.value for r in results for d in r.decisions)
    formed = sum(counts[k] for k in FORMED)
    calls = sum(r.model_calls for r in results)
    operations = sum(1 for e in sink.events if e.type.endswith(".requested"))
    return {"seconds": round(elapsed, 3), "facts": sum(counts.values()),
            "decisions": dict(sorted(counts.items())), "memories_formed": formed,
            "formed_per_s": round(formed / elapsed, 1),
            "facts_per_s": round(sum(counts.values()) / elapsed, 1),
            "model_calls": calls, "model_calls_per_turn": round(calls / turns, 3),
            "governed_operations": operations,
            "ms_per_fact": round(1000 * elapsed / max(1, sum(counts.values())), 2)}


async def run(backend: str, turns: int, seed: int, directory: Path) -> dict[str, Any]:
    messages = conversation(turns, seed)
    out: dict[str, Any] = {}
    # One call with the whole conversation, then its retry.
    sink, model = InMemoryEventSink(), ScriptedModel(responder=respond)
    async with manager_for(backend, directory, sink, model) as manager:
        await manager.search(ALICE, SCOPE, "warm up")
        sink.events.clear()
        began = time.perf_counter()
        whole = await manager.remember(ALICE, SCOPE, messages)
        out["whole"] = summary([whole], time.perf_counter() - began, turns, sink)
        writes = sum(1 for e in sink.events if e.type == "memory.write.committed")
        began = time.perf_counter()
        again = await manager.remember(ALICE, SCOPE, messages)
        retry = summary([again], time.perf_counter() - began, turns, sink)
        retried_writes = sum(1 for e in sink.events
                             if e.type == "memory.write.committed") - writes
        assert retried_writes == 0, retried_writes
        assert retry["decisions"].keys() <= {"unchanged"}, retry["decisions"]
        out["retry"] = {**retry, "writes": retried_writes,
                        "governed_operations": retry["governed_operations"]
                        - out["whole"]["governed_operations"]}
        out["stored_records"] = len((await manager.list(ALICE, SCOPE, limit=100)).items)
    # One call per user and assistant pair, as a chat loop would.
    sink, model = InMemoryEventSink(), ScriptedModel(responder=respond)
    async with manager_for(backend, directory, sink, model) as manager:
        await manager.search(ALICE, SCOPE, "warm up")
        sink.events.clear()
        results = []
        began = time.perf_counter()
        for start in range(0, len(messages), 2):
            results.append(await manager.remember(ALICE, SCOPE, messages[start:start + 2]))
        out["per_turn"] = summary(results, time.perf_counter() - began, turns, sink)
    return out


def load() -> float:
    return round(os.getloadavg()[0], 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--backends", nargs="+", default=["memory", "sqlite"],
                        choices=["memory", "sqlite"])
    parser.add_argument("--out", default=str(RESULTS / "remember"),
                        help="write OUT.json and OUT.md")
    args = parser.parse_args()
    before = load()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends:
            results[backend] = asyncio.run(run(backend, args.turns, args.seed, Path(tmp)))
            print(backend, json.dumps(results[backend]), file=sys.stderr)
    meta = {"python": sys.version.split()[0], "machine": platform.machine(),
            "cpus": os.cpu_count(), "turns": args.turns, "seed": args.seed,
            "load_before": before, "load_after": load(),
            "command": " ".join(["python bench/remember.py", *sys.argv[1:]])}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2)
                                   + "\n", encoding="utf-8")
    lines = ["# Memories from a conversation: what `remember` costs the framework", "",
             f"`{meta['command']}` on {meta['cpus']} CPUs, Python {meta['python']}; "
             f"1-minute load {before} before, {meta['load_after']} after.", "",
             f"A {args.turns}-message conversation (user and assistant alternating), the "
             "scripted model (it answers at once: the figures are the framework's cost). "
             "*Formed*: added, updated, superseded or held for review. *whole*: one call "
             "with the conversation (windows of 20 messages); *per-turn*: one call per "
             "user and assistant pair; *retry*: the whole call again (nothing written).",
             "", "| backend | calling | seconds | facts | formed | formed/s | facts/s | "
                 "ms/fact | model calls/turn | governed operations | decisions |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for backend in args.backends:
        for mode in ("whole", "per_turn", "retry"):
            row = results[backend][mode]
            decisions = ", ".join(f"{k} {v}" for k, v in row["decisions"].items())
            lines.append(f"| {backend} | {mode.replace('_', '-')} | {row['seconds']} | "
                         f"{row['facts']} | {row['memories_formed']} | {row['formed_per_s']} "
                         f"| {row['facts_per_s']} | {row['ms_per_fact']} | "
                         f"{row['model_calls_per_turn']} | {row['governed_operations']} | "
                         f"{decisions} |")
    Path(f"{out}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
