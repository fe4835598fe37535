"""Detectors for credentials people paste into chats and agents paste into tool output.

Provider-issued keys have fixed prefixes and alphabets and are matched exactly.
Generic forms (bearer tokens, ``password=`` pairs, credentials in URLs) are matched by
shape and then checked for plausibility: a real credential is not a placeholder from
documentation and, for free-standing tokens, looks random (it mixes letters and digits).
Order matters: specific detectors come first so a GitHub token inside ``token=…`` is
reported as ``github_token``.
"""

from __future__ import annotations

import re
from typing import Final

from governed_memory_policies.detection import Detector

_PLACEHOLDER_WORDS: Final = frozenset({
    "password", "passwd", "pass", "pwd", "secret", "token", "changeme", "change_me",
    "example", "sample", "dummy", "test", "none", "null", "nil", "true", "false",
    "undefined", "empty", "required", "optional", "redacted", "hidden", "masked",
    "mypassword", "yourpassword", "your_password", "your-password", "pa55word",
    "user", "username", "api_key", "apikey", "key", "value", "string", "str",
})
_PLACEHOLDER_PARTS: Final = ("your", "example", "placeholder", "redacted", "xxxx", "...",
                             "***", "…")
# Template and environment references: <password>, {{ pass }}, ${DB_PASS}, $DB_PASS, %(pw)s
_REFERENCE: Final = re.compile(
    r"<[^<>]*>|\{\{.*\}\}|\$\{[^}]*\}|\$[A-Z_][A-Z0-9_]*|%\(\w+\)s|\[[^\[\]]*\]")


def is_placeholder(value: str) -> bool:
    """Documentation stand-ins rather than credentials: ``<password>``, ``${DB_PASS}``,
    ``********``, ``your-api-key``, ``changeme``."""
    text = value.strip().strip("\"'`")
    lowered = text.lower()
    if not text or lowered in _PLACEHOLDER_WORDS:
        return True
    if len(set(lowered)) <= 2:  # "xxxxxxxx", "********", "aaaa"
        return True
    if _REFERENCE.fullmatch(text):
        return True
    return any(part in lowered for part in _PLACEHOLDER_PARTS)


def looks_random(value: str) -> bool:
    """Letters and digits mixed, as in every generated credential, and not a stand-in."""
    has_letter = any(c.isalpha() for c in value)
    has_digit = any(c.isdigit() for c in value)
    return has_letter and has_digit and not is_placeholder(value)


def _generated_key(value: str) -> bool:
    """A generated key has a long unbroken random run; ``sk-learn-is-great-2024`` does
    not."""
    longest = max((len(run) for run in re.split(r"[^A-Za-z0-9]", value)), default=0)
    return longest >= 16 and looks_random(value)


def _spoken_secret(value: str) -> bool:
    """A value after ``password:`` / ``password is`` / ``password`` in prose: refuse
    ordinary words ("password is required", "password manager"), keep anything of six
    or more characters with a digit or a symbol in it."""
    value = value.rstrip(".!?)")
    if is_placeholder(value) or len(value) < 6:
        return False
    return any(not c.isalpha() for c in value)


def _assigned_secret(value: str) -> bool:
    """A value in ``password=…`` configuration syntax: anything but a stand-in."""
    return len(value) >= 4 and not is_placeholder(value)


