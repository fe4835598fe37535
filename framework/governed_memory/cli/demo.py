"""``governed-memory demo``: the product, end to end, on a fresh SQLite file.

It runs under the ``chat-assistant`` profile, built the way every command builds its
manager (:func:`governed_memory.cli.building.build_manager`), so what it shows is what
the profile does: a credential refused, contact details redacted, a memory the
assistant read on a web page held for review and approved, two users of one tenant
and another tenant kept apart, a stale update refused, a user erased with a receipt,
and the hash-chained trail of all of it, verified at the end.

``chat-assistant@1.0.0`` itself redacts credentials (people paste keys into chats) and
keeps contact details. So that both policies show, the demo writes a variant next to
its database, ``chat-assistant-demo@1.0.0``: the same profile with
``privacy.secret_guard = "reject"`` and PII redaction on. It says so, and the file is
an ordinary profile: ``--profile <dir>/chat-assistant-demo-1.0.0.toml`` uses it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import click

from governed_memory.cli.building import DEFAULT_TRAIL, build_manager
from governed_memory.errors import GovernedMemoryError, MemoryNotFoundError
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.scope import Scope

BASE_PROFILE: Final = "chat-assistant@1.0.0"
DEMO_ID: Final = "chat-assistant-demo"
CHANGES: Final = ('privacy.secret_guard = "reject"  (chat-assistant redacts credentials)',
                  'privacy.pii_redaction = true, pii_kinds = ["email", "phone"], and '
                  '"pii-redaction" in policies.enabled  (chat-assistant keeps them)')

RW = frozenset({Permission.READ, Permission.WRITE})
ALICE = Principal("user:alice", PrincipalKind.USER, "acme", "alice", RW | {Permission.DELETE})
BOB = Principal("user:bob", PrincipalKind.USER, "acme", "bob", RW)
MALLORY = Principal("user:mallory", PrincipalKind.USER, "globex", "mallory", RW)
MODERATOR = Principal("svc:moderator", PrincipalKind.SERVICE, "acme",
                      permissions=frozenset({Permission.READ, Permission.REVIEW}))
PRIVACY_OFFICER = Principal("svc:privacy-officer", PrincipalKind.SERVICE, "acme",
                            permissions=frozenset(Permission))
ALICE_SCOPE = Scope("acme", user_id="alice")
BOB_SCOPE = Scope("acme", user_id="bob")

FAKE_TOKEN: Final = "ghp_" + "Zq4" * 12
"""Shaped like a GitHub token (and refused as one), issued by nobody."""


def _step(number: int, title: str) -> None:
    click.echo()
    click.secho(f"== {number}. {title}", bold=True)


def _say(text: str) -> None:
    click.echo(f"   {text}")


def _ok(text: str) -> None:
    click.secho(f"   ok: {text}", fg="green")


def _refused(exc: GovernedMemoryError) -> None:
    click.secho(f"   refused, as it should be ({exc.code}): {exc}", fg="yellow")


async def _expect_refusal(attempt: Callable[[], Awaitable[Any]]) -> GovernedMemoryError:
    try:
        await attempt()
    except GovernedMemoryError as exc:
        _refused(exc)
        return exc
    raise click.ClickException("the demo expected a refusal and got none")


def write_profile(directory: Path) -> Path:
    """The demo's variant of ``chat-assistant@1.0.0``, as a TOML file in ``directory``,
    loaded back to prove it says what was meant."""
    from governed_memory.cli import toml_text
    from governed_memory.plugins import PluginManager
    from governed_memory.profiles import (
        ProfileRegistry,
        load_profile,
        parse_profile,
        unstructure_profile,
    )

    base = ProfileRegistry.from_plugins(PluginManager.load()).get(BASE_PROFILE)
    data = unstructure_profile(base)
    data["id"] = DEMO_ID
    data["description"] = ("The governed-memory demo: chat-assistant@1.0.0 with credentials "
                           "refused and contact details redacted.")
    data["privacy"].update(secret_guard="reject", pii_redaction=True,
                           pii_kinds=["email", "phone"])
    enabled = list(data["policies"]["enabled"])
    enabled.insert(enabled.index("secret-guard") + 1, "pii-redaction")
    data["policies"]["enabled"] = enabled
    meant = parse_profile(data, source="the demo profile")
    path = directory / f"{DEMO_ID}-{base.version}.toml"
    header = (f"Written by `governed-memory demo`: {BASE_PROFILE} with two changes,\n"
              + "\n".join(f"- {change}" for change in CHANGES))
    path.write_text(toml_text.dumps(data, header=header), encoding="utf-8")
    written = load_profile(path)
    if written.revision != meant.revision:
        raise click.ClickException(f"{path} does not load back as the profile meant")
    return path


async def run_demo(directory: Path) -> None:
    db = directory / "memory.db"
    trail = directory / DEFAULT_TRAIL
    profile = write_profile(directory)
    manager = build_manager(str(profile), db)
    spec = manager.profile_spec
    assert spec is not None
    click.secho("governed-memory demo: the chat-assistant profile, end to end", bold=True)
    click.echo(f"profile:  {spec.key}  revision {spec.revision}")
    click.echo(f"          {BASE_PROFILE} with:")
    for change in CHANGES:
        click.echo(f"            {change}")
    click.echo(f"          written to {profile}")
    click.echo(f"database: {db}")
    click.echo(f"trail:    {trail}")

    async with manager:
        _step(1, "alice tells the assistant how to reach her: contact details are redacted")
        contact = await manager.add(
            ALICE, ALICE_SCOPE, "Alice prefers e-mail to calls: alice@example.com, "
                                "not +1 415 555 0100", memory_type="preference")
        _say(f"stored {contact.id}: {contact.content!r}")
        _ok("the pii-redaction policy rewrote the write before it reached storage")

        _step(2, "she pastes a credential into the chat: refused, nothing is stored")
        denied = await _expect_refusal(lambda: manager.add(
            ALICE, ALICE_SCOPE, f"my GitHub token is {FAKE_TOKEN}", memory_type="fact"))
        _say(f"decision {getattr(denied, 'decision_id', None)} is in the trail")

        _step(3, "the assistant read a fact on a web page: held for review")
        theme = await manager.add(ALICE, ALICE_SCOPE, "Alice prefers dark mode in every editor",
                                  memory_type="preference", key="ui.theme")
        web = await manager.add(
            ALICE, ALICE_SCOPE, "Acme's billing portal moved to billing.acme.example",
            memory_type="fact", provenance={"source_type": "web",
                                            "source_id": "https://acme.example/news/billing"})
        _say(f"{web.id} is {web.status.value} (source_type web is reviewed by this profile)")
        hits = (await manager.search(ALICE, ALICE_SCOPE, "billing portal")).hits
        _say(f"alice's search for 'billing portal' before review: {len(hits)} hit(s)")
        pending = await manager.list_pending(MODERATOR, ALICE_SCOPE)
        _say(f"the moderator's queue: {', '.join(r.id for r in pending.items)}")
        approved = await manager.approve(MODERATOR, ALICE_SCOPE, web.id,
                                         expected_revision=web.revision)
        hits = (await manager.search(ALICE, ALICE_SCOPE, "billing portal")).hits
        _ok(f"approved by {MODERATOR.principal_id}: {approved.status.value}, "
            f"v{approved.version}; the search now finds {', '.join(h.record.id for h in hits)}")

        _step(4, "scope isolation: another user of acme, and another tenant")
        await manager.add(BOB, BOB_SCOPE, "Bob prefers light mode and large fonts",
                          memory_type="preference")
        found = (await manager.search(BOB, BOB_SCOPE, "dark mode editor")).hits
        _say(f"bob searches 'dark mode editor' and finds only his own: "
             f"{'; '.join(repr(h.record.content) for h in found) or 'nothing'}")
        _say("bob asks for alice's scope:")
        await _expect_refusal(lambda: manager.search(BOB, ALICE_SCOPE, "dark mode"))
        _say(f"mallory of tenant globex asks for {theme.id} in acme:")
        await _expect_refusal(lambda: manager.get(MALLORY, ALICE_SCOPE, theme.id))

        _step(5, "compare-and-set: a stale update is refused")
        updated = await manager.update(ALICE, ALICE_SCOPE, theme.id,
                                       expected_revision=theme.revision,
                                       content="Alice prefers dark mode, high contrast")
        _ok(f"{theme.id} v{theme.version} -> v{updated.version}, revision {updated.revision}")
        _say(f"a second writer still holding revision {theme.revision}:")
        await _expect_refusal(lambda: manager.update(
            ALICE, ALICE_SCOPE, theme.id, expected_revision=theme.revision,
            content="Alice prefers light mode"))

        _step(6, "erasure: the privacy officer erases alice, with a receipt")
        receipt = await manager.delete_user(PRIVACY_OFFICER, "acme", "alice")
        counts = ", ".join(f"{name} {count}" for name, count in sorted(receipt.counts.items()))
        _say(f"receipt {receipt.receipt_hash}")
        _say(f"request {receipt.request_id}: {counts} in {len(receipt.scope_hashes)} scope(s)")
        try:
            await manager.get(ALICE, ALICE_SCOPE, theme.id)
        except MemoryNotFoundError:
            _ok(f"{theme.id} is gone; bob's memories stay: "
                f"{len((await manager.list(BOB, BOB_SCOPE)).items)} record(s)")

    _step(7, "the trail this run wrote, read back and verified")
    _show_trail(trail)
    click.echo()
    click.echo(f"Explore further: governed-memory --profile {profile} list --db {db} "
               "--tenant acme --user bob")


def _show_trail(trail: Path) -> None:
    from governed_memory.audit import iter_entries, verify_trail
    from governed_memory.cli import format as fmt

    entries = list(iter_entries([trail]))
    labels = {ALICE_SCOPE.scope_hash: "A", BOB_SCOPE.scope_hash: "B"}
    click.echo(f"   {len(entries)} events; no content, queries or metadata values. Scopes: "
               f"A = {ALICE_SCOPE.scope_hash} (acme/alice), B = {BOB_SCOPE.scope_hash} "
               "(acme/bob)")
    click.echo(fmt.trail_table([entry.event for entry in entries], labels))
    verification = verify_trail([trail])
    if not verification.ok:
        raise click.ClickException(f"the trail does not verify: {verification.problem}")
    click.echo()
    _ok(f"{verification.entries} entries chained from the genesis, head {verification.head}")
    _say(f"check it yourself: governed-memory audit verify {trail}")
    _say(f"what happened to alice's data: governed-memory audit report {trail} "
         "--tenant acme --user alice")


@click.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="where to create the demo database [default: a new temp dir]")
def demo(directory: Path | None) -> None:
    """Walk through governed memory on a fresh SQLite database, under the chat-assistant
    profile."""
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="governed-memory-demo-"))
    elif (directory / "memory.db").exists():
        raise click.UsageError(f"{directory / 'memory.db'} exists; the demo needs a fresh "
                               "directory")
    directory.mkdir(parents=True, exist_ok=True)
    from governed_memory.cli.common import run

    run(lambda: run_demo(directory))
