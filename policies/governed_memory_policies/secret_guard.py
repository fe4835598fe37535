"""``secret-guard``: credentials never become memories.

``reject`` refuses the write; ``redact`` stores it with each credential replaced by
``[REDACTED:<detector>]``. Either way the decision's reason names the detectors and the
kind of field (content, key, metadata, provenance), never the credential, so the event
trail cannot leak what the guard caught. A credential in a metadata *key* is refused
even when redacting: renaming keys could silently merge two of them. Conversation turns
and working state are guarded the same way (see ``text_fields``), and a write of a kind
the guard cannot inspect is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from governed_memory.policy import PolicyCheck, PolicyVerdict
from governed_memory.profiles.spec import MemoryProfileSpec, PrivacySection, SecretGuardMode

from governed_memory_policies.base import config_revision, no_extra_config
from governed_memory_policies.detection import Detector, find, redact
from governed_memory_policies.names import SECRET_GUARD
from governed_memory_policies.secret_detectors import SECRET_DETECTORS
from governed_memory_policies.text_fields import rewrite_texts
from governed_memory_policies.text_scan import scan


def detect(text: str, detectors: tuple[Detector, ...] = SECRET_DETECTORS) -> list[str]:
    """The names of the detectors that fire on ``text`` (for measurement and tests)."""
    return sorted({finding.detector for finding in find(text, detectors)})


class SecretGuardPolicy:
    name = SECRET_GUARD

    def __init__(self, mode: SecretGuardMode,
                 detectors: tuple[Detector, ...] = SECRET_DETECTORS) -> None:
        self.mode = mode
        self.detectors = detectors
        self.revision = config_revision(self.name, "1", [mode.value,
                                                         [d.name for d in detectors]])

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        if self.mode is SecretGuardMode.OFF:
            return PolicyVerdict.allow()
        scanned = scan(check, self.detectors, "secrets")
        if isinstance(scanned, PolicyVerdict):
            return scanned
        found = scanned.by_field
        summary = "; ".join(f"{', '.join(sorted(names))} in {field}"
                            for field, names in sorted(found.items()))
        if (self.mode is SecretGuardMode.REJECT or "metadata key" in found
                or "state key" in found):
            return PolicyVerdict.deny(f"secret detected: {summary}")
        redacted = rewrite_texts(scanned.request, self._redact)
        return PolicyVerdict.transform(redacted, f"secret redacted: {summary}")

    def _redact(self, text: str) -> str:
        return redact(text, find(text, self.detectors))


def build(config: Mapping[str, Any], profile: MemoryProfileSpec) -> SecretGuardPolicy:
    no_extra_config(SECRET_GUARD, "privacy", config)
    privacy: PrivacySection = profile.privacy
    return SecretGuardPolicy(privacy.secret_guard)
