"""Property: a write that any policy denies leaves no trace in storage.

Random sequences of adds, updates and deletes run through a manager with the built-in
policies (and one third-party policy that fails, which must deny) over the native
in-memory backend. Before every write the whole store is snapshotted — records, their
lexical index entries, keys, version history, idempotency entries — and after every
denied write it must be exactly as it was.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from actors import ADMIN, ALICE, ALICE_SCOPE, BOB_SCOPE
from governed_memory import (
    GovernedMemoryManager,
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryPolicyDeniedError,
    MemoryScopeError,
    MemoryType,
    Scope,
    hookimpl,
)
from governed_memory.clock import ManualClock
from governed_memory.events import InMemoryEventSink
from governed_memory.plugins import PluginManager
from governed_memory.policy import PolicyCheck, PolicyVerdict
from governed_memory.profiles import MemoryProfileSpec
from governed_memory.requests import AddRequest, UpdateRequest
from hypothesis import event, given
from hypothesis import strategies as st
from policy_support import profile, storage_snapshot
from secret_corpus import secrets

SPEC = profile(
    scope={"required": ["tenant_id", "user_id"]},
    write={"allowed_memory_types": ["fact", "preference", "note"]},
    privacy={"secret_guard": "reject"},
    access={"permissions": {"delete": "memory:admin"}},
    retention={"max_ttl_s": 3600.0},
    quotas={"writes_per_minute_per_scope": 4, "max_records_per_tenant": 3},
    policies={"enabled": ["permissions", "write-rules", "secret-guard", "retention",
                          "fragile", "quotas"]},
)


class Fragile:
    """A third-party policy that raises on one word: a failing policy must deny."""

    name = "fragile"
    revision = "1"

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        request = check.request
        if isinstance(request, AddRequest | UpdateRequest) and "boom" in (request.content or ""):
            raise RuntimeError("policy bug")
        return PolicyVerdict.allow()


class FragilePlugin:
    @staticmethod
    @hookimpl
    def register_memory_policies(register: Callable[..., None]) -> None:
        register("fragile", lambda config, profile: Fragile())


PLUGINS = PluginManager.load([FragilePlugin], blocked=[])
SECRET_TEXTS = [text for _, text in secrets()[::6]]
CONTENTS = st.one_of(
    st.sampled_from(["Alice likes green tea", "meeting moved to Friday", "boom goes the test",
                     "prefers aisle seats"]),
    st.sampled_from(SECRET_TEXTS),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
            max_size=40),
)
SCOPES = st.sampled_from([ALICE_SCOPE, BOB_SCOPE, Scope("acme", project_id="p")])
PRINCIPALS = st.sampled_from([ALICE, ADMIN])
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), PRINCIPALS, SCOPES, CONTENTS, st.sampled_from(list(MemoryType)),
                  st.sampled_from([None, "k1", "k2"]), st.floats(0, 30)),
        st.tuples(st.just("update"), PRINCIPALS, st.integers(0, 5), CONTENTS,
                  st.sampled_from([None, MemoryType.FACT, MemoryType.EPISODE]),
                  st.sampled_from([None, 10**9]), st.floats(0, 30)),
        st.tuples(st.just("delete"), PRINCIPALS, st.integers(0, 5), st.booleans(),
                  st.none(), st.none(), st.floats(0, 30)),
    ),
    min_size=1, max_size=12,
)


async def run(spec: MemoryProfileSpec, operations: list[tuple[Any, ...]]) -> list[str]:
    """Runs the operations; returns what happened to each (``"<kind> denied by <x>"``)."""
    outcomes: list[str] = []
    clock, sink = ManualClock(), InMemoryEventSink()
    manager = GovernedMemoryManager.from_profile(spec, plugins=PLUGINS, clock=clock,
                                                 sinks=[sink],
                                                 provider_config_overrides={"backend": "memory"})
    written: list[tuple[Scope, str]] = []
    async with manager:
        for kind, principal, target, value, extra, more, pause in operations:
            clock.advance(pause)
            before = storage_snapshot(manager._provider)
            try:
                if kind == "add":
                    if value.strip():
                        record = await manager.add(principal, target, value, memory_type=extra,
                                                   idempotency_key=more)
                        written.append((record.scope, record.id))
                elif written:
                    scope, record_id = written[target % len(written)]
                    if kind == "update":
                        await manager.update(principal, scope, record_id, content=value or None,
                                             memory_type=extra, expires_at=more)
                    else:
                        await manager.delete(principal, scope, record_id, hard=value)
            except (MemoryPolicyDeniedError, MemoryScopeError) as exc:
                by = exc.policy if isinstance(exc, MemoryPolicyDeniedError) else "scope rule"
                outcomes.append(f"{kind} denied by {by}")
                assert storage_snapshot(manager._provider) == before
                assert sink.events[-1].type == "memory.write.rejected"
                assert sink.events[-1].outcome == "deny"
            except (MemoryNotFoundError, MemoryConflictError, ValueError):
                outcomes.append(f"{kind} refused by the provider or validation")
            else:
                outcomes.append(f"{kind} allowed")
    return outcomes


@given(OPERATIONS)
def test_a_denied_write_leaves_no_trace_in_storage(operations: list[tuple[Any, ...]]) -> None:
    for outcome in asyncio.run(run(SPEC, operations)):
        event(outcome)


def test_the_property_sees_every_kind_of_denial() -> None:
    """A fixed sequence that trips each policy once, so the property is known to bite."""
    secret = SECRET_TEXTS[0]
    operations = [
        ("add", ALICE, ALICE_SCOPE, "kept", MemoryType.FACT, None, 0),
        ("add", ALICE, ALICE_SCOPE, secret, MemoryType.FACT, None, 0),  # secret-guard
        ("add", ALICE, ALICE_SCOPE, "an episode", MemoryType.EPISODE, None, 0),  # write-rules
        ("add", ADMIN, Scope("acme", project_id="p"), "shared", MemoryType.FACT, None, 0),
        ("add", ALICE, ALICE_SCOPE, "boom", MemoryType.FACT, None, 0),  # fragile fails closed
        ("delete", ALICE, 0, False, None, None, 0),  # permissions
        ("add", ALICE, BOB_SCOPE, "not hers", MemoryType.FACT, None, 0),  # scope rule
        ("add", ALICE, ALICE_SCOPE, "two", MemoryType.FACT, None, 0),
        ("add", ALICE, ALICE_SCOPE, "three", MemoryType.FACT, None, 0),
        ("add", ALICE, ALICE_SCOPE, "four", MemoryType.FACT, None, 0),
        ("add", ALICE, ALICE_SCOPE, "five", MemoryType.FACT, None, 0),  # quotas
    ]
    denied = {o for o in asyncio.run(run(SPEC, operations)) if " denied by " in o}
    assert denied == {"add denied by secret-guard", "add denied by write-rules",
                      "add denied by fragile", "delete denied by permissions",
                      "add denied by scope rule", "add denied by quotas"}
