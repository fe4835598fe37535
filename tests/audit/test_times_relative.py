"""A time ago with a leading minus (``-24h``, ``-1h30m``, ``- 2 days``), as many tools
spell one: the same instant as the form without it, on the command line too; anything
else with a minus is still refused with the forms this accepts, never guessed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from governed_memory.audit import AuditSink, parse_time
from governed_memory.audit.times import ACCEPTED
from governed_memory.cli import audit_reading
from governed_memory.cli.main import cli
from governed_memory.events import MemoryEvent

NOW = 1_800_000_000.0
HOUR, DAY = 3600.0, 86400.0


@pytest.mark.parametrize(("text", "same_as"), [
    ("-24h", "24h"), ("-1h30m", "1h30m"), ("-1h 30m", "1h 30m"), ("-1.5h", "1.5h"),
    ("-90s", "90s"), ("-1w", "1w"), ("-0s", "0s"), ("- 24h", "24h"),
    ("- 2 days", "2 days ago"), ("-2 days", "2 days"), ("-2 Days", "2 days"),
    ("-an hour", "an hour ago"), ("-1 hour, 30 minutes", "1 hour 30 minutes ago"),
    ("  -24h  ", "24h"),
])
def test_a_leading_minus_is_a_time_ago(text: str, same_as: str) -> None:
    assert parse_time(text, NOW) == parse_time(same_as, NOW)
    assert parse_time(text, NOW) < NOW or text == "-0s"  # before now, never after


@pytest.mark.parametrize("text", [
    "-24h ago", "- 2 days ago", "-1 hour ago",  # a minus and "ago" say it twice
    "--24h", "-", "- ", "-now", "-yesterday", "-1M", "-1y", "-1h-30m", "-in 2 hours",
    "+24h", "\u221224h",  # a plus, a typographic minus
    "-2026-12-01", "-ago", "-h",
])
def test_anything_else_with_a_minus_is_refused_listing_the_forms(text: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_time(text, NOW)
    assert str(refused.value) == f"not a time: {text!r}; give {ACCEPTED}"


def test_a_minus_before_a_bare_number_is_still_epoch_seconds() -> None:
    assert parse_time("-5", NOW) == -5.0
    assert parse_time("-1764547200.5", NOW) == -1764547200.5


def test_audit_query_takes_a_minus_on_the_command_line(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit_reading, "_now", lambda: NOW)
    trail = tmp_path / "trail"

    async def write() -> None:
        sink = AuditSink(trail)
        for name, ago in [("3d", 3 * DAY), ("2h", 2 * HOUR), ("1m", 60)]:
            await sink.emit(MemoryEvent(event_id=f"evt_{name}.1", type="memory.write.committed",
                                        occurred_at=NOW - ago, operation_id=f"op_{name}",
                                        operation="add", principal_id="user:alice",
                                        tenant_id="acme", outcome="committed"))
        await sink.close()

    asyncio.run(write())
    for options, shown in ((["--since=-24h"], ["evt_2h", "evt_1m"]),
                           (["--since", "-1h30m"], ["evt_1m"]),
                           (["--since=- 2 days ago"], None)):
        result = CliRunner().invoke(cli, ["audit", "query", str(trail), "--json", *options])
        if shown is None:
            assert result.exit_code == 2 and "1 hour ago" in result.stderr
            continue
        assert result.exit_code == 0, result.stderr
        assert [json.loads(line)["event"]["event_id"].split(".")[0]
                for line in result.stdout.splitlines()] == shown
