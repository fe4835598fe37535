"""``governed-memory worker | reindex | outbox status|retry | maintain``: the indexing
outbox and the maintenance round.

Every step is a governed, store-wide operation of the manager (``outbox_status``,
``process_index_jobs``, ``retry_dead_jobs``, ``reindex``; the maintenance round's
``purge_snapshots`` and ``purge_expired_all`` batches): a decision, a span and
``memory.index.*`` or ``memory.maintenance.*`` events in the profile's trail, like any
other command. The CLI acts as the operator ``cli:<user>`` of the tenant ``operator``
(store-wide work belongs to no tenant; see ``governed_memory.maintenance``).

Indexing needs a profile with an embedder (``[stores.embedder]``), and no built-in
profile has one (they rank lexically): pass a TOML file with ``--profile``. Without
one, ``reindex`` says so and stops (exit 7), and ``worker`` runs its maintenance rounds
only, saying so once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, TypeVar

import click

from governed_memory.cli.common import (
    creates_database,
    current_profile,
    db_option,
    fail,
    json_option,
)
from governed_memory.cli.common import open_manager as _open_manager
from governed_memory.cli.common import operator as _operator
from governed_memory.converter import unstructure
from governed_memory.errors import GovernedMemoryError, MemoryConfigurationError
from governed_memory.indexing import OutboxStatus, WorkerReport, run_worker
from governed_memory.maintenance import MAX_PURGE
from governed_memory.manager import GovernedMemoryManager
from governed_memory.principal import Principal
from governed_memory.store_operations import (
    EXPIRED_BATCH,
    EXPIRED_ROUND_CAP,
    MaintenanceReport,
)

T = TypeVar("T")

STORE_TENANT: Final = "operator"
"""The tenant the CLI's operator principal names in store-wide events."""


def _run(db: Path | None,
         work: Callable[[GovernedMemoryManager, Principal], Awaitable[T]]) -> T:
    """Open the profile's manager (which starts its provider) and hand ``work`` the
    manager and the operator; errors exit with the code of their family.

    ``_open_manager`` is looked up here, at call time: tests stand in a manager there.
    """
    profile = current_profile()

    async def main() -> T:
        async with _open_manager(db, profile) as manager:
            return await work(manager, _operator(STORE_TENANT))

    try:
        return asyncio.run(main())
    except GovernedMemoryError as exc:
        fail(exc)


def has_embedder(manager: GovernedMemoryManager) -> bool:
    """Whether the manager's profile configures an embedder (a manager built without a
    profile is given the benefit of the doubt: the provider answers for itself)."""
    spec = manager.profile_spec
    return spec is None or "embedder" in spec.stores


def no_embedder(manager: GovernedMemoryManager, command: str) -> MemoryConfigurationError:
    spec = manager.profile_spec
    name = spec.key if spec is not None else "this profile"
    return MemoryConfigurationError(
        f"profile {name} configures no embedder ([stores.embedder]), so there is nothing "
        f"for `{command}` to embed: pass --profile with a TOML file that names one "
        '(e.g. [stores.embedder] kind = "hashing", or "minilm" with the embeddings extra; '
        "see docs/cli.md)")


def _default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _report_text(report: WorkerReport) -> str:
    return (f"leased {report.leased}, indexed {report.indexed}, removed {report.removed}, "
            f"skipped {report.skipped}, retried {report.retried}, dead {report.dead}, "
            f"lost leases {report.lost_leases}")


@click.command()
@db_option
@click.option("--worker-id", default=None, help="lease owner name [default: host:pid]")
@click.option("--batch", type=click.IntRange(1, 1000), default=32, show_default=True,
              help="jobs leased (and embedded as one batch) per round")
@click.option("--lease-s", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
              help="how long a leased job is ours before another worker may take it")
@click.option("--idle-s", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="wait between polls when no job is due")
@click.option("--once", is_flag=True, help="process every due job, then exit")
@click.option("--maintain-every", "maintain_s", type=click.FloatRange(min=0), default=300.0,
              show_default=True,
              help="seconds between maintenance rounds (snapshot retention, expired "
                   "records of every scope); 0: none")
