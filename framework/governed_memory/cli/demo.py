"""``governed-memory demo``: what the product is for, told as one short story.

An assistant remembers things about its users; governed-memory decides what it may
remember, who may read it, what goes into a prompt, and keeps the evidence. The demo
runs the real ``chat-assistant@1.0.0`` profile (the rules a chat product would use),
built the way every command builds its manager
(:func:`governed_memory.cli.building.build_manager`), on a fresh SQLite file:

1. alice tells the assistant about herself: each memory is printed before anything
   refers to it;
2. she pastes a credential: the profile's secret guard redacts it before storage;
3. the assistant read a fact on a web page: held for review, invisible until approved;
4. bob (same company) and mallory (another company) cannot reach alice's memories;
5. two writers race on one memory: compare-and-set refuses the stale one;
6. the point of it all: alice asks a question, and the context builder places her
   recalled memories into the prompt, quoted as data;
7. the privacy officer erases alice, with a receipt, and the same question recalls
   nothing;
8. the audit trail: counted by type, the events that tell the story, and the chain
   verified.

Every term is explained in plain words the first time it is printed. It is
deterministic in what it shows (ids and hashes differ per run) and takes about a second.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from governed_memory.cli.building import build_manager
from governed_memory.errors import GovernedMemoryError, MemoryNotFoundError
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.scope import Scope

if TYPE_CHECKING:
    from governed_memory.manager import GovernedMemoryManager
    from governed_memory.records import MemoryRecord

PROFILE: Final = "chat-assistant@1.0.0"

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
CHAT = Scope("acme", user_id="alice", session_id="tuesday")
"""The conversation alice is in when she asks her question (step 6)."""

THEME: Final = "Alice prefers dark mode in every editor"
THEME_UPDATE: Final = "Alice prefers dark mode with high contrast in every editor"
CONTACT: Final = "Alice prefers e-mail to phone calls"
WEB_FACT: Final = "Acme's billing portal moved to billing.acme.example"
FAKE_TOKEN: Final = "ghp_" + "Zq4" * 12
"""Shaped like a GitHub token (and caught as one), issued by nobody."""
QUESTION: Final = "Should my new editor use dark mode?"
SYSTEM: Final = "You are Acme's helpful assistant."

RECEIPT_WORDS: Final[Mapping[str, str]] = {
    "records": "memories",
    "versions": "past versions of them",
    "index_entries": "search-index entries",
    "retrieval_snapshots": "stored searches (kept so a search can be replayed)",
    "cached_searches": "cached search results",
    "idempotency_entries": "remembered results of retried writes",
}
"""The erasure receipt's counts, in plain words."""

EVENT_WORDS: Final[tuple[tuple[str, str], ...]] = (
    ("memory.write.requested", "a write asked for (recorded before anything happens)"),
    ("memory.write.committed", "a write done"),
    ("memory.write.rejected", "a write refused"),
    ("memory.read.requested", "a read asked for"),
    ("memory.read.completed", "a read answered"),
    ("memory.read.rejected", "a read refused"),
    ("memory.erasure.receipt", "an erasure's receipt"),
    ("memory.cache.", "the search cache's bookkeeping (fills, hits, misses, clearing)"),
)


def _step(number: int, title: str) -> None:
    click.echo()
    click.secho(f"== {number}. {title}", bold=True)


def _say(text: str) -> None:
    click.echo(f"   {text}")


def _explain(term: str, meaning: str) -> None:
    """A term's meaning, the first time the demo prints it."""
    click.secho(f"   ({term}: {meaning})", dim=True)


def _ok(text: str) -> None:
    click.secho(f"   ok: {text}", fg="green")


def _refused(exc: GovernedMemoryError) -> None:
    click.secho(f"   refused, as it should be ({exc.code}): {exc}", fg="yellow")


def _memory(record: MemoryRecord) -> None:
    _say(f"{record.id}  {record.memory_type.value:<10} {record.content!r}")


async def _expect_refusal(attempt: Callable[[], Awaitable[Any]]) -> GovernedMemoryError:
    try:
        await attempt()
    except GovernedMemoryError as exc:
        _refused(exc)
        return exc
    raise click.ClickException("the demo expected a refusal and got none")


