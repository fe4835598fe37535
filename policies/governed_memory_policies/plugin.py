"""Registers the built-in policies through the same hook a third-party plugin uses."""

from __future__ import annotations

from collections.abc import Callable

from governed_memory import hookimpl

from governed_memory_policies import (
    permissions,
    pii_redaction,
    quotas,
    retention,
    secret_guard,
    write_review,
    write_rules,
)
from governed_memory_policies.names import (
    PERMISSIONS,
    PII_REDACTION,
    QUOTAS,
    RETENTION,
    SECRET_GUARD,
    WRITE_REVIEW,
    WRITE_RULES,
)


@hookimpl
def register_memory_policies(register: Callable[..., None]) -> None:
    register(PERMISSIONS, permissions.build,
             description="per-operation permissions from [access.permissions]")
    register(WRITE_RULES, write_rules.build,
             description="read-only profiles, memory-type allow-list, required scope "
                         "dimensions and idempotency keys ([write], [scope])")
    register(SECRET_GUARD, secret_guard.build,
             description="rejects or redacts credentials ([privacy] secret_guard)")
    register(PII_REDACTION, pii_redaction.build,
             description="redacts e-mail addresses and phone numbers ([privacy])")
    register(RETENTION, retention.build,
             description="TTL per memory type, never past max_ttl_s ([retention])")
    register(WRITE_REVIEW, write_review.build,
             description="holds memories from listed source types for review ([write])")
    register(QUOTAS, quotas.build,
             description="records, bytes and writes per minute per tenant and scope "
                         "([quotas])")
