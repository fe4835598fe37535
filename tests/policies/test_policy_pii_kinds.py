"""``pii-redaction``'s kinds beyond e-mail and phone (issue 28): payment cards, IBANs, US
social security numbers and IP addresses, each validated where a checksum or a parser
exists. A corpus of positives and near-misses, and properties: generated valid values
are found whole; the same values with a broken checksum are not."""

from __future__ import annotations

import ipaddress
import re
import string
from pathlib import Path

import pytest
from actors import ALICE_SCOPE
from governed_memory.errors import MemoryConfigurationError
from governed_memory.policy import Effect
from governed_memory.profiles.spec import PiiKind
from governed_memory.requests import AddRequest
from governed_memory_policies import pii_redaction
from governed_memory_policies.detection import Detector, find
from governed_memory_policies.pii_detectors import IBAN_LENGTHS, PII_DETECTORS
from hypothesis import given
from hypothesis import strategies as st
from policy_support import check, profile

DOC = (Path(__file__).resolve().parents[2] / "docs" / "domain-packs.md").read_text()


def detector(kind: str) -> Detector:
    return PII_DETECTORS[PiiKind(kind)]


def found(kind: str, text: str) -> list[str]:
    """What ``kind``'s detector alone finds in ``text``."""
    return [text[f.start:f.end] for f in find(text, [detector(kind)])]


POSITIVES = {
    "payment_card": [
        "4111 1111 1111 1111", "4111-1111-1111-1111", "4111111111111111",  # Visa
        "4222222222222",  # Visa, 13 digits
        "5555 5555 5555 4444", "2223 0031 2200 3222",  # Mastercard, both series
        "3782 822463 10005", "378282246310005",  # American Express, 4-6-5
        "6011 1111 1111 1117", "3530 1113 3330 0000",  # Discover, JCB
        "3056 930902 5904",  # Diners Club, 4-6-4
        "6200 0000 0000 0005", "6759 6498 2643 8453",  # UnionPay, Maestro
    ],
    "iban": [
        "GB82 WEST 1234 5698 7654 32", "GB82WEST12345698765432", "gb82west12345698765432",
        "DE89 3704 0044 0532 0130 00", "FR14 2004 1010 0505 0001 3M02 606",
        "NL91ABNA0417164300", "BE68 5390 0754 7034", "NO93 8601 1117 947",
    ],
    "ssn": ["123-45-6789", "078-05-1120", "219 09 9999", "899-99-9999", "001-01-0001"],
    "ipv4": ["192.168.1.10", "8.8.8.8", "203.0.113.7", "255.255.255.255"],
    "ipv6": ["2001:db8::1", "2001:0db8:85a3:0000:0000:8a2e:0370:7334", "fe80::1%eth0",
             "::ffff:192.0.2.1", "2001:db8:0:0:1:0:0:1"],
}

NEGATIVES = {
    "payment_card": [
        "4111111111111112",  # a 16-digit number failing Luhn
        "4111 1111 1111 1112",
        "1234567812345670",  # passes Luhn, but no card network starts with 1
        "order 2024-0001-5566-7788",  # an order number in card-like groups
        "4111 1111-1111 1111",  # two kinds of separator
        "41111111111111111111",  # 20 digits
        "ref 411111111111",  # 12 digits
        "ISBN 978-3-16-148410-0", "tracking 1Z999AA10123456784", "+44 20 7946 0958",
        "x4111111111111111",  # glued to a word
    ],
    "iban": [
        "GB82 WEST 1234 5698 7654 33",  # check digits wrong
        "XX82WEST12345698765432",  # no such country
        "GB82WEST123456987654",  # GB is 22 characters long
        "DE89 3704 0044 0532 0130 0",  # one short
        "DE89370400440532013000X",  # glued to more
        "GB00 0000 0000 0000 0000 00",
    ],
    "ssn": [
        "000-12-3456", "666-12-3456", "912-34-5678",  # areas never issued
        "123-00-4567", "123-45-0000",  # group 00, serial 0000
        "123456789",  # nine bare digits: an id as often as an SSN
        "123-45-67890", "1123-45-6789", "123-45 6789", "2024-05-02", "415-555-0132",
    ],
    "ipv4": [
        "256.1.1.1", "192.168.1.300", "01.02.03.04",  # out of range, leading zeros
        "1.2.3", "1.2.3.4.5", "v1.2.3.4",  # versions
        "127.0.0.1", "0.0.0.0",  # loopback and unspecified name no one
        "10:30:45",
    ],
    "ipv6": [
        "10:30:45", "12:30:45.123",  # times
        "00:1A:2B:3C:4D:5E",  # a MAC address
        "2001:db8::1::2",  # two ::
        "std::vector", "::1", "::",  # C++, loopback, unspecified
        "2001:db8:0:0:1:0:0:1:9",  # nine groups
        "gggg::1",
    ],
}


