"""``governed-memory blocks show|append|replace|rethink|history``: the memory blocks a
profile declares, read and edited as the tenant's operator.

Each command goes through ``MemoryTiers.blocks`` over the manager the profile builds,
so it is governed like any other caller's call (decided, traced, in the trail) and
keeps the blocks' own rules: a block lives at the level its profile declares (the
scope the flags name, narrowed to it), ``--expected-version`` makes an edit a
compare-and-set (exit 5 on a block that moved on), and an edit past the block's limit
is refused naming by how much (exit 2). The blocks are kept by the profile's
``[stores.blocks]`` store, not in the memory database: a profile that declares none is
refused before anything is built (exit 7), naming what to declare.

The edits may create the database (a block edit can be an operator's first write);
``show`` and ``history`` refuse one that does not exist, like every other read.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from governed_memory.cli.common import (
    creates_database,
    current_profile,
    db_option,
    emit,
    json_option,
    operator,
    run,
    scope_from,
    scope_options,
)
from governed_memory.cli.context import may_create_database
from governed_memory.cli.format import when

if TYPE_CHECKING:
    from governed_memory.scope import Scope
    from governed_memory.tiers import Block, BlockHistory, MemoryBlocks

T = TypeVar("T")

MAX_TEXT_BYTES = 1024 * 1024
"""More than any block may hold (50,000 characters): a larger file is refused unread."""


def run_with_blocks(db: Path | None, work: Callable[[MemoryBlocks], Awaitable[T]]) -> T:
    """Build the profile's manager and its blocks (refusing a profile without any
    before anything is built), start them, run ``work``, close them; errors exit with
    their family's code."""
    profile = current_profile()

    async def main() -> T:
        from governed_memory.cli.building import build_manager
        from governed_memory.errors import MemoryConfigurationError
        from governed_memory.plugins import PluginManager
        from governed_memory.profiles.resolve import resolve_profile
        from governed_memory.tiers import MemoryTiers

        plugins = PluginManager.load()
        spec = resolve_profile(profile, plugins)
        if not spec.blocks:
            raise MemoryConfigurationError(
                f"the profile {spec.id}@{spec.version} declares no memory blocks: a "
                "profile declares each one as [blocks.<name>] (limit, description, "
                "initial, level) and the store that keeps them as [stores.blocks] "
                "(kind = \"sqlite\", config = { path = \"...\" }; or \"postgres\")")
        manager = build_manager(spec, db, must_exist=not may_create_database(),
                                plugins=plugins)
        async with MemoryTiers.from_manager(manager, plugins=plugins) as tiers:
            return await work(tiers.blocks)

    return run(main)


def block_json(block: Block) -> dict[str, Any]:
    """A block as the REST route returns it: its fields and its size."""
    from governed_memory.converter import unstructure

    data: dict[str, Any] = unstructure(block)
    data["chars"] = block.chars
    return data


def _indented(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.split("\n")) if text else "    (empty)"


def block_text(block: Block) -> str:
    """The block's name, version and size against its limit, what it is for, then its
    text, indented."""
    edited = (f"updated {when(block.updated_at)}" if block.updated_at is not None
              else "the profile's initial text")
    lines = [f"{block.name}  v{block.version}  {block.chars}/{block.limit} chars  ({edited})"]
    if block.description:
        lines.append(f"  {block.description}")
    lines.append(_indented(block.value))
    return "\n".join(lines)


def blocks_text(blocks: tuple[Block, ...]) -> str:
    return "\n\n".join(block_text(block) for block in blocks) or "(no blocks in this scope)"


def history_text(history: BlockHistory) -> str:
    if not history.versions:
        return (f"(no stored versions: {history.name} still reads as the profile's "
                "initial text)")
    return "\n\n".join(f"v{v.version}  {v.edit:<7} {when(v.updated_at)}  {len(v.value)} chars"
                       f"\n{_indented(v.value)}" for v in history.versions)


def _text_from(value: str | None, from_file: str | None, hint: str) -> str:
    """The text of ``value`` (``-``: stdin) or of ``--from-file`` (``-``: stdin), one
    trailing newline dropped, as a shell pipe or an editor adds one. Exactly one of
    them; empty stdin or an empty file is a usage error (``""`` empties a block on
    purpose)."""
    if (value is None) == (from_file is None):
        raise click.UsageError(f"give {hint} or --from-file, not both and not neither")
    if value is not None and value != "-":
        return value
    source = from_file if from_file is not None else "-"
    where = "--from-file" if from_file is not None else hint
    try:
        if source == "-":
            text = sys.stdin.read(MAX_TEXT_BYTES + 1)
        else:
            with open(source, encoding="utf-8") as handle:
                text = handle.read(MAX_TEXT_BYTES + 1)
    except OSError as exc:
        raise click.BadParameter(f"cannot read {source}: {exc.strerror}",
                                 param_hint=where) from None
    except UnicodeDecodeError:
        raise click.BadParameter("not UTF-8 text", param_hint=where) from None
    if len(text) > MAX_TEXT_BYTES:
        raise click.BadParameter(f"larger than {MAX_TEXT_BYTES} characters",
                                 param_hint=where)
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise click.BadParameter(f"{'stdin' if source == '-' else source} was empty "
                                 "(to empty the block, give \"\" as the text)",
                                 param_hint=where)
    return text


