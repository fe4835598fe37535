"""``governed-memory extraction status|retry``, and the worker's extraction step.

Queued extractions (``MemoryExtractor.enqueue``) are jobs in the provider's storage.
``governed-memory worker`` runs them alongside its indexing and maintenance rounds when
the profile says how: a language model (``[stores.language_model]``) to extract with,
and the turn store (``[stores.turns]``) the jobs' turns are read back from. Every step
is governed: the leases, settlements, the status and requeues are the operator
``cli:<user>``'s store-wide operations (``memory.index.*`` events), and each job's
searches and writes are those of the principal that queued it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from governed_memory.cli.common import db_option, json_option
from governed_memory.cli.indexing import _run
from governed_memory.converter import unstructure
from governed_memory.errors import GovernedMemoryError
from governed_memory.extraction_jobs import ExtractionQueueStatus
from governed_memory.extraction_requests import extraction_status, retry_extraction_jobs
from governed_memory.manager import GovernedMemoryManager
from governed_memory.principal import Principal
from governed_memory.turncontext.extraction_worker import (
    DEFAULT_LEASE_S,
    ExtractionReport,
    ExtractionWorker,
)

T = TypeVar("T")
Work = Callable[[GovernedMemoryManager, Principal], Awaitable[T]]


def report_text(report: ExtractionReport) -> str:
    return (f"leased {report.leased}, done {report.done}, retried {report.retried}, "
            f"dead {report.dead}, lost leases {report.lost_leases}, "
            f"facts stored {report.facts_stored}")


def extraction_worker(manager: GovernedMemoryManager) -> ExtractionWorker | None:
    """The worker the manager's profile describes, or ``None`` when it names no
    language model (extraction is not configured here). A model without a turn store
    is a configuration error: the jobs' turns could not be read."""
    spec = manager.profile_spec
    if spec is None or manager.language_model is None:
        return None
    return ExtractionWorker.from_manager(manager)


def with_extraction(work: Work[T], *, worker_id: str, once: bool, idle_s: float,
                    batch: int = 4, lease_s: float = DEFAULT_LEASE_S) -> Work[T]:
    """``work`` (the worker's indexing and maintenance loop) with the extraction rounds
    running beside it: until ``work`` returns, or, with ``once``, until no job is due.
    A failure of the extraction step is said on stderr and never stops ``work``."""

    async def both(manager: GovernedMemoryManager, operator: Principal) -> T:
        try:
            worker = extraction_worker(manager)
        except GovernedMemoryError as exc:
            click.echo(f"extraction: not run ({exc})", err=True)
            worker = None
        if worker is None:
            return await work(manager, operator)
        store = worker.tiers.turn_store
        assert store is not None  # the worker refuses tiers without one
        await store.start()
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(
            operator, worker_id=worker_id, stop=stop, batch=batch, lease_s=lease_s,
            idle_s=idle_s, until_idle=once,
            on_report=lambda r: click.echo(f"extraction: {report_text(r)}", err=True)))
        task.add_done_callback(_say_why_it_stopped)
        try:
            return await work(manager, operator)
        finally:
            if not once:
                stop.set()
            try:
                total = await task
                click.echo(f"extraction: {report_text(total)}", err=True)
            except GovernedMemoryError:
                pass  # said when it stopped
            finally:
                await store.close()

    return both


def _say_why_it_stopped(task: asyncio.Task[ExtractionReport]) -> None:
    """A step that stops on its own (a provider without a queue, a bad setting) says so
    at once, while the rest of the worker goes on."""
    if not task.cancelled() and isinstance(task.exception(), GovernedMemoryError):
        error = task.exception()
        click.echo(f"extraction: stopped ({getattr(error, 'code', '')}: {error})", err=True)


@click.group()
def extraction() -> None:
    """Inspect and requeue the extraction queue (turns whose facts a worker extracts)."""


def _status_text(status: ExtractionQueueStatus, dead: list[dict[str, Any]]) -> str:
    oldest = ("-" if status.oldest_pending_at is None
              else f"{max(0.0, time.time() - status.oldest_pending_at):.1f}s ago")
    lines = [f"jobs: {status.pending} pending (oldest {oldest}), {status.leased} leased, "
             f"{status.done} done, {status.dead} dead"]
    lines.extend(f"dead {job['job_id']} scope {job['owner']['tenant_id']}/"
                 f"{job['owner'].get('session_id') or '-'} turns {len(job['turn_ids'])} after "
                 f"{job['attempts']} attempt(s): {job['last_error_code']}" for job in dead)
    return "\n".join(lines)


@extraction.command("status")
@db_option
@click.option("--dead", "dead_limit", type=click.IntRange(0, 1000), default=20,
              show_default=True, help="dead letters to list")
@json_option
def extraction_status_command(db: Path | None, dead_limit: int, as_json: bool) -> None:
    """Job counts by state, and the oldest dead letters."""

    async def work(manager: GovernedMemoryManager,
                   operator: Principal) -> tuple[ExtractionQueueStatus, list[dict[str, Any]]]:
        report = await extraction_status(manager, operator, dead_limit=dead_limit)
        return report.status, [unstructure(job) for job in report.dead]

    status, dead = _run(db, work)
    if as_json:
        import json

        click.echo(json.dumps({"status": unstructure(status), "dead": dead}, indent=2,
                              sort_keys=True))
    else:
        click.echo(_status_text(status, dead))


@extraction.command("retry")
@db_option
@click.argument("job_ids", nargs=-1)
@click.option("--all", "all_dead", is_flag=True, help="requeue every dead letter")
def extraction_retry(db: Path | None, job_ids: tuple[str, ...], all_dead: bool) -> None:
    """Requeue dead letters (by id, or --all) with a fresh attempt budget."""
    if bool(job_ids) == all_dead:
        raise click.UsageError("name dead job ids or pass --all (not both)")
    requeued = _run(db, lambda manager, operator: retry_extraction_jobs(
        manager, operator, None if all_dead else list(job_ids)))
    click.echo(f"requeued {requeued} dead extraction job(s)")
