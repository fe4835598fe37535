"""What a policy decision costs: the Cedar and Rego example sets for compliance-strict
beside the built-in Python policies, per operation, side by side in one run.

Three views of the same question, each interleaved (every sample visits every variant
in turn, the order rotating) so that a shared machine's drift lands on all alike:

1. **decision**: one policy's ``evaluate`` alone, per operation: ``cedar`` and ``rego``
   (the shipped example sets), ``write-review`` (the built-in Python policy closest to
   one rule) and ``built-ins`` (the seven built-in policies of compliance-strict, run in
   order). *repeat* sends the request of the call before again (a decision is a pure
   function of the request, so Cedar's and Rego's are remembered); *new* gives every
   call a scope never seen before (mapped, rendered and evaluated).
2. **added to a decision**: ``PolicyEngine.decide`` with the seven built-ins, and with
   the built-ins plus Cedar or Rego where the example profiles put them, for repeated
   and new requests; the difference
   of the medians is what the engine adds to an operation's decision. The issue's
   target: a Cedar or Rego decision adds at most 100 µs (p50).
3. **added to an operation**: ``GovernedMemoryManager`` add, get and search on the
   in-memory backend under compliance-strict and its Cedar and Rego variants.

Also timed: one ``asyncio.to_thread`` hop with nothing to do, the least that moving a
decision off the event loop would cost. The load average is recorded before and after;
no figure here is a test threshold.

Writes ``bench/results/policy_cost.json`` and ``.md``.

    python bench/policy_cost.py [--samples 2000] [--manager-samples 600] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from importlib.resources import files
from pathlib import Path
from typing import Any

from governed_memory import GovernedMemoryManager, Permission, Principal, PrincipalKind, Scope
from governed_memory.clock import ManualClock
from governed_memory.events import MemoryEvent
from governed_memory.plugins import PluginManager
from governed_memory.policy import MemoryPolicy, PolicyCheck, PolicyEngine
from governed_memory.profiles import MemoryProfileSpec, load_profile
from governed_memory.profiles.build import build_components
from governed_memory.records import MemoryType, Provenance
from governed_memory.requests import (
    AddRequest,
    DeleteRequest,
    GetRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory.usage import Usage, UsageQuery

RESULTS = Path(__file__).parent / "results"
TARGET_US = 100.0
ENGINES = ("cedar", "rego")
DECISION_VARIANTS = ("cedar", "rego", "write-review", "built-ins")
OPERATIONS = ("add", "get", "search", "search x3", "update", "delete")
MANAGER_OPERATIONS = ("add", "add (new scope)", "get", "search")
AGENT = Principal("agent:support-bot", PrincipalKind.AGENT, "acme", "alice",
                  frozenset({Permission.READ, Permission.WRITE, Permission.DELETE}))
MODES = ("repeat", "new")


def example(engine: str | None) -> MemoryProfileSpec:
    """compliance-strict (``None``) or its shipped Cedar or Rego variant."""
    if engine is None:
        from governed_memory.profiles import ProfileRegistry

        return ProfileRegistry.from_plugins(PluginManager.load()).get("compliance-strict@1.0.0")
    return load_profile(files("governed_memory_profiles") / "policies" /
                        f"compliance-strict-{engine}.toml")


async def no_usage(query: UsageQuery) -> Usage:
    return Usage(0, 0)


def request_for(operation: str, scope: Scope) -> Any:
    other = Scope(scope.tenant_id, project_id=scope.project_id, user_id=scope.user_id,
                  session_id="s1")
    shared = Scope(scope.tenant_id, project_id=scope.project_id)
    return {
        "add": lambda: AddRequest(scope=scope, content="prefers tea in the afternoon",
                                  memory_type=MemoryType.PREFERENCE,
                                  provenance=Provenance(source_type="user"),
                                  idempotency_key="k"),
        "get": lambda: GetRequest(scope=scope, record_id="01HRECORD"),
        "search": lambda: SearchRequest(scopes=(scope,), query="tea"),
        "search x3": lambda: SearchRequest(scopes=(scope, other, shared), query="tea"),
        "update": lambda: UpdateRequest(scope=scope, record_id="01HRECORD",
                                        memory_type=MemoryType.FACT, idempotency_key="k"),
        "delete": lambda: DeleteRequest(scope=scope, record_id="01HRECORD",
                                        idempotency_key="k"),
    }[operation]()


def check_for(operation: str, scope: Scope) -> PolicyCheck:
    request = request_for(operation, scope)
    return PolicyCheck(request.operation, AGENT, request, "op_01BENCH", 1_000_000.0,
                       usage=no_usage)


class Sequence:
    """Several policies evaluated in order, as the engine would (no aggregation)."""

    def __init__(self, policies: list[MemoryPolicy]) -> None:
        self.policies = policies

    async def evaluate(self, check: PolicyCheck) -> Any:
        for policy in self.policies:
            await policy.evaluate(check)


def summary(samples_ns: list[int]) -> dict[str, float]:
    ordered = sorted(samples_ns)
    return {"p50_us": round(statistics.median(ordered) / 1000, 2),
            "p95_us": round(ordered[int(len(ordered) * 0.95) - 1] / 1000, 2),
            "samples": len(ordered)}


async def interleaved(calls: dict[str, Callable[[int], Awaitable[Any]]], samples: int,
                      warmup: int = 200) -> dict[str, dict[str, float]]:
    """Each call once per round, the order rotating; ``perf_counter_ns`` around each."""
    names = list(calls)
    for round_ in range(warmup):
        for name in names:
            await calls[name](-1 - round_)
    timings: dict[str, list[int]] = {name: [] for name in names}
    for round_ in range(samples):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            call = calls[name]
            start = time.perf_counter_ns()
            await call(round_)
            timings[name].append(time.perf_counter_ns() - start)
    return {name: summary(values) for name, values in timings.items()}


async def decisions(plugins: PluginManager, samples: int) -> dict[str, Any]:
    cedar = build_components(example("cedar"), plugins, ManualClock(), {"backend": "memory"})
    rego = build_components(example("rego"), plugins, ManualClock(), {"backend": "memory"})
    builtins = [p for p in cedar.policies if p.name not in ENGINES]
    variants: dict[str, Any] = {
        "cedar": next(p for p in cedar.policies if p.name == "cedar"),
        "rego": next(p for p in rego.policies if p.name == "rego"),
        "write-review": next(p for p in builtins if p.name == "write-review"),
        "built-ins": Sequence(builtins),
    }
    found: dict[str, Any] = {}
    for operation in OPERATIONS:
        repeat, new = checks(operation, samples)
        calls: dict[str, Callable[[int], Awaitable[Any]]] = {}
        for name, policy in variants.items():
            calls[f"{name} repeat"] = lambda i, p=policy, c=repeat: p.evaluate(c)
            calls[f"{name} new"] = lambda i, p=policy, n=new: p.evaluate(n[i])
        timed = await interleaved(calls, samples)
        found[operation] = {name: {mode: timed[f"{name} {mode}"] for mode in MODES}
                            for name in variants}
    return found


def checks(operation: str, samples: int, warmup: int = 200
           ) -> tuple[PolicyCheck, dict[int, PolicyCheck]]:
    """The same check every time, and one in a scope never seen before per sample
    (built before timing: building the request is not the policy's cost)."""
    repeat = check_for(operation, Scope("acme", project_id="helpdesk", user_id="alice"))
    new = {index: check_for(operation, Scope("acme", project_id=f"p{index}", user_id="alice"))
           for index in range(-warmup, samples)}
    return repeat, new


async def engine_added(plugins: PluginManager, samples: int) -> dict[str, Any]:
    engines: dict[str, PolicyEngine] = {}
    for label, engine in (("built-ins", None), *((e, e) for e in ENGINES)):
        parts = build_components(example(engine) if engine else example("cedar"), plugins,
                                 ManualClock(), {"backend": "memory"})
        policies = parts.policies if engine else tuple(
            p for p in parts.policies if p.name not in ENGINES)
        engines[label] = PolicyEngine(policies)
    found: dict[str, Any] = {}
    for operation in OPERATIONS:
        repeat, new = checks(operation, samples)
        calls: dict[str, Callable[[int], Awaitable[Any]]] = {}
        for label, engine in engines.items():
            calls[f"{label} repeat"] = lambda i, e=engine, c=repeat: e.decide(c)
            calls[f"{label} new"] = lambda i, e=engine, n=new: e.decide(n[i])
        timed = await interleaved(calls, samples)
        found[operation] = {
            mode: {"decide": {label: timed[f"{label} {mode}"] for label in engines},
                   "added_p50_us": {e: round(timed[f"{e} {mode}"]["p50_us"]
                                             - timed[f"built-ins {mode}"]["p50_us"], 2)
                                    for e in ENGINES}}
            for mode in MODES}
    return found


class NullSink:
    """Keeps nothing: compliance-strict is audit fail-closed, so it needs a sink."""

    name = "null"

    async def emit(self, event: MemoryEvent) -> None:
        return None

    async def close(self) -> None:
        return None


async def manager_added(plugins: PluginManager, samples: int) -> dict[str, Any]:
    clock = ManualClock()
    managers = {label: GovernedMemoryManager.from_profile(
        example(engine), plugins=plugins, clock=clock, sinks=[NullSink()],
        provider_config_overrides={"backend": "memory"})
        for label, engine in (("compliance-strict", None), ("+cedar", "cedar"),
                              ("+rego", "rego"))}
    found: dict[str, Any] = {}
    try:
        for manager in managers.values():
            await manager.start()
        scope = Scope("acme", project_id="helpdesk", user_id="alice")
        seeded = {label: (await m.add(AGENT, scope, "prefers tea in the afternoon",
                                      memory_type="preference", idempotency_key="seed")).id
                  for label, m in managers.items()}
        keys = iter(range(10**9))

        def add(manager: GovernedMemoryManager, label: str, new_scope: bool = False
                ) -> Callable[[int], Awaitable[Any]]:
            async def call(index: int) -> Any:
                clock.advance(1.1)  # under the profile's 60 writes a minute per scope
                where = (Scope("acme", project_id=f"{label}-{index}", user_id="alice")
                         if new_scope else scope)
                return await manager.add(AGENT, where, f"note {index}",
                                         idempotency_key=f"k{next(keys)}")
            return call

        table: dict[str, Callable[[str, GovernedMemoryManager], Callable[[int], Awaitable[Any]]]]
        table = {
            "add": lambda label, m: add(m, label),
            "add (new scope)": lambda label, m: add(m, label, new_scope=True),
            "get": lambda label, m: lambda i: m.get(AGENT, scope, seeded[label]),
            "search": lambda label, m: lambda i: m.search(AGENT, scope, "tea"),
        }
        for operation in MANAGER_OPERATIONS:
            timed = await interleaved({label: table[operation](label, m)
                                       for label, m in managers.items()}, samples, warmup=50)
            base = timed["compliance-strict"]["p50_us"]
            found[operation] = {"calls": timed,
                                "added_p50_us": {e: round(timed[f"+{e}"]["p50_us"] - base, 2)
                                                 for e in ENGINES}}
    finally:
        for manager in managers.values():
            await manager.close()
    return found


async def thread_hop(samples: int) -> dict[str, float]:
    def nothing() -> None:
        return None

    return (await interleaved({"to_thread": lambda i: asyncio.to_thread(nothing)},
                              samples))["to_thread"]


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b else None


def markdown(data: dict[str, Any]) -> str:
    meta = data["meta"]
    lines = [
        "# Policy decision cost: Cedar and Rego beside the built-in Python policies",
        "",
        f"{meta['samples']} samples per variant and operation, interleaved (manager: "
        f"{meta['manager_samples']}); Python {meta['python']}, cedarpy {meta['cedarpy']}, "
        f"regopy {meta['regopy']}, commit {meta['commit']}, {meta['date']}; load average "
        f"{meta['load_before']} before, {meta['load_after']} after ({meta['cpus']} CPUs). "
        "The sets are the shipped compliance-strict examples (three rules and a baseline "
        "permit each); the principal is an agent acting for one user.",
        "",
        "## One decision (µs, p50 / p95)",
        "",
        "*repeat*: the same request as the call before (Cedar's and Rego's decisions are "
        "pure functions of it, so they are remembered); *new*: a scope never seen before "
        "(the request is mapped, rendered and evaluated).",
        "",
        "| operation | " + " | ".join(f"{v} repeat | {v} new" for v in DECISION_VARIANTS)
        + " |",
        "|---|" + "---:|" * (2 * len(DECISION_VARIANTS)),
    ]
    for operation, row in data["decision"].items():
        cells = []
        for variant in DECISION_VARIANTS:
            for mode in MODES:
                figures = row[variant][mode]
                cells.append(f"{figures['p50_us']} / {figures['p95_us']}")
        lines.append(f"| {operation} | " + " | ".join(cells) + " |")
    lines += ["", "## Ratios of the medians of new requests", "",
              "| operation | cedar ÷ built-ins | rego ÷ built-ins | cedar ÷ write-review | "
              "rego ÷ write-review | rego ÷ cedar |", "|---|---:|---:|---:|---:|---:|"]
    for operation, row in data["ratios"].items():
        lines.append(f"| {operation} | {row['cedar/built-ins']} | {row['rego/built-ins']} | "
                     f"{row['cedar/write-review']} | {row['rego/write-review']} | "
                     f"{row['rego/cedar']} |")
    lines += ["", "## Added to a decision: `PolicyEngine.decide` (µs, p50)", "",
              f"Built-ins alone, then with Cedar or Rego where the example profiles put "
              f"them; target ≤ {TARGET_US:.0f} µs added.", "",
              "| operation | request | built-ins | + cedar | + rego | cedar adds | rego adds |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for operation, modes in data["engine"].items():
        for mode, row in modes.items():
            decide = row["decide"]
            lines.append(f"| {operation} | {mode} | {decide['built-ins']['p50_us']} | "
                         f"{decide['cedar']['p50_us']} | {decide['rego']['p50_us']} | "
                         f"{row['added_p50_us']['cedar']} | {row['added_p50_us']['rego']} |")
    lines += ["", "## Added to an operation: the manager, in-memory backend (µs, p50)", "",
              "| operation | compliance-strict | + cedar | + rego | cedar adds | rego adds |",
              "|---|---:|---:|---:|---:|---:|"]
    for operation, row in data["manager"].items():
        calls = row["calls"]
        lines.append(f"| {operation} | {calls['compliance-strict']['p50_us']} | "
                     f"{calls['+cedar']['p50_us']} | {calls['+rego']['p50_us']} | "
                     f"{row['added_p50_us']['cedar']} | {row['added_p50_us']['rego']} |")
    hop = data["thread_hop"]
    lines += ["", f"One `asyncio.to_thread` hop with nothing to do: {hop['p50_us']} µs p50 "
                  f"({hop['p95_us']} p95): what moving a decision off the event loop would "
                  "add before any work, so both engines run on the loop.", "",
              f"Reproduce: `{meta['command']}`", ""]
    return "\n".join(lines)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--manager-samples", type=int, default=600)
    parser.add_argument("--out", type=Path, default=RESULTS / "policy_cost")
    return parser.parse_args()


async def main() -> dict[str, Any]:
    args = parse()
    plugins = PluginManager.load()
    load_before = [round(x, 2) for x in os.getloadavg()]
    decision = await decisions(plugins, args.samples)
    engine = await engine_added(plugins, args.samples)
    manager = await manager_added(plugins, args.manager_samples)
    hop = await thread_hop(args.samples)
    load_after = [round(x, 2) for x in os.getloadavg()]
    ratios = {}
    for operation, row in decision.items():
        new = {v: row[v]["new"]["p50_us"] for v in DECISION_VARIANTS}
        ratios[operation] = {"cedar/built-ins": ratio(new["cedar"], new["built-ins"]),
                             "rego/built-ins": ratio(new["rego"], new["built-ins"]),
                             "cedar/write-review": ratio(new["cedar"], new["write-review"]),
                             "rego/write-review": ratio(new["rego"], new["write-review"]),
                             "rego/cedar": ratio(new["rego"], new["cedar"])}
    command = "python bench/policy_cost.py" + "".join(
        f" {a}" for a in sys.argv[1:])
    data = {
        "meta": {"samples": args.samples, "manager_samples": args.manager_samples,
                 "python": platform.python_version(), "cedarpy": version("cedarpy"),
                 "regopy": version("regopy"), "commit": commit(), "cpus": os.cpu_count(),
                 "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                 "load_before": load_before, "load_after": load_after,
                 "target_added_p50_us": TARGET_US, "command": command},
        "decision": decision, "ratios": ratios, "engine": engine, "manager": manager,
        "thread_hop": hop,
    }
    return data


def write(data: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    Path(f"{out}.md").write_text(markdown(data), encoding="utf-8")
    print(markdown(data))


if __name__ == "__main__":
    write(asyncio.run(main()), parse().out)
