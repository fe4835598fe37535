"""``governed-memory demo``: a printed walk-through on a fresh SQLite file.

It exercises the contract a user should be able to see with their own eyes: two
tenants that cannot see each other, a search that explains itself, a stale update
refused, history, a soft delete, and the audit trail all of it produced.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import click

from governed_memory.cli import format as fmt
from governed_memory.errors import MemoryConflictError, MemoryNotFoundError, MemoryScopeError
from governed_memory.events import InMemoryEventSink, JsonLinesEventSink
from governed_memory.manager import GovernedMemoryManager
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.scope import Scope


def _step(title: str) -> None:
    click.echo()
    click.secho(f"== {title}", bold=True)


def _ok(text: str) -> None:
    click.secho(f"   ok: {text}", fg="green")


def _refused(text: str) -> None:
    click.secho(f"   refused, as it should be: {text}", fg="yellow")


async def run_demo(directory: Path) -> None:
    db = directory / "memory.db"
    trail = directory / "events.jsonl"
    captured = InMemoryEventSink()
    manager = GovernedMemoryManager.from_plugins(
        "native", {"backend": "sqlite", "path": str(db)},
        sinks=[captured, JsonLinesEventSink(trail)],
    )
    everything = frozenset({Permission.READ, Permission.WRITE, Permission.DELETE})
    alice = Principal("user:alice", PrincipalKind.USER, "acme", "alice", everything)
    bob = Principal("user:bob", PrincipalKind.USER, "globex", "bob", everything)
    alice_scope = Scope("acme", project_id="support", user_id="alice")
    bob_scope = Scope("globex", project_id="support", user_id="bob")

    async with manager:
        click.echo(f"database: {db}")
        click.echo(f"event trail: {trail}")

        _step("two tenants write memories")
        theme = await manager.add(alice, alice_scope, "Alice prefers dark mode in every editor",
                                  memory_type="preference", key="ui.theme", importance=0.8)
        await manager.add(alice, alice_scope, "Alice's team ships the billing service on Fridays",
                          memory_type="fact")
        await manager.add(alice, alice_scope, "Decided: escalate billing incidents to on-call",
                          memory_type="decision")
        secret = await manager.add(bob, bob_scope, "Bob prefers light mode and large fonts",
                                   memory_type="preference")
        await manager.add(bob, bob_scope, "Globex billing runs on the 1st of each month",
                          memory_type="fact")
        _ok(f"acme/alice wrote 3 memories, globex/bob wrote 2 "
            f"(scope hashes {fmt.short(alice_scope.scope_hash, 14)} and "
            f"{fmt.short(bob_scope.scope_hash, 14)})")

        _step("alice searches her memories for 'dark mode billing'")
        result = await manager.search(alice, alice_scope, "dark mode billing", limit=5)
        click.echo(fmt.search_text(result))
        _ok("only acme/alice records can match; each hit says why it ranked")

        _step("alice tries to read bob's memory in tenant globex")
        try:
            await manager.get(alice, bob_scope, secret.id)
        except MemoryScopeError as exc:
            _refused(str(exc))
        _step("alice asks for bob's record id inside her own scope")
        try:
            await manager.get(alice, alice_scope, secret.id)
        except MemoryNotFoundError as exc:
            _refused(f"not found ({exc})")

        _step("alice updates her theme preference (compare-and-set)")
        updated = await manager.update(alice, alice_scope, theme.id,
                                       expected_revision=theme.revision,
                                       content="Alice prefers dark mode, high contrast")
        _ok(f"v{theme.version} -> v{updated.version}, revision {updated.revision}")
        _step("a second writer still holding v1's revision tries to update")
        try:
            await manager.update(alice, alice_scope, theme.id, expected_revision=theme.revision,
                                 content="Alice prefers light mode")
        except MemoryConflictError as exc:
            _refused(str(exc))

        _step("history of the theme preference")
        click.echo(fmt.history_text(await manager.history(alice, alice_scope, theme.id)))

        _step("alice deletes it (soft delete keeps a tombstone version)")
        deleted = await manager.delete(alice, alice_scope, theme.id,
                                       expected_revision=updated.revision)
        _ok(f"tombstone v{deleted.version}")
        try:
            await manager.get(alice, alice_scope, theme.id)
        except MemoryNotFoundError:
            _ok("the deleted memory is invisible to reads")
        click.echo(fmt.history_text(await manager.history(alice, alice_scope, theme.id)))

        page = await manager.list(alice, alice_scope, limit=10)
        _step(f"alice's live memories ({len(page.items)})")
        click.echo(fmt.page_text(page))

    _step(f"the event trail ({len(captured.events)} events; no content, queries or metadata)")
    click.echo(fmt.event_table(captured.events))
    click.echo()
    click.echo(f"Explore further: governed-memory list --db {db} --tenant acme "
               f"--project support --user alice")


@click.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="where to create the demo database [default: a new temp dir]")
def demo(directory: Path | None) -> None:
    """Walk through governed memory on a fresh SQLite database."""
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="governed-memory-demo-"))
    elif (directory / "memory.db").exists():
        raise click.UsageError(f"{directory / 'memory.db'} exists; the demo needs a fresh "
                               "directory")
    directory.mkdir(parents=True, exist_ok=True)
    asyncio.run(run_demo(directory))
