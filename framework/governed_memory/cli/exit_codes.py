"""Exit codes by error family, so scripts can branch without parsing text.

A module of its own (no manager, no plugins) because ``governed-memory --help`` lists
them and the plugin-command loader needs one of them.
"""

from __future__ import annotations

from typing import Final

EXIT_CODES: Final = {
    "validation": 2,
    "scope_denied": 3,
    "policy_denied": 3,
    "not_found": 4,
    "conflict": 5,
    "capability_unsupported": 6,
    "configuration": 7,
    "storage": 8,
    "unavailable": 9,
    "audit_unavailable": 9,  # a fail-closed trail could not record the operation
    "audit_chain": 7,  # the trail on disk does not verify: nothing is chained onto it
}

EXIT_HELP: Final = """\b
Exit codes:
  0  done
  1  unexpected failure; conformance: a test failed
  2  usage or validation error (bad flag, content too long, empty stdin)
  3  denied (scope authorization or a policy, e.g. a credential refused)
  4  not found (a record; or the database of a command that only reads it)
  5  conflict (stale --expected-revision, idempotency key reused)
  6  the provider lacks the capability
  7  configuration (profile, plugin, missing extra, audit trail that fails
     verification)
  8  storage error
  9  unavailable (provider down, fail-closed audit trail cannot record)
\b
audit commands have their own: 1 BROKEN, 3 not a hash-chained trail, 4 no
trail there, 5 REFUSED (checkpoint or proof), 6 event outside the checkpoint
(see `governed-memory audit --help`)."""


def exit_code(code: str) -> int:
    """The exit code of an error family (``GovernedMemoryError.code``); 1 if unknown."""
    return EXIT_CODES.get(code, 1)
