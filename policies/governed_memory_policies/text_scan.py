"""What the secret guard and PII redaction find in a write, looked for the same way.

Both guards must refuse a write they cannot read, let through what stores no text, and
run their detectors over every field a write stores
(:mod:`governed_memory_policies.text_fields`); only what they do with a finding differs
(refuse, or redact). Scanning in one place keeps a field
or a kind of write from being covered by one guard and not the other.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from governed_memory.policy import PolicyCheck, PolicyVerdict

from governed_memory_policies.detection import Detector, find
from governed_memory_policies.text_fields import (
    TEXT_WRITES,
    WriteRequest,
    inspectable,
    stored_texts,
)


@attrs.frozen(slots=True)
class Findings:
    """A write that stores text, and the detectors that fired in it."""

    request: WriteRequest
    by_field: dict[str, set[str]]
    """Field category (``content``, ``metadata key``, …) → the names of the detectors
    that fired there; never empty."""


def scan(check: PolicyCheck, detectors: Sequence[Detector], looking_for: str
         ) -> PolicyVerdict | Findings:
    """What ``detectors`` find in the text ``check``'s request would store, or the
    verdict when there is nothing to act on: a denial for a write of a kind the guards
    cannot inspect (fail closed: it may carry ``looking_for``), an allowance for a
    request that stores no text, or text in which no detector fires."""
    request = check.request
    if not inspectable(request):
        return PolicyVerdict.deny(f"cannot inspect {check.operation.value} requests "
                                  f"for {looking_for}")
    if not isinstance(request, TEXT_WRITES):
        return PolicyVerdict.allow()
    found: dict[str, set[str]] = {}
    for field, text in stored_texts(request):
        for finding in find(text, detectors):
            found.setdefault(field, set()).add(finding.detector)
    if not found:
        return PolicyVerdict.allow()
    return Findings(request, found)
