"""``governed-memory delete-user|delete-all|purge-expired``: erase a data subject, a
scope, or what has expired, each a governed operation in the trail.

They work on an existing database only: erasing in a file that a typo just created
would print a receipt for nothing, in the wrong place.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from governed_memory.cli.common import (
    db_option,
    emit,
    json_option,
    operator,
    run_with_manager,
    scope_from,
    scope_options,
)

if TYPE_CHECKING:
    from governed_memory.manager import GovernedMemoryManager
    from governed_memory.records import ErasureReceipt


def receipt_text(receipt: ErasureReceipt) -> str:
    counts = ", ".join(f"{name} {count}" for name, count in sorted(receipt.counts.items()))
    return (f"erased user {receipt.user_id} of tenant {receipt.tenant_id}: {counts}\n"
            f"receipt {receipt.receipt_hash} (request {receipt.request_id}, "
            f"{len(receipt.scope_hashes)} scope(s))")


@click.command("delete-user")
@db_option
@click.option("--tenant", "tenant_id", required=True)
@click.option("--user", "user_id", required=True)
@click.option("--yes", is_flag=True, help="do not ask for confirmation")
@json_option
def delete_user(db: Path | None, tenant_id: str, user_id: str, yes: bool,
                as_json: bool) -> None:
    """Erase a user in every scope of the tenant (and the conversation turns and memory
    blocks the profile keeps for them) and print the erasure receipt."""
    if not yes:
        click.confirm(f"Erase every memory of user {user_id!r} in tenant {tenant_id!r}?",
                      abort=True, err=True)
    async def erase(manager: GovernedMemoryManager) -> dict[str, Any]:
        # Every tier the profile keeps (turns, memory blocks), then the memories: an
        # erasure that left the user's conversation or blocks behind would not be one.
        from governed_memory.converter import unstructure
        from governed_memory.tiers import MemoryTiers

        tiers = MemoryTiers.from_manager(manager)
        stores = [s for s in (tiers.turn_store, tiers.working_store, tiers.block_store)
                  if s is not None]
        for store in stores:
            await store.start()
        try:
            erasure = await tiers.delete_user(operator(tenant_id), tenant_id, user_id)
        finally:
            for store in stores:
                await store.close()
        assert erasure.memories is not None
        body: dict[str, Any] = unstructure(erasure.memories)
        for name in ("turns_removed", "block_versions_removed"):
            if getattr(erasure, name) is not None:
                body[name] = getattr(erasure, name)
        return body

    result = run_with_manager(db, erase)
    emit(result, as_json, erasure_text)


def erasure_text(body: dict[str, Any]) -> str:
    from governed_memory.converter import structure
    from governed_memory.records import ErasureReceipt

    extra = {k: body[k] for k in ("turns_removed", "block_versions_removed") if k in body}
    receipt = structure({k: v for k, v in body.items() if k not in extra}, ErasureReceipt)
    lines = [receipt_text(receipt)]
    if "turns_removed" in extra:
        lines.append(f"conversation turns erased: {extra['turns_removed']}")
    if "block_versions_removed" in extra:
        lines.append(f"memory-block versions erased: {extra['block_versions_removed']}")
    return "\n".join(lines)


@click.command("delete-all")
@db_option
@scope_options
@click.option("--yes", is_flag=True, help="do not ask for confirmation")
@json_option
def delete_all(db: Path | None, yes: bool, as_json: bool, **scope_kw: Any) -> None:
    """Erase every memory of one exact scope (not its sub-scopes)."""
    scope = scope_from(scope_kw)
    if not yes:
        click.confirm(f"Erase every memory of scope {scope.scope_hash}?", abort=True,
                      err=True)
    result = run_with_manager(db, lambda m: m.delete_all(operator(scope.tenant_id), scope))
    emit({"erased": result}, as_json, lambda r: f"erased {r['erased']} record(s)")


@click.command("purge-expired")
@db_option
@scope_options
@click.option("--limit", type=click.IntRange(1, 100), default=100, show_default=True,
              help="records inspected per page")
@json_option
def purge_expired(db: Path | None, limit: int, as_json: bool, **scope_kw: Any) -> None:
    """Physically remove the expired memories of one exact scope, page by page."""
    scope = scope_from(scope_kw)

    async def work(m: GovernedMemoryManager) -> dict[str, int]:
        removed = pages = 0
        after: str | None = None
        while True:
            page = await m.purge_expired(operator(scope.tenant_id), scope, limit=limit,
                                         after=after)
            removed, pages = removed + page.deleted, pages + 1
            if page.next_cursor is None:
                return {"purged": removed, "pages": pages}
            after = page.next_cursor

    result = run_with_manager(db, work)
    emit(result, as_json,
         lambda r: f"purged {r['purged']} expired record(s) in {r['pages']} page(s)")
