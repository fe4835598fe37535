"""Registers the built-in policies through the same hook a third-party plugin uses.

Each policy module is imported when its policy is first built, not here: every
``PluginManager.load()`` imports this module, and a profile enables a few policies at
most (``pii-redaction`` alone pulls in the tiers' request model).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from governed_memory import hookimpl

from governed_memory_policies.names import (
    CEDAR,
    PERMISSIONS,
    PII_REDACTION,
    QUOTAS,
    REGO,
    RETENTION,
    SECRET_GUARD,
    WRITE_REVIEW,
    WRITE_RULES,
)

if TYPE_CHECKING:
    from governed_memory.policy import MemoryPolicy
    from governed_memory.profiles import MemoryProfileSpec

Factory = Callable[[Mapping[str, Any], "MemoryProfileSpec"], "MemoryPolicy"]


def _deferred(module: str) -> Factory:
    """``governed_memory_policies.<module>.build``, imported on the first call."""

    def build(config: Mapping[str, Any], profile: MemoryProfileSpec) -> MemoryPolicy:
        target = importlib.import_module(f"governed_memory_policies.{module}")
        policy: MemoryPolicy = target.build(config, profile)
        return policy

    build.__qualname__ = build.__name__ = f"{module}.build"
    return build


@hookimpl
def register_memory_policies(register: Callable[..., None]) -> None:
    register(PERMISSIONS, _deferred("permissions"),
             description="per-operation permissions from [access.permissions]")
    register(WRITE_RULES, _deferred("write_rules"),
             description="read-only profiles, memory-type allow-list, required scope "
                         "dimensions and idempotency keys ([write], [scope])")
    register(SECRET_GUARD, _deferred("secret_guard"),
             description="rejects or redacts credentials ([privacy] secret_guard)")
    register(PII_REDACTION, _deferred("pii_redaction"),
             description="redacts e-mail addresses and phone numbers ([privacy])")
    register(RETENTION, _deferred("retention"),
             description="TTL per memory type, never past max_ttl_s ([retention])")
    register(WRITE_REVIEW, _deferred("write_review"),
             description="holds memories from listed source types for review ([write])")
    register(QUOTAS, _deferred("quotas"),
             description="records, bytes and writes per minute per tenant and scope "
                         "([quotas])")
    register(CEDAR, _deferred("cedar_policy"),
             description="a Cedar policy set and schema ([policies.extra.cedar]; extra "
                         "cedar)")
    register(REGO, _deferred("rego_policy"),
             description="an OPA Rego module and its data document "
                         "([policies.extra.rego]; extra rego)")
