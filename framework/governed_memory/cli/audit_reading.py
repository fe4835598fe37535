"""``audit query`` and ``audit report``: what a trail says, verified first.

Both verify the chain before reading it (``--no-verify`` skips that), so what they show
is what was recorded. ``query`` filters events (or sums them up per principal);
``report`` is what the trail records about one data subject, never the contents.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, Final

import click

from governed_memory.audit.query import EventFilter, TrailEntry, query
from governed_memory.audit.report import CATEGORIES, SubjectReport, subject_report
from governed_memory.audit.summary import PrincipalActivity, principal_summary
from governed_memory.audit.times import iso, parse_time
from governed_memory.audit.verify import AnyCheckpoint, Source, Verification, verify_trail
from governed_memory.cli.audit_exits import exit_for, say_problem
from governed_memory.cli.audit_inputs import TRAIL, TrailArgs, store_options, trail_sources
from governed_memory.converter import unstructure
from governed_memory.events import subject_hash


def _now() -> float:
    """Now, for times ago (``--since 1h``); a test stands a fixed clock in."""
    return time.time()


def _time(_: click.Context, __: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_time(value, _now())
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


TIME_HELP = ("epoch seconds, ISO 8601 (UTC without an offset), or a time ago: 90s, 30m, "
             "1h, 2d, 1w, '1 hour ago'")


@click.command("query")
@TRAIL
@store_options
@click.option("--tenant", default=None)
@click.option("--principal", default=None, help="principal id, exactly")
@click.option("--scope-hash", default=None, help="an sh1:… scope hash")
@click.option("--subject", "subject", nargs=2, default=None, metavar="TENANT USER",
              help="events about one data subject (matched by its subject hash)")
@click.option("--operation", default=None,
              help="an operation (add, search, delete_user, …) or an event type")
@click.option("--outcome", default=None, help="committed, completed, deny, rejected, …")
@click.option("--since", default=None, callback=_time, metavar="TIME",
              help=f"from this time on: {TIME_HELP}")
@click.option("--until", default=None, callback=_time, metavar="TIME",
              help=f"before this time: {TIME_HELP}")
@click.option("--summary", type=click.Choice(["principal"]), default=None,
              help="instead of the events, one row per principal: its operations by "
                   "operation and outcome, how many allowed, denied, rejected, failed")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="at most this many events (with --summary: rows)")
@click.option("--no-verify", is_flag=True, help="read without verifying the chain first")
@click.option("--json", "as_json", is_flag=True,
              help="one JSON event per line (with --summary: one JSON document)")
def query_(trail: TrailArgs, store: str | None, schema: str | None,
           tenant: str | None, principal: str | None,
           scope_hash: str | None, subject: tuple[str, str] | None, operation: str | None,
           outcome: str | None, since: float | None, until: float | None,
           summary: str | None, limit: int | None, no_verify: bool, as_json: bool) -> None:
    """Events matching every filter given, in chain order. The text form shows each
    event's decision, policy revision and reasons too (``--json`` has every field).
    ``--summary principal`` sums the matching events up per principal instead: who
    touched this tenant, subject or scope, how often, allowed or denied."""
    where = EventFilter(tenant=tenant, principal=principal, scope_hash=scope_hash,
                        subject_hash=subject_hash(*subject) if subject else None,
                        operation=operation, outcome=outcome, since=since, until=until)
    with trail_sources(trail, store, schema) as sources:
        _verify_unless(no_verify, sources)
        if summary is not None:
            _print_summary(principal_summary(query(sources, where)), limit, as_json)
            return
        shown = _print_events(query(sources, where), limit, as_json)
    if not as_json:
        click.echo(f"{shown} event(s)", err=True)


def _print_events(entries: Iterator[TrailEntry], limit: int | None, as_json: bool) -> int:
    shown = 0
    for entry in entries:
        if limit is not None and shown >= limit:
            break
        shown += 1
        event = entry.event
        if as_json:
            click.echo(json.dumps({"seq": entry.seq, "event": event}, sort_keys=True))
            continue
        click.echo(_query_line(entry.seq, entry.occurred_at, event))
    return shown


SUMMARY_COLUMNS: Final = ("principal", "tenant", "operations", "allowed", "denied",
                          "rejected", "failed", "last seen", "by operation and outcome")


def _print_summary(rows: tuple[PrincipalActivity, ...], limit: int | None,
                   as_json: bool) -> None:
    """The per-principal summary: a table (a header, then a row per principal, counts
    right-aligned) or one JSON document; totals go to stderr with the text form."""
    shown = rows[:limit] if limit is not None else rows
    if as_json:
        click.echo(json.dumps({
            "summary": "principal", "principals": [unstructure(row) for row in shown],
            "operations": sum(row.operations for row in rows),
            "events": sum(row.events for row in rows)}, indent=2, sort_keys=True))
        return
    table = [list(SUMMARY_COLUMNS)] + [[
        row.principal_id, ",".join(row.tenant_ids) or "-", str(row.operations),
        str(row.allowed), str(row.denied), str(row.rejected), str(row.failed),
        iso(row.last_at),
        " ".join(f"{operation}:{outcome}={count}"
                 for operation, outcomes in row.by_operation.items()
                 for outcome, count in outcomes.items()) or "-"] for row in shown]
    widths = [max(len(line[column]) for line in table) for column in range(len(table[0]))]
    for line in table:
        cells = [cell.rjust(width) if 2 <= column <= 6 else cell.ljust(width)
                 for column, (cell, width) in enumerate(zip(line, widths, strict=True))]
        click.echo("  ".join(cells).rstrip())
    click.echo(f"{len(rows)} principal(s), {sum(row.operations for row in rows)} "
               f"operation(s) in {sum(row.events for row in rows)} event(s)", err=True)


@click.command()
@TRAIL
@store_options
@click.option("--tenant", required=True)
@click.option("--user", required=True, help="the data subject's user id")
@click.option("--no-verify", is_flag=True, help="report without verifying the chain first")
@click.option("--json", "as_json", is_flag=True)
def report(trail: TrailArgs, store: str | None, schema: str | None, tenant: str, user: str,
           no_verify: bool, as_json: bool) -> None:
    """What the trail records about one data subject: written, read, deleted, erased,
    denied and failed operations, when, and each erasure's receipt. No contents."""
    with trail_sources(trail, store, schema) as sources:
        _verify_unless(no_verify, sources)
        found = subject_report(sources, tenant, user)
    if as_json:
        body: dict[str, Any] = unstructure(found)
        body["summary"] = found.summary()
        click.echo(json.dumps(body, indent=2, sort_keys=True))
        return
    _print_report(found)


