"""Pattern detectors shared by the secret guard and PII redaction.

A detector is a regular expression plus an optional plausibility check on what it
matched. The expression finds candidates cheaply; the check removes the look-alikes a
pattern alone cannot (documentation placeholders such as ``password=<your password>``,
prose such as "password is required"). Only the part named by the ``secret`` group
(or the whole match) is reported and redacted, so ``password=`` stays readable.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

import attrs


@attrs.frozen(slots=True)
class Detector:
    name: str
    pattern: re.Pattern[str]
    plausible: Callable[[str], bool] | None = None

    def spans(self, text: str) -> list[tuple[int, int]]:
        found = []
        for match in self.pattern.finditer(text):
            group = "secret" if "secret" in self.pattern.groupindex else 0
            start, end = match.span(group)
            if start == end:
                continue
            if self.plausible is None or self.plausible(text[start:end]):
                found.append((start, end))
        return found


@attrs.frozen(slots=True)
class Finding:
    detector: str
    start: int
    end: int


def find(text: str, detectors: Sequence[Detector]) -> list[Finding]:
    """Non-overlapping findings in text order. Where two detectors overlap, the span that
    starts first wins, then the longer, then the detector listed first (more specific
    detectors are listed before generic ones)."""
    candidates = [
        (start, -(end - start), rank, Finding(detector.name, start, end))
        for rank, detector in enumerate(detectors)
        for start, end in detector.spans(text)
    ]
    candidates.sort(key=lambda c: c[:3])
    kept: list[Finding] = []
    for _, _, _, finding in candidates:
        if kept and finding.start < kept[-1].end:
            continue
        kept.append(finding)
    return kept


def redact(text: str, findings: Iterable[Finding]) -> str:
    """Each finding replaced by ``[REDACTED:<detector>]``."""
    parts, cursor = [], 0
    for finding in sorted(findings, key=lambda f: f.start):
        parts.append(text[cursor:finding.start])
        parts.append(f"[REDACTED:{finding.detector}]")
        cursor = finding.end
    parts.append(text[cursor:])
    return "".join(parts)