@creates_database
def worker(db: Path | None, worker_id: str | None, batch: int, lease_s: float, idle_s: float,
           once: bool, maintain_s: float) -> None:
    """Run the indexing and maintenance worker: embed what writes queued, enforce
    retrieval-snapshot retention and remove expired records of every scope, until
    SIGINT/SIGTERM (every round, every batch is governed).

    Under a profile with no embedder (every built-in one) there is nothing to index:
    the worker says so and runs the maintenance rounds only.
    """
    name = worker_id or _default_worker_id()

    async def work(manager: GovernedMemoryManager, operator: Principal) -> WorkerReport:
        if not has_embedder(manager):
            click.echo(f"{no_embedder(manager, 'worker')}; running maintenance only",
                       err=True)
            return await _maintenance_only(manager, operator, once, maintain_s)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        maintaining = (asyncio.create_task(_maintain(manager, operator, stop, maintain_s))
                       if maintain_s > 0 and not once else None)
        try:
            report = await run_worker(
                manager.worker_steps(operator), worker_id=name, stop=stop, batch=batch,
                lease_s=lease_s,
                idle_s=idle_s, until_idle=once,
                on_report=lambda r: click.echo(_report_text(r), err=True))
            if once and maintain_s > 0:
                await _maintenance_round(manager, operator)
            return report
        finally:
            stop.set()
            if maintaining is not None:
                await maintaining
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    # Queued extractions run beside it when the profile names a language model and a
    # turn store (governed_memory.cli.extraction).
    from governed_memory.cli.extraction import with_extraction

    total = _run(db, with_extraction(work, worker_id=name, once=once, idle_s=idle_s))
    click.echo(f"worker {name} stopped: {_report_text(total)}")


async def _maintenance_only(manager: GovernedMemoryManager, operator: Principal, once: bool,
                            maintain_s: float) -> WorkerReport:
    """The worker's loop without indexing: a maintenance round every ``maintain_s``
    (one, with ``--once``) until SIGINT/SIGTERM."""
    if once or maintain_s <= 0:
        if maintain_s > 0:
            await _maintenance_round(manager, operator)
        return WorkerReport()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await _maintain(manager, operator, stop, maintain_s)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return WorkerReport()


def _maintenance_text(report: MaintenanceReport) -> str:
    text = (f"removed {report.snapshots} expired retrieval snapshot(s) and "
            f"{report.expired_records} expired record(s)")
    if report.capped:
        text += " (this round's cap reached: the next round goes on)"
    return text


async def _maintenance_round(manager: GovernedMemoryManager,
                             operator: Principal) -> MaintenanceReport:
    """One maintenance round (:meth:`~governed_memory.manager.GovernedMemoryManager.maintain`):
    snapshots past retention, then expired records of every scope in bounded batches.
    A step the provider cannot do is skipped and said once on stderr."""
    report = await manager.maintain(operator)
    for operation, reason in report.skipped:
        if (operation, reason) not in _SAID:
            _SAID.add((operation, reason))
            click.echo(f"maintenance: {operation} skipped: {reason}", err=True)
    if report.snapshots or report.expired_records:
        click.echo(f"maintenance: {_maintenance_text(report)}", err=True)
    return report


_SAID: set[tuple[str, str]] = set()
"""Skipped maintenance steps this process has already reported (a worker runs a round
every few minutes; the reason does not change)."""


async def _maintain(manager: GovernedMemoryManager, operator: Principal,
                    stop: asyncio.Event, every_s: float) -> None:
    while not stop.is_set():
        try:
            await _maintenance_round(manager, operator)
        except GovernedMemoryError as exc:  # recorded in the trail; the worker goes on
            click.echo(f"maintenance round failed ({exc.code})", err=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=every_s)


@click.command()
@db_option
@click.option("--batch", type=click.IntRange(1, MAX_PURGE), default=EXPIRED_BATCH,
              show_default=True,
              help="expired records removed per batch (each batch one governed operation)")
@click.option("--max-records", type=click.IntRange(min=0), default=EXPIRED_ROUND_CAP,
              show_default=True,
              help="expired records the round removes at most; 0: none this round")
@json_option
def maintain(db: Path | None, batch: int, max_records: int, as_json: bool) -> None:
    """Run one maintenance round now: remove retrieval snapshots past their retention,
    then expired records of every scope, in bounded batches (every batch governed)."""

    async def work(manager: GovernedMemoryManager, operator: Principal) -> MaintenanceReport:
        report = await manager.maintain(operator, expired_batch=batch,
                                        max_expired=max_records)
        for operation, reason in report.skipped:
            click.echo(f"maintenance: {operation} skipped: {reason}", err=True)
        return report

    report = _run(db, work)
    if as_json:
        import json

        click.echo(json.dumps(unstructure(report), indent=2, sort_keys=True))
    else:
        click.echo(_maintenance_text(report))