def _expected_version(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--expected-version", type=click.IntRange(min=0), default=None,
                        help="the version you read: refuse (exit 5) if the block has "
                             "moved on; without it the edit is applied to the newest "
                             "text")(func)


def _edited(db: Path | None, scope: Scope, as_json: bool,
            edit: Callable[[MemoryBlocks], Awaitable[Block]]) -> None:
    block = run_with_blocks(db, edit)
    if as_json:
        emit(block_json(block), True, str)
    else:
        click.echo(block_text(block))


@click.group()
def blocks() -> None:
    """Memory blocks: read and edit the named texts a profile declares, which every
    per-turn context places in the prompt.

    A profile declares each block as [blocks.<name>] and the store that keeps them as
    [stores.blocks]. Each command is one governed call as the tenant's operator; a
    block lives at the level its profile declares (user by default: give --user).
    """


@blocks.command("show")
@db_option
@scope_options
@click.option("--name", "names", multiple=True, metavar="NAME",
              help="only this block (repeatable) [default: every block the scope can "
                   "address]")
@json_option
def show(db: Path | None, names: tuple[str, ...], as_json: bool, **scope_kw: Any) -> None:
    """The blocks, in the profile's order: each one's version, size against its limit,
    and text."""
    scope = scope_from(scope_kw)
    found = run_with_blocks(db, lambda b: b.read(operator(scope.tenant_id), scope,
                                                 names or None))
    if as_json:
        emit({"blocks": [block_json(block) for block in found]}, True, str)
    else:
        click.echo(blocks_text(found))


@blocks.command("append")
@db_option
@scope_options
@click.argument("name")
@click.argument("text")
@_expected_version
@json_option
@creates_database
def append(db: Path | None, name: str, text: str, expected_version: int | None,
           as_json: bool, **scope_kw: Any) -> None:
    """Add TEXT (or - to read it from stdin) as a new line at the end of block NAME."""
    scope = scope_from(scope_kw)
    line = _text_from(text, None, "TEXT")
    _edited(db, scope, as_json, lambda b: b.append(
        operator(scope.tenant_id), scope, name, line, expected_version=expected_version))


@blocks.command("replace")
@db_option
@scope_options
@click.argument("name")
@click.argument("old")
@click.argument("new")
@_expected_version
@json_option
@creates_database
def replace(db: Path | None, name: str, old: str, new: str, expected_version: int | None,
            as_json: bool, **scope_kw: Any) -> None:
    """Replace the one occurrence of OLD in block NAME with NEW (NEW may be "")."""
    scope = scope_from(scope_kw)
    _edited(db, scope, as_json, lambda b: b.replace(
        operator(scope.tenant_id), scope, name, old, new, expected_version=expected_version))


@blocks.command("rethink")
@db_option
@scope_options
@click.argument("name")
@click.argument("value", required=False)
@click.option("--from-file", "from_file", default=None, metavar="PATH",
              help="read the new text from this UTF-8 file (- for stdin)")
@_expected_version
@json_option
@creates_database
def rethink(db: Path | None, name: str, value: str | None, from_file: str | None,
            expected_version: int | None, as_json: bool, **scope_kw: Any) -> None:
    """Write block NAME anew: VALUE (- for stdin, "" to empty it) or --from-file PATH."""
    scope = scope_from(scope_kw)
    text = _text_from(value, from_file, "VALUE")
    _edited(db, scope, as_json, lambda b: b.rethink(
        operator(scope.tenant_id), scope, name, text, expected_version=expected_version))


@blocks.command("history")
@db_option
@scope_options
@click.argument("name")
@click.option("--limit", type=click.IntRange(1, 100), default=20, show_default=True)
@click.option("--before-version", type=click.IntRange(min=1), default=None,
              help="only versions older than this one (to page back)")
@json_option
def history(db: Path | None, name: str, limit: int, before_version: int | None,
            as_json: bool, **scope_kw: Any) -> None:
    """The stored versions of block NAME, newest first, each with the edit that made
    it."""
    scope = scope_from(scope_kw)
    found = run_with_blocks(db, lambda b: b.history(
        operator(scope.tenant_id), scope, name, before_version=before_version, limit=limit))
    emit(found, as_json, history_text)