@pytest.mark.parametrize(("kind", "value"),
                         [(k, v) for k, values in POSITIVES.items() for v in values])
def test_a_valid_value_is_found_whole(kind: str, value: str) -> None:
    text = f"Client wrote: {value}. Please file it."
    assert found(kind, text) == [value]


@pytest.mark.parametrize(("kind", "value"),
                         [(k, v) for k, values in NEGATIVES.items() for v in values])
def test_a_near_miss_is_not_found(kind: str, value: str) -> None:
    assert found(kind, f"Client wrote: {value}. Please file it.") == []


def test_every_kind_has_a_detector_of_its_name() -> None:
    assert set(PII_DETECTORS) == set(PiiKind)
    assert all(d.name == kind.value for kind, d in PII_DETECTORS.items())


def test_an_unknown_kind_is_refused_when_the_profile_loads_and_the_valid_ones_are_named(
        ) -> None:
    with pytest.raises(MemoryConfigurationError,
                       match=r"privacy\.pii_kinds\[1\]: 'passport' is not one of email, phone, "
                             r"payment_card, iban, ssn, ipv4, ipv6"):
        profile(privacy={"pii_redaction": True, "pii_kinds": ["ssn", "passport"]},
                policies={"enabled": ["pii-redaction"]})


ALL_KINDS = profile(privacy={"pii_redaction": True, "pii_kinds": [k.value for k in PiiKind]},
                    policies={"enabled": ["pii-redaction"]})


async def redacted(text: str, kinds: list[str] | None = None) -> tuple[str, str]:
    spec = ALL_KINDS if kinds is None else profile(
        privacy={"pii_redaction": True, "pii_kinds": kinds},
        policies={"enabled": ["pii-redaction"]})
    verdict = await pii_redaction.build({}, spec).evaluate(
        check(AddRequest(scope=ALICE_SCOPE, content=text)))
    assert verdict.effect is Effect.ALLOW
    if verdict.request is None:
        return text, verdict.reason
    assert isinstance(verdict.request, AddRequest)
    return verdict.request.content, verdict.reason


async def test_every_kind_is_redacted_by_its_name() -> None:
    text = ("SSN 123-45-6789, card 4111 1111 1111 1111, IBAN GB82 WEST 1234 5698 7654 32, "
            "from 203.0.113.7 and 2001:db8::7, mail a@example.com, call +44 20 7946 0958")
    content, reason = await redacted(text)
    assert content == ("SSN [REDACTED:ssn], card [REDACTED:payment_card], IBAN "
                       "[REDACTED:iban], from [REDACTED:ipv4] and [REDACTED:ipv6], mail "
                       "[REDACTED:email], call [REDACTED:phone]")
    assert reason == "redacted email, iban, ipv4, ipv6, payment_card, phone, ssn"


async def test_only_the_listed_kinds_are_redacted() -> None:
    text = "SSN 123-45-6789 from 203.0.113.7"
    assert (await redacted(text, ["ssn"]))[0] == "SSN [REDACTED:ssn] from 203.0.113.7"
    assert (await redacted(text, ["ipv4"]))[0] == "SSN 123-45-6789 from [REDACTED:ipv4]"


async def test_ordinary_text_with_numbers_is_left_alone() -> None:
    text = ("Order 4111111111111112 (ref 2024-0001-5566-7788) shipped 2024-05-02 at 10:30:45 "
            "from 127.0.0.1 by build v1.2.3.4; ISBN 978-3-16-148410-0, case 123456789, "
            "MAC 00:1A:2B:3C:4D:5E, total 1,234.56")
    assert await redacted(text) == (text, "")


async def test_the_validated_kind_names_a_tie_whatever_the_profile_order() -> None:
    # 078-05-1120 has a phone's shape too (a national trunk 0 and groups).
    for kinds in (["phone", "ssn"], ["ssn", "phone"]):
        assert (await redacted("SSN 078-05-1120", kinds))[0] == "SSN [REDACTED:ssn]"


# -- properties ------------------------------------------------------------------------------

NETWORKS = [("4", 16), ("4", 13), ("4", 19), ("51", 16), ("55", 16), ("2221", 16),
            ("2720", 16), ("34", 15), ("37", 15), ("6011", 16), ("6011", 19), ("65", 16),
            ("3528", 16), ("3589", 19), ("36", 14), ("62", 17), ("644", 16)]


def luhn_digit(body: str) -> str:
    total = 0
    for index, char in enumerate(reversed(body)):
        value = int(char) * (2 if index % 2 == 0 else 1)
        total += value - 9 if value > 9 else value
    return str((10 - total % 10) % 10)


@st.composite
def cards(draw: st.DrawFn) -> str:
    prefix, length = draw(st.sampled_from(NETWORKS))
    body = prefix + "".join(draw(st.lists(st.sampled_from(string.digits),
                                          min_size=length - len(prefix) - 1,
                                          max_size=length - len(prefix) - 1)))
    return body + luhn_digit(body)


