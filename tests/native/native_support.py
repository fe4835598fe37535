"""Shared helpers for the native provider tests: contexts, scopes, a started provider, and
the backends with their gate and per-backend example counts."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, TypeVar

from governed_memory import Principal, Scope
from governed_memory.clock import ManualClock
from governed_memory.operation_context import OperationContext
from governed_memory.request import Request
from governed_memory.requests import AddRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider
from hypothesis import settings
from postgres_support import postgres_config, require_postgres

BACKENDS = ("memory", "sqlite", "postgres")
SQL_BACKENDS = ("sqlite", "postgres")
"""The backends that keep records in a database; differential tests hold each of them to
what the memory backend returns."""
_operations = itertools.count(1)


T = TypeVar("T")

def make_ctx(clock: ManualClock, tenant_id: str = "acme") -> OperationContext:
    return OperationContext(
        operation_id=f"op-{next(_operations)}",
        principal=Principal(principal_id="svc", kind="service", tenant_id=tenant_id,
                            permissions=["memory:admin"]),
        now=clock.now(),
    )


def config_for(backend: str, tmp_path: Path, **extra: Any) -> dict[str, Any]:
    if backend == "memory":
        return {"backend": "memory", **extra}
    if backend == "postgres":
        return postgres_config(tmp_path, **extra)
    return {"backend": "sqlite", "path": str(tmp_path / "memory.db"), **extra}


def build(backend: str, tmp_path: Path, clock: ManualClock) -> NativeMemoryProvider:
    return build_native_provider(config_for(backend, tmp_path), clock)


def require_backend(backend: str) -> None:
    """The gate :func:`config_for` applies to PostgreSQL (skip, or fail under ``CI=true``
    when the server is absent), passed before a property starts: once, not per example."""
    if backend == "postgres":
        require_postgres()


def examples(backend: str, **counts: int) -> settings:
    """Hypothesis settings for one backend's run of a property: its own example count
    (a PostgreSQL example migrates a fresh schema, so it runs fewer), no deadline."""
    return settings(max_examples=counts[backend], deadline=None)


USER_SCOPE = Scope(tenant_id="acme", user_id="alice")
OTHER_USER = Scope(tenant_id="acme", user_id="bob")
OTHER_TENANT = Scope(tenant_id="globex", user_id="alice")
TENANT_SCOPE = Scope(tenant_id="acme")


def note(content: str = "the user likes green tea", scope: Scope = USER_SCOPE,
         **fields: Any) -> AddRequest:
    return AddRequest(scope=scope, content=content, **fields)


async def through_port(provider: NativeMemoryProvider, request: Request[T],
                       ctx: OperationContext) -> T:
    """Send ``request`` the way the activity port does: validated first (``validate``,
    then ``validate_at`` the operation's time). A provider trusts what it is handed, so a
    request the port refuses must never reach it; these tests send invalid requests
    this way and check that storage is untouched."""
    request.validate()
    request.validate_at(ctx.now)
    return await request.send(provider, ctx)