async def run_demo(directory: Path) -> None:
    db = directory / "memory.db"
    manager = build_manager(PROFILE, db)
    spec = manager.profile_spec
    if spec is None or spec.audit.path is None:
        raise click.ClickException(f"{PROFILE} names no audit trail; the demo shows one")
    trail = directory / spec.audit.path
    click.secho("governed-memory demo: an assistant's memory, governed", bold=True)
    click.echo(f"profile:  {spec.key}  (the rules: storage, policies, retention, review)")
    click.echo(f"          revision {spec.revision}")
    _explain("revision of a profile", "a hash of every setting; each event records it, "
                                      "so the rules in force can be proven later")
    click.echo(f"database: {db}")
    click.echo(f"trail:    {trail}")
    _explain("trail", "the audit trail: one line per event, no content, each line "
                      "chained to the one before by its hash")
    click.echo("people:   alice and bob (users of the tenant acme), mallory (of the tenant "
               "globex), a moderator and a privacy officer")
    _explain("tenant", "one customer of the product; its data is never another's")

    async with manager:
        theme = await _alice_remembers(manager)
        await _credential(manager)
        await _review(manager)
        await _isolation(manager, theme)
        theme = await _compare_and_set(manager, theme)
        await _context(manager, theme)
        await _erasure(manager, theme)

    _step(8, "the audit trail this run wrote, read back and verified")
    _show_trail(trail)
    click.echo()
    click.echo(f"Explore further: governed-memory --profile {PROFILE} list --db {db} "
               "--tenant acme --user bob")


async def _alice_remembers(manager: GovernedMemoryManager) -> MemoryRecord:
    _step(1, "alice tells the assistant about herself; it stores two memories")
    _explain("scope", "whose memory it is: here tenant acme, user alice; every read and "
                      "write names one, and the caller must be allowed in it")
    theme = await manager.add(ALICE, ALICE_SCOPE, THEME, memory_type="preference",
                              key="ui.theme")
    contact = await manager.add(ALICE, ALICE_SCOPE, CONTACT, memory_type="preference")
    for record in (theme, contact):
        _memory(record)
    _explain("id", "each memory's name from now on; the demo refers to them by it")
    return theme


async def _credential(manager: GovernedMemoryManager) -> None:
    _step(2, "she pastes a credential into the chat: redacted before it is stored")
    _explain("policy", "a rule the profile runs on every operation before storage sees "
                       "it; the secret guard is one")
    pasted = await manager.add(ALICE, ALICE_SCOPE, f"My GitHub token is {FAKE_TOKEN}",
                               memory_type="fact")
    _memory(pasted)
    if FAKE_TOKEN in pasted.content:
        raise click.ClickException("the demo expected the token to be redacted")
    _ok("the token never reached the database")
    _say("chat-assistant redacts (people paste keys into chats and the rest of the "
         "message is worth keeping); the local and compliance-strict profiles refuse "
         "the write instead")


async def _review(manager: GovernedMemoryManager) -> None:
    _step(3, "the assistant read a fact on a web page: held for review")
    web = await manager.add(
        ALICE, ALICE_SCOPE, WEB_FACT, memory_type="fact",
        provenance={"source_type": "web", "source_id": "https://acme.example/news/billing"})
    _memory(web)
    _say(f"its status is {web.status.value}")
    _explain("pending_review", "stored, but no read returns it until a reviewer approves "
                               "it: a web page may carry instructions aimed at the model")
    hits = (await manager.search(ALICE, ALICE_SCOPE, "billing portal")).hits
    _say(f"alice searches 'billing portal' before review: {len(hits)} hit(s)")
    pending = await manager.list_pending(MODERATOR, ALICE_SCOPE)
    _say(f"the moderator's queue: {', '.join(r.id for r in pending.items)}")
    approved = await manager.approve(MODERATOR, ALICE_SCOPE, web.id,
                                     expected_revision=web.revision)
    hits = (await manager.search(ALICE, ALICE_SCOPE, "billing portal")).hits
    _ok(f"approved by {MODERATOR.principal_id}: {approved.status.value}, version "
        f"{approved.version}; the search now finds {', '.join(h.record.id for h in hits)}")
    _explain("version", "each change of a memory is a new version; the old ones stay in "
                        "its history")


