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
from governed_memory_policies.text_fields import rewrite_texts
from governed_memory_policies.text_scan import scan


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
        if not self.enabled:
            return PolicyVerdict.allow()
        scanned = scan(check, self.detectors, "personal data")
        if isinstance(scanned, PolicyVerdict):
            return scanned
        found = scanned.by_field
        for key_field in ("metadata key", "state key"):
            if key_field in found:
                return PolicyVerdict.deny(f"personal data in a {key_field}: "
                                          + ", ".join(sorted(found[key_field])))
        kinds = set().union(*found.values())
        redacted = rewrite_texts(scanned.request,
                                 lambda text: redact(text, find(text, self.detectors)))
        return PolicyVerdict.transform(redacted, "redacted " + ", ".join(sorted(kinds)))


def build(config: Mapping[str, Any], profile: MemoryProfileSpec) -> PiiRedactionPolicy:
    no_extra_config(PII_REDACTION, "privacy", config)
    return PiiRedactionPolicy(profile.privacy.pii_redaction, profile.privacy.pii_kinds)
