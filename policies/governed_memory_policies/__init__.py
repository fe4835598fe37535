"""Built-in policy plugins: permissions, write rules, secret guard, PII redaction,
retention, write review and quotas. Each is configured by its section of the profile
and registered through the ``governed_memory`` entry point like any third-party policy.
"""

from governed_memory_policies.names import BUILTIN_POLICIES

__all__ = ["BUILTIN_POLICIES"]
