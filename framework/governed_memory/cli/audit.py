"""``governed-memory audit verify|checkpoint|query|report``: read a hash-chained trail.

Exit codes, so a script can tell an alarm from a wrong argument:

- 0 the trail verifies (and, for ``query``/``report``, was read);
- 1 ``BROKEN``: it does not (tampering or damage; the first broken entry and why go to
  stderr);
- 2 bad arguments;
- 3 not a hash-chained trail (a plain JSON lines event log, say);
- 4 no trail here (a directory without ``audit-*.jsonl`` files).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from governed_memory.audit.chain import ChainFormatError, Checkpoint
from governed_memory.audit.query import EventFilter, iso, parse_time, query
from governed_memory.audit.report import CATEGORIES, SubjectReport, subject_report
from governed_memory.audit.verify import (
    BROKEN,
    NO_TRAIL,
    NOT_A_TRAIL,
    Problem,
    TrailProblemError,
    Verification,
    checkpoint_of,
    verify_trail,
)
from governed_memory.converter import unstructure
from governed_memory.events import subject_hash

TRAIL = click.argument("trail", nargs=-1, required=True,
                       type=click.Path(exists=True, path_type=Path))

EXIT_CODES = {BROKEN: 1, NOT_A_TRAIL: 3, NO_TRAIL: 4}
"""Exit code by ``Problem.kind`` (0: verified; 2: bad arguments, click's own)."""


@click.group()
def audit() -> None:
    """Verify, query and report on a hash-chained audit trail (the ``audit`` sink).

    TRAIL is the sink's directory or its ``audit-*.jsonl`` files in order.
    """


def _checkpoints(paths: tuple[Path, ...]) -> list[Checkpoint]:
    found: list[Checkpoint] = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                found.append(Checkpoint.from_json(line))
            except ChainFormatError as exc:
                raise click.BadParameter(f"{path}:{number}: {exc}",
                                         param_hint="--checkpoint") from None
    return found


def _say(problem: Problem) -> None:
    """Only damage is called BROKEN; the other kinds say what they are themselves."""
    prefix = "BROKEN " if problem.kind == BROKEN else ""
    click.echo(f"{prefix}{problem}", err=True)


def _verified(trail: tuple[Path, ...], checkpoints: list[Checkpoint]) -> Verification:
    verification = verify_trail(trail, checkpoints)
    if verification.problem is not None:
        _say(verification.problem)
    return verification


def _exit_for(problem: Problem) -> None:
    raise SystemExit(EXIT_CODES.get(problem.kind, 1))


@audit.command()
@TRAIL
@click.option("--checkpoint", "checkpoint_files", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="a file of exported checkpoints (one JSON per line) to check against")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
def verify(trail: tuple[Path, ...], checkpoint_files: tuple[Path, ...], as_json: bool) -> None:
    """Prove every entry, link, file boundary and checkpoint; report the first break."""
    verification = verify_trail(trail, _checkpoints(checkpoint_files))
    if as_json:
        body = unstructure(verification)
        body["ok"] = verification.ok
        body["status"] = verification.status
        click.echo(json.dumps(body, indent=2, sort_keys=True))
    elif verification.ok:
        start = (f" after entry {verification.first_seq} (earlier files not given)"
                 if verification.first_seq else "")
        click.echo(f"OK chain {verification.chain_id}: {verification.entries} entries"
                   f"{start} in {len(verification.files)} file(s), head {verification.head}, "
                   f"{verification.checkpoints_checked} checkpoint(s) matched")
    else:
        assert verification.problem is not None
        _say(verification.problem)
    if verification.problem is not None:
        _exit_for(verification.problem)


@audit.command()
@TRAIL
def checkpoint(trail: tuple[Path, ...]) -> None:
    """Print a checkpoint (entry count and head hash) of a trail that verifies, to keep
    apart from the trail and pass to ``audit verify --checkpoint`` later."""
    try:
        found = checkpoint_of(trail, time.time())
    except TrailProblemError as exc:
        _say(exc.problem)
        _exit_for(exc.problem)
    click.echo(found.to_json())


def _time(_: click.Context, __: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@audit.command("query")
@TRAIL
@click.option("--tenant", default=None)
@click.option("--principal", default=None, help="principal id, exactly")
@click.option("--scope-hash", default=None, help="an sh1:… scope hash")
@click.option("--subject", "subject", nargs=2, default=None, metavar="TENANT USER",
              help="events about one data subject (matched by its subject hash)")
@click.option("--operation", default=None,
              help="an operation (add, search, delete_user, …) or an event type")
@click.option("--outcome", default=None, help="committed, completed, deny, rejected, …")
@click.option("--since", default=None, callback=_time, help="epoch seconds or ISO 8601")
@click.option("--until", default=None, callback=_time, help="epoch seconds or ISO 8601")
@click.option("--limit", type=click.IntRange(min=1), default=None)
@click.option("--no-verify", is_flag=True, help="read without verifying the chain first")
@click.option("--json", "as_json", is_flag=True, help="one JSON event per line")
def query_(trail: tuple[Path, ...], tenant: str | None, principal: str | None,
           scope_hash: str | None, subject: tuple[str, str] | None, operation: str | None,
           outcome: str | None, since: float | None, until: float | None,
           limit: int | None, no_verify: bool, as_json: bool) -> None:
    """Events matching every filter given, in chain order. The text form shows each
    event's decision, policy revision and reasons too (``--json`` has every field)."""
    _verify_unless(no_verify, trail)
    where = EventFilter(tenant=tenant, principal=principal, scope_hash=scope_hash,
                        subject_hash=subject_hash(*subject) if subject else None,
                        operation=operation, outcome=outcome, since=since, until=until)
    shown = 0
    for entry in query(trail, where):
        if limit is not None and shown >= limit:
            break
        shown += 1
        event = entry.event
        if as_json:
            click.echo(json.dumps({"seq": entry.seq, "event": event}, sort_keys=True))
            continue
        click.echo(_query_line(entry.seq, entry.occurred_at, event))
    if not as_json:
        click.echo(f"{shown} event(s)", err=True)


@audit.command()
@TRAIL
@click.option("--tenant", required=True)
@click.option("--user", required=True, help="the data subject's user id")
@click.option("--no-verify", is_flag=True, help="report without verifying the chain first")
@click.option("--json", "as_json", is_flag=True)
def report(trail: tuple[Path, ...], tenant: str, user: str, no_verify: bool,
           as_json: bool) -> None:
    """What the trail records about one data subject: written, read, deleted, erased,
    denied and failed operations, when, and each erasure's receipt. No contents."""
    _verify_unless(no_verify, trail)
    found = subject_report(trail, tenant, user)
    if as_json:
        body: dict[str, Any] = unstructure(found)
        body["summary"] = found.summary()
        click.echo(json.dumps(body, indent=2, sort_keys=True))
        return
    _print_report(found)


def _verify_unless(no_verify: bool, trail: tuple[Path, ...]) -> None:
    if no_verify:
        return
    verification = _verified(trail, [])
    if verification.problem is not None:
        _exit_for(verification.problem)


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
