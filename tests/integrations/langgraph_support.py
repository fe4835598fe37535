"""What the LangGraph and LangChain tests share besides fixtures: the principals and a
manager over the in-memory backend. A module of its own, because ``from conftest
import`` picks whichever ``conftest`` module the run imported first."""

from __future__ import annotations

from governed_memory import GovernedMemoryManager, Permission, Principal
from governed_memory.clock import ManualClock
from governed_memory.events import InMemoryEventSink

USER = [Permission.READ, Permission.WRITE, Permission.DELETE]

ALICE = Principal("user:alice", "user", tenant_id="acme", user_id="alice", permissions=USER)
BOB = Principal("user:bob", "user", tenant_id="acme", user_id="bob", permissions=USER)
ADMIN = Principal("svc:admin", "service", tenant_id="acme", permissions=[Permission.ADMIN])
CAROL_OTHER_TENANT = Principal("user:carol", "user", tenant_id="globex", user_id="carol",
                               permissions=USER)


def native_manager(clock: ManualClock, sink: InMemoryEventSink) -> GovernedMemoryManager:
    from governed_memory_native import build_native_provider

    return GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                 clock=clock, sinks=[sink])