@click.command()
@db_option
@click.option("--batch", type=click.IntRange(1, 10_000), default=500, show_default=True,
              help="records walked per transaction")
@click.option("--enqueue-only", is_flag=True,
              help="queue the jobs and leave them to running workers")
@click.option("--worker-id", default=None, help="lease owner name [default: host:pid]")
def reindex(db: Path | None, batch: int, enqueue_only: bool, worker_id: str | None) -> None:
    """Re-embed, through the outbox, every live record lacking a vector of the
    profile's embedder (after the embedder or its model changed)."""
    name = worker_id or _default_worker_id()

    async def work(manager: GovernedMemoryManager,
                   operator: Principal) -> tuple[int, WorkerReport]:
        if not has_embedder(manager):
            raise no_embedder(manager, "reindex")
        enqueued = 0
        cursor: str | None = None
        first = await manager.reindex(operator, limit=batch)
        with click.progressbar(length=max(first.total, 1), label="queueing",
                               file=sys.stderr) as bar:
            page = first
            while True:
                enqueued += page.enqueued
                bar.update(page.scanned)
                cursor = page.cursor
                if cursor is None:
                    break
                page = await manager.reindex(operator, cursor=cursor, limit=batch)
        report = WorkerReport()
        if enqueue_only or enqueued == 0:
            return enqueued, report
        with click.progressbar(length=enqueued, label="embedding", file=sys.stderr) as bar:
            while True:
                step = await manager.process_index_jobs(operator, worker_id=name, limit=32)
                if step.leased == 0:
                    break
                report += step
                bar.update(step.indexed + step.skipped + step.dead)
        return enqueued, report

    enqueued, report = _run(db, work)
    click.echo(f"queued {enqueued} record(s) for re-embedding")
    if report.leased:
        click.echo(_report_text(report))


@click.group()
def outbox() -> None:
    """Inspect and requeue the indexing outbox."""


def _status_text(status: OutboxStatus, dead: list[dict[str, Any]]) -> str:
    oldest = ("-" if status.oldest_pending_at is None
              else f"{max(0.0, time.time() - status.oldest_pending_at):.1f}s ago")
    lines = [f"embedder: {status.embedder or 'none'} (mode {status.mode.value})",
             f"jobs: {status.pending} pending (oldest {oldest}), {status.leased} leased, "
             f"{status.dead} dead",
             f"records missing a current vector: {status.missing_vectors}"]
    lines.extend(f"vectors {identity}: {count}"
                 for identity, count in sorted(status.vectors.items()))
    lines.extend(f"dead {job['job_id']} record {job['record_id']} v{job['version']} "
                 f"{job['action']} after {job['attempts']} attempt(s): {job['last_error_code']}"
                 for job in dead)
    return "\n".join(lines)


@outbox.command("status")
@db_option
@click.option("--dead", "dead_limit", type=click.IntRange(0, 1000), default=20,
              show_default=True, help="dead letters to list")
@json_option
def outbox_status(db: Path | None, dead_limit: int, as_json: bool) -> None:
    """Job counts by state, dead letters, and vectors by embedder."""

    async def work(manager: GovernedMemoryManager,
                   operator: Principal) -> tuple[OutboxStatus, list[dict[str, Any]]]:
        report = await manager.outbox_status(operator, dead_limit=dead_limit)
        return report.status, [unstructure(job) for job in report.dead]

    status, dead = _run(db, work)
    if as_json:
        import json

        click.echo(json.dumps({"status": unstructure(status), "dead": dead}, indent=2,
                              sort_keys=True))
    else:
        click.echo(_status_text(status, dead))


@outbox.command("retry")
@db_option
@click.argument("job_ids", nargs=-1)
@click.option("--all", "all_dead", is_flag=True, help="requeue every dead letter")
def outbox_retry(db: Path | None, job_ids: tuple[str, ...], all_dead: bool) -> None:
    """Requeue dead letters (by id, or --all) with a fresh attempt budget."""
    if bool(job_ids) == all_dead:
        raise click.UsageError("name dead job ids or pass --all (not both)")
    requeued = _run(db, lambda manager, operator: manager.retry_dead_jobs(
        operator, None if all_dead else list(job_ids)))
    click.echo(f"requeued {requeued} dead job(s)")


COMMANDS = (worker, reindex, outbox, maintain)