async def _isolation(manager: GovernedMemoryManager, theme: MemoryRecord) -> None:
    _step(4, "bob and mallory cannot reach alice's memories")
    bobs = await manager.add(BOB, BOB_SCOPE, "Bob prefers light mode and large fonts",
                             memory_type="preference")
    _say("bob, a user of acme too, stores one of his own:")
    _memory(bobs)
    found = (await manager.search(BOB, BOB_SCOPE, "dark mode editor")).hits
    _say(f"bob searches 'dark mode editor' in his scope and finds only his: "
         f"{', '.join(h.record.id for h in found) or 'nothing'}")
    _say("bob asks to search alice's scope:")
    await _expect_refusal(lambda: manager.search(BOB, ALICE_SCOPE, "dark mode"))
    _say(f"mallory, of the tenant globex, asks for {theme.id} in acme:")
    await _expect_refusal(lambda: manager.get(MALLORY, ALICE_SCOPE, theme.id))
    _explain("principal", "who is calling (alice, bob, a service), from the application's "
                          "login, never from what a user typed")


async def _compare_and_set(manager: GovernedMemoryManager,
                           theme: MemoryRecord) -> MemoryRecord:
    _step(5, "two writers change the same memory: the stale one is refused")
    _explain("revision of a memory", "a token that changes with every write; an update "
                                     "names the revision it read and is refused if "
                                     "another write came first: compare-and-set")
    _say(f"{theme.id} is at version {theme.version}, revision {theme.revision}")
    updated = await manager.update(ALICE, ALICE_SCOPE, theme.id,
                                   expected_revision=theme.revision, content=THEME_UPDATE)
    _ok(f"the first writer updated it: version {updated.version}, revision "
        f"{updated.revision}, {updated.content!r}")
    _say(f"a second writer still holding revision {theme.revision}:")
    await _expect_refusal(lambda: manager.update(
        ALICE, ALICE_SCOPE, theme.id, expected_revision=theme.revision,
        content="Alice prefers light mode"))
    _say("nothing was overwritten: that writer re-reads and decides again")
    return updated


async def _context(manager: GovernedMemoryManager, theme: MemoryRecord) -> None:
    from governed_memory.tiers import MemoryTiers
    from governed_memory.turncontext import MemoryContextBuilder

    _step(6, "what it is for: alice asks a question, and her memories go into the prompt")
    _say(f"in a new conversation, alice asks: {QUESTION!r}")
    builder = MemoryContextBuilder(MemoryTiers(long_term=manager))
    context = await builder.build(ALICE, CHAT, QUESTION)
    _say(f"the context builder recalled {len(context.recalled)} of her memories "
         f"({', '.join(m.record.id for m in context.recalled)}) and wrote the system "
         "prompt the assistant's model receives:")
    _prompt(context.prompt_messages(SYSTEM))
    _explain("memory block", "recalled memories quoted as data between <memory-data> "
                             "lines, so a stored sentence can never pose as an instruction")
    if not any(m.record.id == theme.id for m in context.recalled):
        raise click.ClickException("the demo expected the context to recall "
                                   f"{theme.id}")
    _ok(f"{theme.id} (version {theme.version}) is in the prompt; the trail records which "
        "memory versions each prompt received")


def _prompt(messages: list[dict[str, object]]) -> None:
    system = str(messages[0]["content"])
    click.echo("   | " + "\n   | ".join(system.splitlines()))
    click.echo(f"   then the question: {messages[-1]['content']!r}")


async def _erasure(manager: GovernedMemoryManager, theme: MemoryRecord) -> None:
    from governed_memory.tiers import MemoryTiers
    from governed_memory.turncontext import MemoryContextBuilder

    _step(7, "alice asks to be forgotten: the privacy officer erases her, with a receipt")
    receipt = await manager.delete_user(PRIVACY_OFFICER, "acme", "alice")
    _say(f"receipt {receipt.receipt_hash}")
    _explain("receipt", "evidence of the erasure: what was removed where and when, sealed "
                        "by the hash above, which the trail records too")
    order = list(RECEIPT_WORDS)
    for name, count in sorted(receipt.counts.items(),
                              key=lambda item: (order.index(item[0]) if item[0] in order
                                                else len(order), item[0])):
        _say(f"  {count:>3} {RECEIPT_WORDS.get(name, name.replace('_', ' '))}")
    _say(f"in {len(receipt.scope_hashes)} scope(s)")
    try:
        await manager.get(ALICE, ALICE_SCOPE, theme.id)
    except MemoryNotFoundError:
        _ok(f"{theme.id} is gone")
    else:
        raise click.ClickException(f"{theme.id} survived the erasure")
    context = await MemoryContextBuilder(MemoryTiers(long_term=manager)).build(
        ALICE, CHAT, QUESTION)
    _ok(f"the same question now recalls {len(context.recalled)} memories: the prompt "
        f"has {'no memory block' if not context.memory_block else 'a memory block'}")
    _ok(f"bob's memories stay: {len((await manager.list(BOB, BOB_SCOPE)).items)} "
        "record(s)")


