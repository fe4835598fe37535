"""``governed-memory approve|reject``: decide memories held for review."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from governed_memory.cli import format as fmt
from governed_memory.cli.common import (
    db_option,
    emit,
    json_option,
    operator,
    run_with_manager,
    scope_from,
    scope_options,
)


@click.command()
@db_option
@scope_options
@click.argument("record_id")
@click.option("--expected-revision", default=None, help="refuse if the record has moved on")
@json_option
def approve(db: Path | None, record_id: str, expected_revision: str | None, as_json: bool,
            **scope_kw: Any) -> None:
    """Accept a memory held for review: it becomes active and visible."""
    scope = scope_from(scope_kw)
    result = run_with_manager(db, lambda m: m.approve(
        operator(scope.tenant_id), scope, record_id, expected_revision=expected_revision))
    emit(result, as_json, fmt.record_text)


@click.command()
@db_option
@scope_options
@click.argument("record_id")
@click.option("--expected-revision", default=None, help="refuse if the record has moved on")
@json_option
def reject(db: Path | None, record_id: str, expected_revision: str | None, as_json: bool,
           **scope_kw: Any) -> None:
    """Refuse a memory held for review: it is erased with its history."""
    scope = scope_from(scope_kw)
    result = run_with_manager(db, lambda m: m.reject(
        operator(scope.tenant_id), scope, record_id, expected_revision=expected_revision))
    emit(result, as_json, lambda r: f"rejected {r.record_id} (erased)")


@click.group()
def review() -> None:
    """The review queue: memories held for a reviewer's decision."""


@review.command("list")
@db_option
@scope_options
@click.option("--limit", type=click.IntRange(1, 100), default=20, show_default=True)
@click.option("--cursor", default=None, help="continue where the last page ended")
@json_option
def review_list(db: Path | None, limit: int, cursor: str | None, as_json: bool,
                **scope_kw: Any) -> None:
    """Memories of one exact scope held for review, oldest first (then approve or
    reject each by id)."""
    scope = scope_from(scope_kw)
    result = run_with_manager(db, lambda m: m.list_pending(
        operator(scope.tenant_id), scope, limit=limit, cursor=cursor))
    emit(result, as_json, fmt.page_text)
