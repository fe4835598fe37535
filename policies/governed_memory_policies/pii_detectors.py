"""Detectors for personal data, one per ``privacy.pii_kinds`` name.

A pattern finds candidates; where the kind has a checksum or a registry, the candidate
must pass it too, so an order number, a tracking id or a 16-digit reference that fails
Luhn is not redacted as a card:

- ``payment_card``: 13 to 19 digits, unbroken or in the printed groups (4-4-4-4…,
  Amex 4-6-5, Diners 4-6-4) with one kind of separator, a known network's IIN prefix
  and length, and the Luhn check digit;
- ``iban``: a country code of the IBAN registry, two check digits and exactly that
  country's length (ISO 13616), unbroken or grouped by spaces, whose mod-97 is 1;
- ``ssn``: a US social security number written ``AAA-GG-SSSS`` (or with spaces), with
  an area that is issued (not 000, 666 or 900-999), a group other than 00 and a serial
  other than 0000; nine bare digits are not taken (too many other numbers look so);
- ``ipv4``, ``ipv6``: what :mod:`ipaddress` parses (no octet above 255, no leading
  zeros, one ``::`` at most), except the unspecified and loopback addresses
  (``0.0.0.0``, ``127.0.0.1``, ``::``, ``::1``), which name no one;
- ``email`` and ``phone`` by shape: phone formats vary by country, so a phone is an
  international ``+`` prefix, North American grouping or a national trunk ``0`` with
  grouped digits, then 7 to 15 digits (the E.164 range), which keeps dates, versions
  and ids out.

:data:`PII_DETECTORS` lists the validated kinds first: where two findings start at the
same place with the same length, the validated one names it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Final

from governed_memory.profiles.spec import PiiKind

from governed_memory_policies.detection import Detector

# -- payment cards --------------------------------------------------------------------------

_CARD_RANGES: Final[tuple[tuple[int, int, frozenset[int]], ...]] = (
    # (lowest prefix, highest prefix, lengths); a prefix has as many digits as `lowest`.
    (4, 4, frozenset({13, 16, 19})),                   # Visa
    (51, 55, frozenset({16})),                         # Mastercard
    (2221, 2720, frozenset({16})),                     # Mastercard 2-series
    (34, 34, frozenset({15})),                         # American Express
    (37, 37, frozenset({15})),
    (6011, 6011, frozenset(range(16, 20))),            # Discover
    (644, 649, frozenset(range(16, 20))),
    (65, 65, frozenset(range(16, 20))),
    (3528, 3589, frozenset(range(16, 20))),            # JCB
    (300, 305, frozenset(range(14, 20))),              # Diners Club
    (36, 36, frozenset(range(14, 20))),
    (38, 39, frozenset(range(16, 20))),
    (62, 62, frozenset(range(16, 20))),                # UnionPay
    (5018, 5018, frozenset(range(13, 20))),            # Maestro
    (5020, 5020, frozenset(range(13, 20))),
    (5038, 5038, frozenset(range(13, 20))),
    (5893, 5893, frozenset(range(13, 20))),
    (6304, 6304, frozenset(range(13, 20))),
    (6759, 6759, frozenset(range(13, 20))),
    (6761, 6763, frozenset(range(13, 20))),
)
"""Issuer identification number prefixes of the common card networks, with the
lengths each issues."""


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) check over a string of digits, check digit last."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def card_network_known(digits: str) -> bool:
    """The number starts with a known network's prefix and has a length it issues."""
    for low, high, lengths in _CARD_RANGES:
        width = len(str(low))
        if len(digits) in lengths and low <= int(digits[:width]) <= high:
            return True
    return False


def _payment_card(value: str) -> bool:
    digits = value.replace(" ", "").replace("-", "")
    return card_network_known(digits) and luhn_valid(digits)


PAYMENT_CARD: Final = Detector("payment_card", re.compile(
    r"(?<![\w\-])(?:"
    r"\d{4}(?P<sep>[ \-])\d{4}(?P=sep)\d{4}(?P=sep)\d{1,4}(?:(?P=sep)\d{1,3})?"  # 4-4-4-4(-3)
    r"|\d{4}(?P<wide>[ \-])\d{6}(?P=wide)\d{4,5}"  # Amex 4-6-5, Diners 4-6-4
    r"|\d{13,19}"
    r")(?![\w\-])"), _payment_card)

# -- IBAN -----------------------------------------------------------------------------------