def _show_trail(trail: Path) -> None:
    from governed_memory.audit import iter_entries, verify_trail
    from governed_memory.cli import format as fmt

    events = [entry.event for entry in iter_entries([trail])]
    click.echo(f"   {len(events)} events, none holding content, queries or metadata "
               "values. By type:")
    for count, kind, words in _counts(events):
        click.echo(f"   {count:>5}  {kind:<26} {words}")
    labels = {ALICE_SCOPE.scope_hash: "alice", BOB_SCOPE.scope_hash: "bob",
              CHAT.scope_hash: "alice's chat"}
    click.echo()
    _say("the events that tell the story: every refusal, the approval, the erasure, and "
         "which memories each prompt received (record_context):")
    click.echo(fmt.trail_table(_story(events), labels))
    for label, scope in (("alice", ALICE_SCOPE), ("bob", BOB_SCOPE),
                         ("alice's chat", CHAT)):
        _say(f"scope {label + ':':<13} {scope.scope_hash}  ({_dimensions(scope)})")
    _explain("scope hash", "how the trail names a scope: sh1: (the version of the "
                           "derivation) and a one-way hash of its tenant, user and "
                           "session, so the trail can be read without naming alice")
    verification = verify_trail([trail])
    if not verification.ok:
        raise click.ClickException(f"the trail does not verify: {verification.problem}")
    click.echo()
    _ok(f"{verification.entries} entries chained from the first, head "
        f"{verification.head}")
    _explain("head", "the hash of the last entry: it changes if any earlier line is "
                     "edited, removed or reordered; keep it elsewhere to prove that")
    _say(f"check it yourself: governed-memory audit verify {trail}")
    _say(f"what happened to alice's data: governed-memory audit report {trail} "
         "--tenant acme --user alice")


def _counts(events: Iterable[Mapping[str, Any]]) -> list[tuple[int, str, str]]:
    """Events by type, the cache's grouped into one line so they do not drown the rest."""
    counted: Counter[str] = Counter()
    for event in events:
        kind = str(event.get("type", "?"))
        counted["memory.cache.*" if kind.startswith("memory.cache.") else kind] += 1
    rows = []
    for kind, count in sorted(counted.items(), key=lambda item: (-item[1], item[0])):
        words = next((w for prefix, w in EVENT_WORDS if kind.rstrip("*") == prefix), "")
        rows.append((count, kind, words))
    return rows


def _story(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The few events a reader wants: refusals, the approval, the erasure (and its
    receipt), and which memory versions each prompt received."""
    kept = []
    for event in events:
        kind, operation = str(event.get("type", "")), event.get("operation")
        if (kind.endswith(".rejected") or kind == "memory.erasure.receipt"
                or (kind == "memory.write.committed"
                    and operation in ("approve", "delete_user"))
                or (kind == "memory.read.completed" and operation == "record_context")):
            kept.append(event)
    return kept


def _dimensions(scope: Scope) -> str:
    return ", ".join(f"{name.removesuffix('_id')} {value}"
                     for name, value in scope.dimensions().items())


@click.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="where to create the demo database [default: a new temp dir]")
def demo(directory: Path | None) -> None:
    """Walk through governed memory on a fresh SQLite database, under the chat-assistant
    profile: from a remembered preference to the prompt it ends up in."""
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="governed-memory-demo-"))
    elif (directory / "memory.db").exists():
        raise click.UsageError(f"{directory / 'memory.db'} exists; the demo needs a fresh "
                               "directory")
    directory.mkdir(parents=True, exist_ok=True)
    from governed_memory.cli.common import run

    run(lambda: run_demo(directory))