def _verify_unless(no_verify: bool, trail: tuple[Source, ...]) -> None:
    if no_verify:
        return
    verification = _verified(trail, [])
    if verification.problem is not None:
        exit_for(verification.problem)


def _verified(trail: tuple[Source, ...], checkpoints: list[AnyCheckpoint]) -> Verification:
    verification = verify_trail(trail, checkpoints)
    if verification.problem is not None:
        say_problem(verification.problem)
    return verification


def _query_line(seq: int, occurred_at: float, event: dict[str, Any]) -> str:
    """One event as a line: who did what with which outcome, and why (the decision,
    the policy revision it was made under and every reason a policy gave)."""
    records = ",".join(event.get("record_ids") or ())
    reasons = list(event.get("reasons") or ())
    return (f"{seq:>7} {iso(occurred_at)} {event.get('type')} "
            f"op={event.get('operation')} outcome={event.get('outcome')} "
            f"principal={event.get('principal_id')} tenant={event.get('tenant_id')}"
            + (f" records={records}" if records else "")
            + (f" decision={event['decision_id']}" if event.get("decision_id") else "")
            + (f" policy_revision={event['policy_revision']}"
               if event.get("policy_revision") else "")
            + (f" error={event['error_code']}" if event.get("error_code") else "")
            + (f" reasons={json.dumps(reasons, ensure_ascii=False)}" if reasons else ""))


def _print_report(found: SubjectReport) -> None:
    click.echo(f"data subject {found.subject_hash} in tenant {found.tenant_id}")
    summary = found.summary()
    click.echo("  " + ", ".join(f"{name}: {summary[name]}" for name in CATEGORIES))
    for name, items in found.by_category().items():
        if not items:
            continue
        click.echo(f"{name}:")
        for item in items:
            records = f" records={','.join(item.record_ids)}" if item.record_ids else ""
            count = f" count={item.count}" if item.count is not None else ""
            why = f" reasons={'; '.join(item.reasons)}" if name == "denied" else ""
            click.echo(f"  {iso(item.occurred_at)} {item.operation} by {item.principal_id} "
                       f"({item.outcome}){records}{count}{why}")
    if not found.erasures:
        click.echo("erasure receipts: none")
    for erasure in found.erasures:
        counts = ", ".join(f"{k}={v}" for k, v in sorted(erasure.counts.items()))
        state = "nothing was left" if erasure.nothing_left else "erased"
        check = "receipt hash verified" if erasure.receipt_verified else (
            "RECEIPT HASH DOES NOT MATCH")
        click.echo(f"erasure {erasure.request_id} by {erasure.principal_id}: {state}")
        click.echo(f"  started {iso(erasure.started_at)}  completed "
                   f"{iso(erasure.completed_at)}")
        click.echo(f"  counts: {counts}")
        click.echo(f"  receipt {erasure.receipt_hash} ({check})")