IBAN_LENGTHS: Final[Mapping[str, int]] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
    "BH": 22, "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24,
    "DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
    "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27,
    "GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20,
    "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20,
    "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
    "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
    "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
    "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
    "YE": 30,
}
"""Each country's IBAN length (SWIFT's IBAN registry, ISO 13616)."""


def _iban_pattern() -> re.Pattern[str]:
    """One alternative per length, so that a candidate is exactly its country's length
    (a grouped IBAN followed by another word is not swallowed whole, then refused)."""
    by_length: dict[int, list[str]] = {}
    for country, length in sorted(IBAN_LENGTHS.items()):
        by_length.setdefault(length, []).append(country)
    alternatives = [f"(?:{'|'.join(countries)})\\d{{2}}(?: ?[A-Z0-9]){{{length - 4}}}"
                    for length, countries in sorted(by_length.items(), reverse=True)]
    return re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(alternatives) + r")(?![A-Za-z0-9])",
                      re.IGNORECASE)


def iban_valid(value: str) -> bool:
    """Registry length for its country and ISO 7064 mod 97-10 equal to 1."""
    compact = value.replace(" ", "").upper()
    if IBAN_LENGTHS.get(compact[:2]) != len(compact) or not compact.isalnum():
        return False
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(char, 36)) for char in rearranged)
    return int(number) % 97 == 1


IBAN: Final = Detector("iban", _iban_pattern(), iban_valid)

# -- US social security numbers -------------------------------------------------------------


def ssn_valid(value: str) -> bool:
    """Issuable: area not 000, 666 or 9xx; group not 00; serial not 0000."""
    area, group, serial = value[0:3], value[4:6], value[7:11]
    return (area not in ("000", "666") and not area.startswith("9") and group != "00"
            and serial != "0000")


SSN: Final = Detector("ssn", re.compile(
    r"(?<![\w\-])\d{3}(?P<sep>[\- ])\d{2}(?P=sep)\d{4}(?![\w\-])"), ssn_valid)

# -- IP addresses ---------------------------------------------------------------------------


def _ip_personal(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return not (address.is_unspecified or address.is_loopback)


def ipv4_valid(value: str) -> bool:
    try:
        return _ip_personal(ipaddress.IPv4Address(value))
    except ValueError:
        return False


def ipv6_valid(value: str) -> bool:
    try:
        return _ip_personal(ipaddress.IPv6Address(value))
    except ValueError:
        return False


IPV4: Final = Detector("ipv4", re.compile(
    r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\w|\.\d)"), ipv4_valid)

IPV6: Final = Detector("ipv6", re.compile(
    r"(?<![\w:.])"
    r"(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{0,4})"
    r"(?:%[A-Za-z0-9_.\-]*[A-Za-z0-9_])?"  # a zone: fe80::1%eth0
    r"(?![\w:]|\.\w)"), ipv6_valid)

# -- contact details ------------------------------------------------------------------------


def _phone_digits(value: str) -> bool:
    digits = sum(c.isdigit() for c in value)
    return 7 <= digits <= 15


EMAIL: Final = Detector("email", re.compile(
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}(?![A-Za-z0-9\-])"))

PHONE: Final = Detector("phone", re.compile(
    r"(?<![\w+\-])(?:"  # not the tail of a longer dashed number (2024-0001-5566-7788)
    r"\+\d{1,3}(?:[ .\-]?\(?\d{1,4}\)?){1,5}(?:[ .\-]?\d{2,4})"  # +44 20 7946 0958
    r"|\(\d{3}\)[ .\-]?\d{3}[ .\-]\d{4}"  # (415) 555-0132
    r"|\d{3}[.\-]\d{3}[.\-]\d{4}"  # 415-555-0132
    r"|\d{3} \d{3} \d{4}"  # 415 555 0132
    r"|0\d{1,4}(?:[ .\-]\d{2,4}){2,4}"  # 020 7946 0958, 06 12 34 56 78
    r")(?![\w\-])"), _phone_digits)

PII_DETECTORS: Final[Mapping[PiiKind, Detector]] = {
    PiiKind.PAYMENT_CARD: PAYMENT_CARD,
    PiiKind.IBAN: IBAN,
    PiiKind.SSN: SSN,
    PiiKind.IPV6: IPV6,
    PiiKind.IPV4: IPV4,
    PiiKind.EMAIL: EMAIL,
    PiiKind.PHONE: PHONE,
}
"""Every kind's detector, validated kinds first (the order ties are broken in)."""