def printed(number: str, separator: str) -> str:
    if not separator:
        return number
    if len(number) == 15:
        return separator.join((number[:4], number[4:10], number[10:]))
    return separator.join(number[i:i + 4] for i in range(0, len(number), 4))


def mutated(value: str, position: int, digit: int) -> str:
    """``value`` with the digit at ``position`` (among its digits) changed."""
    places = [i for i, c in enumerate(value) if c.isdigit()]
    at = places[position % len(places)]
    new = str((int(value[at]) + 1 + digit % 9) % 10)
    return value[:at] + new + value[at + 1:]


@given(cards(), st.sampled_from(["", " ", "-"]))
def test_a_generated_card_is_found(number: str, separator: str) -> None:
    value = printed(number, separator) if len(number) in (15, 16) else number
    assert found("payment_card", f"pay with {value} today") == [value]


@given(cards(), st.integers(0, 18), st.integers(0, 8))
def test_a_card_with_one_digit_changed_is_not_found(number: str, position: int,
                                                    digit: int) -> None:
    # Luhn catches every single-digit error.
    assert found("payment_card", f"pay with {mutated(number, position, digit)}") == []


@st.composite
def ibans(draw: st.DrawFn) -> str:
    country = draw(st.sampled_from(sorted(IBAN_LENGTHS)))
    bban = "".join(draw(st.lists(st.sampled_from(string.digits + string.ascii_uppercase),
                                 min_size=IBAN_LENGTHS[country] - 4,
                                 max_size=IBAN_LENGTHS[country] - 4)))
    number = int("".join(str(int(c, 36)) for c in bban + country + "00"))
    return f"{country}{98 - number % 97:02d}{bban}"


def grouped(iban: str) -> str:
    return " ".join(iban[i:i + 4] for i in range(0, len(iban), 4))


@given(ibans(), st.booleans())
def test_a_generated_iban_is_found(iban: str, spaced: bool) -> None:
    value = grouped(iban) if spaced else iban
    assert found("iban", f"wire to {value}, thanks") == [value]


@given(ibans(), st.integers(0, 40), st.integers(0, 8))
def test_an_iban_with_one_digit_changed_is_not_found(iban: str, position: int,
                                                     digit: int) -> None:
    # Mod 97 catches every single substitution of a digit (check digits included).
    changed = iban[:2] + mutated(iban[2:], position, digit)
    assert found("iban", f"wire to {changed}, thanks") == []


ISSUED_AREAS = [a for a in range(1, 900) if a != 666]


@st.composite
def ssns(draw: st.DrawFn) -> tuple[int, int, int]:
    return (draw(st.sampled_from(ISSUED_AREAS)), draw(st.integers(1, 99)),
            draw(st.integers(1, 9999)))


@given(ssns(), st.sampled_from(["-", " "]))
def test_a_generated_ssn_is_found(parts: tuple[int, int, int], separator: str) -> None:
    area, group, serial = parts
    value = f"{area:03d}{separator}{group:02d}{separator}{serial:04d}"
    assert found("ssn", f"SSN {value}.") == [value]


@given(ssns(), st.sampled_from(["area 000", "area 666", "area 9xx", "group", "serial"]),
       st.integers(900, 999))
def test_an_ssn_that_is_never_issued_is_not_found(parts: tuple[int, int, int], broken: str,
                                                  high: int) -> None:
    area, group, serial = parts
    if broken.startswith("area"):
        area = {"area 000": 0, "area 666": 666, "area 9xx": high}[broken]
    elif broken == "group":
        group = 0
    else:
        serial = 0
    assert found("ssn", f"SSN {area:03d}-{group:02d}-{serial:04d}.") == []


@given(st.ip_addresses(v=4))
def test_a_generated_ipv4_address_is_found_unless_it_names_no_one(
        address: ipaddress.IPv4Address) -> None:
    value = str(address)
    expected = [] if address.is_loopback or address.is_unspecified else [value]
    assert found("ipv4", f"seen from {value}.") == expected


@given(st.ip_addresses(v=6))
def test_a_generated_ipv6_address_is_found_unless_it_names_no_one(
        address: ipaddress.IPv6Address) -> None:
    value = str(address)
    expected = [] if address.is_loopback or address.is_unspecified else [value]
    assert found("ipv6", f"seen from {value} today") == expected


# -- the docs --------------------------------------------------------------------------------


def test_the_guide_lists_every_kind() -> None:
    start = DOC.index("### Personal data kinds")
    section = DOC[start:DOC.index("\n## ", start)]
    rows = re.findall(r"^\| `([a-z0-9_]+)` \|", section, re.M)
    assert rows == [k.value for k in PiiKind]
