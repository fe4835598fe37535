"""The coherence workload: writers and readers interleaved, every search checked.

Each scope has one writer that applies a deterministic sequence of operations (add,
update of the oldest record, delete of the oldest record). Content names the step
that wrote it (``alpha s2 n17``), so the set of live steps identifies the scope's state
after each step, and every process can compute that sequence on its own from the
seed. After a write returns, its writer publishes the step number (the *ack*).

A reader reads the acks, then searches some scopes, then reads the acks again. For
each scope searched it finds which state the hits show. The search is **stale** if that
state is older than the ack read before the search started: it shows an answer
computed before a write that had already returned. A state matching no step at all is
**incoherent**. Both must be zero.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import random
import re
import time
from collections.abc import Callable, MutableSequence, Sequence
from typing import Any, Final

import attrs
from governed_memory import MemoryType, Permission, Principal, Scope
from governed_memory.operation_context import OperationContext
from governed_memory.provider import MemoryProvider
from governed_memory.requests import AddRequest, DeleteRequest, SearchRequest, UpdateRequest

MAX_LIVE: Final = 5
TENANT: Final = "coherence"
PRINCIPAL: Final = Principal("svc:coherence", "service", TENANT, permissions=[Permission.ADMIN])
_CONTENT = re.compile(r"^alpha s(\d+) n(\d+)$")


def scope_of(index: int) -> Scope:
    return Scope(TENANT, project_id="p", user_id=f"user-{index}")


@attrs.frozen
class Op:
    kind: str  # add | update | delete
    target: int | None  # the step whose record is updated or deleted


class Model:
    """The deterministic operation sequence of every scope, extended on demand."""

    def __init__(self, seed: int, scopes: int) -> None:
        self.seed = seed
        self.states: list[list[frozenset[int]]] = [[frozenset()] for _ in range(scopes)]
        self.ops: list[list[Op | None]] = [[None] for _ in range(scopes)]
        self.index: list[dict[frozenset[int], int]] = [{frozenset(): 0} for _ in range(scopes)]

    def _extend(self, scope: int, step: int) -> None:
        states, ops = self.states[scope], self.ops[scope]
        while len(states) <= step:
            n = len(states)
            live = states[-1]
            rng = random.Random(f"{self.seed}/{scope}/{n}")
            if len(live) < 2:
                kind = "add"
            elif len(live) >= MAX_LIVE:
                kind = rng.choice(("update", "delete"))
            else:
                kind = rng.choice(("add", "add", "update", "delete"))
            target = None if kind == "add" else min(live)
            op = Op(kind, target)
            after = set(live)
            if target is not None:
                after.discard(target)
            if kind != "delete":
                after.add(n)
            ops.append(op)
            states.append(frozenset(after))
            self.index[scope][states[-1]] = n

    def op(self, scope: int, step: int) -> Op:
        self._extend(scope, step)
        op = self.ops[scope][step]
        assert op is not None
        return op

    def step_of(self, scope: int, observed: frozenset[int], upto: int) -> int | None:
        self._extend(scope, upto)
        return self.index[scope].get(observed)


@attrs.define
class Tally:
    searches: int = 0
    scope_checks: int = 0
    overlapping: int = 0
    """Searches during which at least one searched scope's ack moved."""
    stale: int = 0
    incoherent: int = 0
    writes: int = 0
    examples: list[str] = attrs.field(factory=list)

    def merge(self, other: Tally) -> None:
        for name in ("searches", "scope_checks", "overlapping", "stale", "incoherent", "writes"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.examples.extend(other.examples[: max(0, 5 - len(self.examples))])

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


class Jitter:
    """Yields to the loop a random number of times before and after each awaited call,
    so lookups, provider calls, fills and bumps of different tasks interleave in many
    orders rather than one."""

    def __init__(self, inner: Any, rng: random.Random, most: int = 3) -> None:
        self._inner = inner
        self._rng = rng
        self._most = most
        self.name = getattr(inner, "name", "jitter")

    async def _pause(self) -> None:
        for _ in range(self._rng.randint(0, self._most)):
            await asyncio.sleep(0)

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not asyncio.iscoroutinefunction(target):
            return target

        async def call(*args: Any, **kwargs: Any) -> Any:
            await self._pause()
            result = await target(*args, **kwargs)
            await self._pause()
            return result

        return call


class Workload:
    def __init__(self, model: Model, acks: MutableSequence[int], *, now: Callable[[], float],
                 rng: random.Random) -> None:
        self.model = model
        self.acks = acks
        self.now = now
        self.rng = rng
        self.tally = Tally()
        self._ops = 0
        self.searched = 0
        self.progress = asyncio.Condition()

    def ctx(self) -> OperationContext:
        self._ops += 1
        return OperationContext(operation_id=f"op_coherence_{id(self)}_{self._ops}",
                                principal=PRINCIPAL, now=self.now())

    async def writer(self, providers: Sequence[MemoryProvider], scope: int, stop: asyncio.Event,
                     every: int, max_steps: int) -> None:
        """One write per ``every`` searches on average (paced by the readers' progress, so
        the mix holds whatever the machine's speed), spread at random over the window."""
        ids: dict[int, str] = {}
        target_scope = scope_of(scope)
        step = self.acks[scope]
        while not stop.is_set() and step < max_steps:
            due = self.searched + self.rng.randint(1, 2 * every - 1)
            async with self.progress:
                await self.progress.wait_for(functools.partial(self._due, stop, due))
            if stop.is_set():
                break
            step += 1
            op = self.model.op(scope, step)
            provider = self.rng.choice(providers)
            content = f"alpha s{scope} n{step}"
            if op.kind == "add":
                record = await provider.add(AddRequest(scope=target_scope, content=content),
                                            self.ctx())
                ids[step] = record.id
            elif op.kind == "update":
                assert op.target is not None
                record_id = ids.pop(op.target)
                await provider.update(UpdateRequest(scope=target_scope, record_id=record_id,
                                                    content=content),
                                      self.ctx())
                ids[step] = record_id
            else:
                assert op.target is not None
                await provider.delete(DeleteRequest(scope=target_scope,
                                                    record_id=ids.pop(op.target)),
                                      self.ctx())
            self.acks[scope] = step  # published only after the write has returned
            self.tally.writes += 1

    def _due(self, stop: asyncio.Event, due: int) -> bool:
        return stop.is_set() or self.searched >= due

    async def reader(self, providers: Sequence[MemoryProvider], scopes: int, searches: int,
                     counter: list[int]) -> None:
        while counter[0] < searches:
            counter[0] += 1
            chosen = sorted(self.rng.sample(range(scopes), self.rng.randint(1, min(3, scopes))))
            required = [self.acks[i] for i in chosen]
            request = SearchRequest(
                scopes=tuple(scope_of(i) for i in chosen), query="alpha",
                limit=MAX_LIVE * 3 + 1,
                memory_types=self.rng.choice(((), (MemoryType.NOTE,))),
            )
            result = await self.rng.choice(providers).search(request, self.ctx())
            upper = [self.acks[i] for i in chosen]
            self.check(chosen, required, upper, result.hits)
            self.searched += 1
            async with self.progress:
                self.progress.notify_all()

    def check(self, chosen: Sequence[int], required: Sequence[int], upper: Sequence[int],
              hits: Sequence[Any]) -> None:
        self.tally.searches += 1
        if required != list(upper):
            self.tally.overlapping += 1
        observed: dict[int, set[int]] = collections.defaultdict(set)
        for hit in hits:
            match = _CONTENT.match(hit.record.content)
            if match is None or int(match.group(1)) not in chosen:
                self._note("incoherent", f"unexpected hit {hit.record.content!r}")
                continue
            observed[int(match.group(1))].add(int(match.group(2)))
        for scope, low, high in zip(chosen, required, upper, strict=True):
            self.tally.scope_checks += 1
            step = self.model.step_of(scope, frozenset(observed[scope]), high + 1)
            if step is None or step > high + 1:
                self._note("incoherent", f"scope {scope}: {sorted(observed[scope])} matches no "
                           f"step up to {high + 1}")
            elif step < low:
                self._note("stale", f"scope {scope}: showed step {step} after step {low} "
                           "had returned")

    def _note(self, kind: str, text: str) -> None:
        setattr(self.tally, kind, getattr(self.tally, kind) + 1)
        if len(self.tally.examples) < 5:
            self.tally.examples.append(f"{kind}: {text}")


async def run_workload(
    *,
    writers: Sequence[MemoryProvider],
    readers: Sequence[MemoryProvider],
    model: Model,
    acks: MutableSequence[int],
    write_scopes: Sequence[int],
    scopes: int,
    searches: int,
    reader_tasks: int,
    rng: random.Random,
    now: Callable[[], float] = time.time,
    searches_per_write: int = 10,
    max_steps: int = 1_000_000,
) -> Tally:
    """Writers on ``write_scopes`` run until the readers have done ``searches``; all
    writers together make about one write per ``searches_per_write`` searches."""
    workload = Workload(model, acks, now=now, rng=rng)
    stop = asyncio.Event()
    counter = [0]
    every = max(1, searches_per_write * len(write_scopes))
    writer_tasks = [asyncio.create_task(workload.writer(writers, i, stop, every, max_steps))
                    for i in write_scopes]
    try:
        await asyncio.gather(*(workload.reader(readers, scopes, searches, counter)
                               for _ in range(reader_tasks)))
    finally:
        stop.set()
        async with workload.progress:
            workload.progress.notify_all()
        await asyncio.gather(*writer_tasks)
    return workload.tally
