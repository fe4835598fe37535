"""Times as an auditor types them: ``audit query --since "1 hour ago"`` (issue 28 refused
it), ``1h``, ``30m``, ``2d``, ``90s``, ``1w``, beside epoch seconds and ISO 8601, counted
back from now; anything else is a usage error listing the accepted forms."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from governed_memory.audit import AuditSink, parse_time
from governed_memory.audit.times import ACCEPTED, iso
from governed_memory.cli import audit_reading
from governed_memory.cli.main import cli
from governed_memory.events import MemoryEvent

NOW = 1_800_000_000.0
HOUR, DAY = 3600.0, 86400.0


@pytest.mark.parametrize(("text", "ago"), [
    ("90s", 90), ("30m", 1800), ("1h", HOUR), ("2d", 2 * DAY), ("1w", 7 * DAY),
    ("1h30m", 1.5 * HOUR), ("1h 30m", 1.5 * HOUR), ("1.5h", 1.5 * HOUR), ("0s", 0),
    ("1h ago", HOUR), ("1 hour ago", HOUR), ("2 days ago", 2 * DAY),
    ("30 minutes ago", 1800), ("an hour ago", HOUR), ("a week ago", 7 * DAY),
    ("1 hour 30 minutes ago", 1.5 * HOUR), ("1 hour, 30 minutes ago", 1.5 * HOUR),
    ("1 hour and 30 minutes ago", 1.5 * HOUR), ("2 Days Ago", 2 * DAY),
    ("45 secs ago", 45), ("3 hrs", 3 * HOUR), ("  2d  ", 2 * DAY), ("now", 0),
])
def test_a_time_ago_counts_back_from_now(text: str, ago: float) -> None:
    assert parse_time(text, NOW) == NOW - ago


@pytest.mark.parametrize(("text", "epoch"), [
    ("1764547200", 1764547200.0), ("1764547200.5", 1764547200.5),
    ("2026-12-01", 1796083200.0), ("2026-12-01T09:30:00Z", 1796117400.0),
    ("2026-12-01T10:30:00+01:00", 1796117400.0), ("2026-12-01 09:30", 1796117400.0),
])
def test_absolute_times_are_what_they_say(text: str, epoch: float) -> None:
    assert parse_time(text, NOW) == epoch


@pytest.mark.parametrize("text", [
    "yesterday", "1 month ago", "1M", "1y", "in 2 hours", "-1h ago", "1 hour and a half ago",
    "ago", "h", "", "nan", "inf", "1h-30m", "2026-13-01",
])
def test_anything_else_is_refused_listing_the_forms(text: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_time(text, NOW)
    assert str(refused.value) == f"not a time: {text!r}; give {ACCEPTED}"


def test_iso_prints_utc_milliseconds() -> None:
    assert iso(1796117400.25) == "2026-12-01T09:30:00.250+00:00"


# -- on the command line --------------------------------------------------------------------


@pytest.fixture
def trail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Events 3 days, 2 hours, 40 minutes and 1 minute before a fixed now."""
    monkeypatch.setattr(audit_reading, "_now", lambda: NOW)
    directory = tmp_path / "trail"

    async def write() -> None:
        sink = AuditSink(directory)
        for name, ago in [("3d", 3 * DAY), ("2h", 2 * HOUR), ("40m", 2400), ("1m", 60)]:
            await sink.emit(MemoryEvent(event_id=f"evt_{name}.1", type="memory.write.committed",
                                        occurred_at=NOW - ago, operation_id=f"op_{name}",
                                        operation="add", principal_id="user:alice",
                                        tenant_id="acme",
                                        outcome="committed"))
        await sink.close()

    asyncio.run(write())
    return directory


def _ids(result: Result) -> list[str]:
    assert result.exit_code == 0, result.stderr
    return [json.loads(line)["event"]["event_id"].split(".")[0]
            for line in result.stdout.splitlines()]


@pytest.mark.parametrize(("options", "shown"), [
    (["--since", "1 hour ago"], ["evt_40m", "evt_1m"]),
    (["--since", "1h"], ["evt_40m", "evt_1m"]),
    (["--since", "2 days ago"], ["evt_2h", "evt_40m", "evt_1m"]),
    (["--since", "30 minutes ago"], ["evt_1m"]),
    (["--since", "90s"], ["evt_1m"]),
    (["--since", "1w", "--until", "1d"], ["evt_3d"]),
    (["--until", "1 hour ago"], ["evt_3d", "evt_2h"]),
    (["--since", iso(NOW - 3 * HOUR), "--until", str(NOW - HOUR)], ["evt_2h"]),
])
def test_query_takes_times_ago(trail: Path, options: list[str], shown: list[str]) -> None:
    result = CliRunner().invoke(cli, ["audit", "query", str(trail), "--json", *options])
    assert _ids(result) == shown


def test_a_bad_time_is_a_usage_error_listing_the_forms(trail: Path) -> None:
    for option in ("--since", "--until"):
        result = CliRunner().invoke(cli, ["audit", "query", str(trail), option, "yesterday"])
        assert result.exit_code == 2
        assert f"Invalid value for '{option}'" in result.stderr
        assert "1 hour ago" in result.stderr and "ISO 8601" in result.stderr