def _rx(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


_B = r"(?<![A-Za-z0-9_])"  # start of a token
_E = r"(?![A-Za-z0-9_])"  # end of a token
_URL_SCHEMES_DB: Final = (
    r"(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver|"
    r"oracle|cockroachdb|clickhouse|cassandra|neo4j(?:\+s)?|couchdb|memcached|ldaps?)"
    r"(?:\+[a-z0-9]+)?"
)

SECRET_DETECTORS: Final[tuple[Detector, ...]] = (
    Detector("private_key", _rx(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)")),
    Detector("aws_access_key_id", _rx(rf"{_B}(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{{16}}{_E}")),
    Detector("aws_secret_access_key", _rx(
        r"(?i)aws[\w.\-]{0,24}(?:secret|private)[\w.\-]{0,24}[\"']?\s*(?:[:=]|=>)\s*[\"']?"
        r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])")),
    Detector("github_token", _rx(
        rf"{_B}(?:(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{{36,255}}|github_pat_[A-Za-z0-9_]{{22,255}}){_E}")),
    Detector("gitlab_token", _rx(rf"{_B}glpat-[A-Za-z0-9_\-]{{20,}}")),
    Detector("anthropic_api_key", _rx(rf"{_B}sk-ant-[A-Za-z0-9_\-]{{20,}}"), _generated_key),
    Detector("openai_api_key", _rx(
        rf"{_B}sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{{20,}}"), _generated_key),
    Detector("stripe_secret_key", _rx(rf"{_B}(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{{16,}}{_E}")),
    Detector("stripe_webhook_secret", _rx(rf"{_B}whsec_[A-Za-z0-9+/]{{24,}}")),
    Detector("slack_token", _rx(rf"{_B}xox[abprse]-[0-9]+-[A-Za-z0-9\-]{{10,}}")),
    Detector("slack_webhook", _rx(
        r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]{20,}")),
    Detector("google_api_key", _rx(r"(?<![A-Za-z0-9_\-])AIza[0-9A-Za-z_\-]{35}(?![A-Za-z0-9_\-])")),
    Detector("google_oauth_token", _rx(rf"{_B}ya29\.[0-9A-Za-z_\-]{{20,}}")),
    Detector("sendgrid_api_key", _rx(rf"{_B}SG\.[A-Za-z0-9_\-]{{22}}\.[A-Za-z0-9_\-]{{43}}{_E}")),
    Detector("npm_token", _rx(rf"{_B}npm_[A-Za-z0-9]{{36}}{_E}")),
    Detector("pypi_token", _rx(rf"{_B}pypi-AgE[A-Za-z0-9_\-]{{50,}}")),
    Detector("huggingface_token", _rx(rf"{_B}hf_[A-Za-z0-9]{{30,}}{_E}"), looks_random),
    Detector("azure_storage_key", _rx(
        r"(?i)AccountKey\s*=\s*(?P<secret>[A-Za-z0-9+/]{40,}={0,2})")),
    Detector("jwt", _rx(
        r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    Detector("basic_auth", _rx(
        r"(?i)authorization[\"']?\s*[:=]\s*[\"']?basic\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})")),
    Detector("bearer_token", _rx(
        r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)"), looks_random),
    Detector("connection_string", _rx(
        rf"(?i){_B}{_URL_SCHEMES_DB}://[^\s:/@]*:(?P<secret>[^\s@/]+)@[^\s/@]"),
        lambda v: not is_placeholder(v)),
    Detector("url_password", _rx(
        r"(?i)(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]{0,31}://[^\s:/@]+:(?P<secret>[^\s@/]+)@[^\s/@]"),
        lambda v: not is_placeholder(v)),
    Detector("password_assignment", _rx(
        r"(?i)(?<![A-Za-z0-9])(?:password|passwd|passwort|passphrase|pwd|pass)[\"']?"
        r"\s*(?:=|=>|:=)\s*[\"']?(?P<secret>[^\s\"',;&<>]+)"), _assigned_secret),
    Detector("password_assignment", _rx(
        r"(?i)(?<![A-Za-z0-9])(?:password|passwd|passphrase|pwd)[\"']?"
        r"(?:\s*:\s*|\s+is\s+)[\"']?(?P<secret>[^\s\"',;&<>]+)"), _spoken_secret),
    Detector("password_assignment", _rx(
        r"(?i)(?<![A-Za-z0-9])(?:password|passphrase)\s+[\"']?(?P<secret>[^\s\"',;&<>]+)"),
        _spoken_secret),
    Detector("secret_assignment", _rx(
        r"(?i)(?<![A-Za-z0-9])(?:api[_\-]?key|apikey|secret[_\-]?key|client[_\-]?secret|"
        r"access[_\-]?token|auth[_\-]?token|refresh[_\-]?token|private[_\-]?key|"
        r"signing[_\-]?key|secret|token)[\"']?\s*(?:[:=]|=>)\s*[\"']?"
        r"(?P<secret>[A-Za-z0-9_\-+/=.~]{12,})"), looks_random),
)
"""Detector names are what events report; the matched text never leaves this module."""
