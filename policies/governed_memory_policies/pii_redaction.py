"""``pii-redaction``: personal data of the kinds a profile lists replaced before storage.

Off by default (``privacy.pii_redaction = false``): contact details are often exactly
what an assistant should remember. When on, each finding of a kind in
``privacy.pii_kinds`` (``email``, ``phone``, ``payment_card``, ``iban``, ``ssn``,
``ipv4``, ``ipv6``; :mod:`governed_memory_policies.pii_detectors` says how each is
found and validated) becomes ``[REDACTED:<kind>]`` in content, key, metadata values and
provenance; a metadata *key* holding one is refused instead (renaming keys could merge
two of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from governed_memory.policy import PolicyCheck, PolicyVerdict
from governed_memory.profiles.spec import MemoryProfileSpec, PiiKind

from governed_memory_policies.base import config_revision, no_extra_config
from governed_memory_policies.detection import find, redact
from governed_memory_policies.names import PII_REDACTION
from governed_memory_policies.pii_detectors import PII_DETECTORS
from governed_memory_policies.text_fields import (
    TEXT_WRITES,
    inspectable,
    rewrite_texts,
    stored_texts,
)


class PiiRedactionPolicy:
    name = PII_REDACTION

    def __init__(self, enabled: bool, kinds: tuple[PiiKind, ...]) -> None:
        self.enabled = enabled
        self.kinds = kinds
        # In the detectors' own order, not the profile's: where two findings tie, the
        # validated kind (a card, an IBAN) names it rather than the shape (a phone).
        self.detectors = tuple(d for kind, d in PII_DETECTORS.items() if kind in kinds)
        self.revision = config_revision(self.name, "1", [enabled, [k.value for k in kinds]])

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        request = check.request
        if not self.enabled:
            return PolicyVerdict.allow()
        if not inspectable(request):
            return PolicyVerdict.deny(f"cannot inspect {check.operation.value} requests "
                                      "for personal data")
        if not isinstance(request, TEXT_WRITES):
            return PolicyVerdict.allow()
        found: dict[str, set[str]] = {}
        for field, text in stored_texts(request):
            for finding in find(text, self.detectors):
                found.setdefault(field, set()).add(finding.detector)
        if not found:
            return PolicyVerdict.allow()
        for key_field in ("metadata key", "state key"):
            if key_field in found:
                return PolicyVerdict.deny(f"personal data in a {key_field}: "
                                          + ", ".join(sorted(found[key_field])))
        kinds = set().union(*found.values())
        redacted = rewrite_texts(request, lambda text: redact(text, find(text, self.detectors)))
        return PolicyVerdict.transform(redacted, "redacted " + ", ".join(sorted(kinds)))


def build(config: Mapping[str, Any], profile: MemoryProfileSpec) -> PiiRedactionPolicy:
    no_extra_config(PII_REDACTION, "privacy", config)
    return PiiRedactionPolicy(profile.privacy.pii_redaction, profile.privacy.pii_kinds)
