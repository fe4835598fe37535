"""Points in time as an auditor types them, and as the audit commands print them.

``--since``/``--until`` take an absolute time (epoch seconds, or ISO 8601) or a time
ago, counted back from now: ``90s``, ``30m``, ``1h``, ``2d``, ``1w`` (compounds too:
``1h30m``), or in words (``1 hour ago``, ``2 days ago``, ``1 hour 30 minutes ago``;
``ago`` may be left out), or ``now``. A month
or a year is not a fixed number of seconds, so neither is offered; ``m`` is minutes.
Anything else is refused with the forms this accepts (:data:`ACCEPTED`), never guessed.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Final

ACCEPTED: Final = ("epoch seconds (1764547200), ISO 8601 (2026-12-01, "
                   "2026-12-01T09:30:00Z; UTC when it names no offset), a time ago "
                   "(90s, 30m, 1h, 2d, 1w, 1h30m) or in words (\"1 hour ago\", "
                   "\"2 days ago\", \"30 minutes ago\"), or now")
"""What :func:`parse_time` takes, as an error message lists it."""

_SECONDS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_WORDS: Final = {
    **{word: "s" for word in ("second", "seconds", "sec", "secs")},
    **{word: "m" for word in ("minute", "minutes", "min", "mins")},
    **{word: "h" for word in ("hour", "hours", "hr", "hrs")},
    **{word: "d" for word in ("day", "days")},
    **{word: "w" for word in ("week", "weeks")},
}
_NUMBER: Final = r"(\d+(?:\.\d+)?)"
_SHORT: Final = re.compile(rf"(?:{_NUMBER}([smhdw])\s*)+")
_SHORT_PART: Final = re.compile(rf"{_NUMBER}([smhdw])")
_SPOKEN: Final = re.compile(rf"(?:(?:{_NUMBER}\s*|an?\s+)[a-z]+(?:\s*,\s*|\s+and\s+|\s+)?)+")
_SPOKEN_PART: Final = re.compile(rf"(?:{_NUMBER}\s*|an?\s+)([a-z]+)")
_AGO: Final = re.compile(r"\s+ago$", re.IGNORECASE)


def parse_time(text: str, now: float) -> float:
    """``text`` as epoch seconds; a time ago counts back from ``now`` (epoch seconds).
    Raises ``ValueError`` naming the value and listing :data:`ACCEPTED`."""
    value = text.strip()
    ago = _ago(value)
    if ago is not None:
        return now - ago
    if value.lower() == "now":
        return now
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        if math.isfinite(seconds):
            return seconds
        raise ValueError(f"not a time: {text!r}; give {ACCEPTED}")
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"not a time: {text!r}; give {ACCEPTED}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


def _ago(text: str) -> float | None:
    """Seconds in a time ago (``1h30m``, ``2 days ago``; ``ago`` may be left out), or
    ``None`` if it is none. A leading minus says "ago" as well (``-24h``, ``- 2 days``:
    how many tools spell a time ago), so it takes the same durations but not ``ago`` too
    (``-1h ago`` would say it twice and is refused, as is ``--1h``); a minus before a
    bare number is left to epoch seconds. The short units are lower case only: ``1M``
    might be meant as a month, and is refused."""
    if text.startswith("-"):
        return _duration(text[1:].lstrip())
    return _duration(_AGO.sub("", text))


def _duration(body: str) -> float | None:
    """Seconds in a duration, short (``1h30m``) or in words (``1 hour 30 minutes``), or
    ``None`` if ``body`` is neither."""
    if _SHORT.fullmatch(body):
        return sum(float(n) * _SECONDS[unit] for n, unit in _SHORT_PART.findall(body))
    words = body.lower()
    if not _SPOKEN.fullmatch(words):
        return None
    total = 0.0
    for number, word in _SPOKEN_PART.findall(words):
        unit = _WORDS.get(word)
        if unit is None:
            return None
        total += float(number or 1) * _SECONDS[unit]
    return total


def iso(epoch: float) -> str:
    """An instant as the audit commands print it: ISO 8601, UTC, milliseconds."""
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="milliseconds")
