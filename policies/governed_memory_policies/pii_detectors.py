"""Detectors for personal contact data: e-mail addresses and phone numbers.

Phone formats vary by country, so matching is by shape (an international ``+`` prefix,
North American grouping, or a national trunk ``0`` with grouped digits) and then by
digit count (7 to 15, the E.164 range), which keeps dates, versions and ids out.
"""

from __future__ import annotations

import re
from typing import Final

from governed_memory.profiles.spec import PiiKind

from governed_memory_policies.detection import Detector


def _phone_digits(value: str) -> bool:
    digits = sum(c.isdigit() for c in value)
    return 7 <= digits <= 15


EMAIL: Final = Detector("email", re.compile(
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}(?![A-Za-z0-9\-])"))

PHONE: Final = Detector("phone", re.compile(
    r"(?<![\w+])(?:"
    r"\+\d{1,3}(?:[ .\-]?\(?\d{1,4}\)?){1,5}(?:[ .\-]?\d{2,4})"  # +44 20 7946 0958
    r"|\(\d{3}\)[ .\-]?\d{3}[ .\-]\d{4}"  # (415) 555-0132
    r"|\d{3}[.\-]\d{3}[.\-]\d{4}"  # 415-555-0132
    r"|\d{3} \d{3} \d{4}"  # 415 555 0132
    r"|0\d{1,4}(?:[ .\-]\d{2,4}){2,4}"  # 020 7946 0958, 06 12 34 56 78
    r")(?![\w\-])"), _phone_digits)

PII_DETECTORS: Final = {PiiKind.EMAIL: EMAIL, PiiKind.PHONE: PHONE}
