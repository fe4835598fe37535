"""The registered names of the built-in policies, in the order profiles usually run
them: cheap refusals first, then transforms, then review, then quotas (so a write that
another policy refuses never uses up a rate budget)."""

from __future__ import annotations

from typing import Final

PERMISSIONS: Final = "permissions"
WRITE_RULES: Final = "write-rules"
SECRET_GUARD: Final = "secret-guard"
PII_REDACTION: Final = "pii-redaction"
RETENTION: Final = "retention"
WRITE_REVIEW: Final = "write-review"
QUOTAS: Final = "quotas"
CEDAR: Final = "cedar"
REGO: Final = "rego"

BUILTIN_POLICIES: Final = (PERMISSIONS, WRITE_RULES, SECRET_GUARD, PII_REDACTION, RETENTION,
                           WRITE_REVIEW, QUOTAS)

POLICIES_AS_CODE: Final = (CEDAR, REGO)
"""Policies written in a policy language (Cedar, Rego), configured by their
``[policies.extra.<name>]`` table like a third-party policy: a policy set is the
deployment's, not a section of the profile model."""
