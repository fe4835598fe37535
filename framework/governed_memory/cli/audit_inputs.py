"""What an audit command is given: a trail (files, or a store read through its sink
plugin) and the checkpoints and keys that come beside it.

Every command takes its trail the same way (``TRAIL`` or ``--store DSN``), reads
checkpoint files the same way (the sink's head-only ones and ``audit checkpoint``'s
Merkle ones alike) and refuses a bad key or an unsigned checkpoint the same way; so
these are shared here rather than repeated per command. A large trail gets a progress
bar on a terminal.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import click

from governed_memory.audit.chain import FORMAT, ChainFormatError, Checkpoint
from governed_memory.audit.proofs import (
    CHECKPOINT_FORMAT,
    KeyFileError,
    ProofError,
    TreeCheckpoint,
)
from governed_memory.audit.stored import StoredTrail, TrailStore
from governed_memory.audit.strict_json import JsonDocumentError, read_json
from governed_memory.audit.verify import AnyCheckpoint, Source
from governed_memory.cli.audit_exits import bad_document, refuse
from governed_memory.cli.exit_codes import exit_code
from governed_memory.errors import GovernedMemoryError

STORE_SINKS: Final = {"postgresql": "postgres-trail", "postgres": "postgres-trail"}
"""The event sink (registered by a plugin: the native one) that reads a trail store,
by the scheme of its connection string."""


class _TrailParam(click.ParamType):  # type: ignore[type-arg]
    """A trail directory or file (which must exist), or a trail store's connection
    string (``postgresql://...``), kept as the string."""

    name = "trail"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Path | str:
        if isinstance(value, str) and value.split("://", 1)[0] in STORE_SINKS and "://" in value:
            return value
        converted: Path = click.Path(exists=True, path_type=Path).convert(value, param, ctx)
        return converted


TRAIL = click.argument("trail", nargs=-1, required=False, type=_TrailParam())
TrailArgs = tuple[Path | str, ...]
A_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


def store_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--store DSN`` and ``--schema S``: read the trail straight from PostgreSQL."""
    command = click.option("--schema", default=None, metavar="SCHEMA",
                           help="the trail store's schema (default governed_memory)")(command)
    return click.option("--store", default=None, metavar="DSN",
                        help="read the trail from this PostgreSQL store (a postgresql:// "
                             "connection string) instead of files")(command)


@contextlib.contextmanager
def trail_sources(trail: TrailArgs, store: str | None, schema: str | None
                  ) -> Iterator[tuple[Source, ...]]:
    """The trail to read: files and directories as given, or one trail store (a
    ``postgresql://`` TRAIL or ``--store``) opened through the event sink its plugin
    registered, and closed afterwards. A store that cannot be read ends the command
    with ``error (<code>): ...`` and the CLI's exit code for it (9: unavailable)."""
    stores = [item for item in trail if isinstance(item, str)] + ([store] if store else [])
    if not trail and not stores:
        raise click.UsageError("give TRAIL (the trail's directory or files, or a "
                               "postgresql:// store), or --store DSN")
    if not stores:
        if schema is not None:
            raise click.UsageError("--schema names a trail store's schema: give --store too")
        yield tuple(item for item in trail if isinstance(item, Path))
        return
    if len(stores) > 1 or len(trail) + (1 if store else 0) > 1:
        raise click.UsageError("a trail store is read on its own: give one postgresql:// "
                               "trail (as TRAIL or --store) and no files")
    try:
        opened = _open_store(stores[0], schema)
        try:
            yield (opened,)
        finally:
            opened.close()
    except GovernedMemoryError as exc:
        click.echo(f"error ({exc.code}): {exc}", err=True)
        raise SystemExit(exit_code(exc.code)) from None


def _open_store(dsn: str, schema: str | None) -> StoredTrail:
    from governed_memory.errors import MemoryConfigurationError
    from governed_memory.plugins import PluginManager

    scheme = dsn.split("://", 1)[0]
    if scheme not in STORE_SINKS or "://" not in dsn:
        raise click.BadParameter(f"a trail store is a connection string starting "
                                 f"{' or '.join(s + '://' for s in STORE_SINKS)}",
                                 param_hint="--store")
    name = STORE_SINKS[scheme]
    config: dict[str, Any] = {"dsn": dsn}
    if schema is not None:
        config["schema"] = schema
    sink = PluginManager.load().sinks.get(name).factory(config)
    if not isinstance(sink, TrailStore):
        raise MemoryConfigurationError(f"event sink {name!r} cannot be read as a trail store")
    return sink.stored_trail()


def stored_trail(sources: tuple[Source, ...]) -> StoredTrail | None:
    return sources[0] if len(sources) == 1 and isinstance(sources[0], StoredTrail) else None


def read_checkpoints(paths: tuple[Path, ...]) -> list[tuple[str, AnyCheckpoint]]:
    """Every checkpoint in the files (one JSON per line), with where it was found: the
    sink's head-only ones and ``audit checkpoint``'s Merkle ones alike."""
    found: list[tuple[str, AnyCheckpoint]] = []
    for path in paths:
        for number, line in enumerate(path.read_bytes().split(b"\n"), 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            found.append((where, _checkpoint_line(line.removesuffix(b"\r"), where)))
    return found


def _checkpoint_line(line: bytes, where: str) -> AnyCheckpoint:
    try:
        value = read_json(line, where)
    except JsonDocumentError as exc:
        bad_document(exc)
    kind = value.get("format") if isinstance(value, dict) else None
    if kind == CHECKPOINT_FORMAT:
        try:
            return TreeCheckpoint.from_json(line, source=where)
        except ProofError as exc:
            refuse(f"{where}: {exc}")
    try:
        return Checkpoint.from_json(line, source=where)
    except ChainFormatError as exc:
        raise click.BadParameter(str(exc), param_hint="--checkpoint") from None


def read_tree_checkpoint(path: Path, option: str = "--checkpoint") -> TreeCheckpoint:
    """The one Merkle checkpoint a file holds (what ``audit checkpoint`` wrote)."""
    found = read_checkpoints((path,))
    if len(found) != 1:
        raise click.BadParameter(f"{path}: holds {len(found)} checkpoints, give a file of "
                                 "one", param_hint=option)
    where, checkpoint = found[0]
    if not isinstance(checkpoint, TreeCheckpoint):
        raise click.BadParameter(f"{where}: a head-only checkpoint (format {FORMAT}) has no "
                                 "Merkle root to prove against: take one with `audit "
                                 "checkpoint`", param_hint=option)
    return checkpoint


def read_public_key(path: Path | None) -> Any:
    if path is None:
        return None
    from governed_memory.audit.signing import load_public_key_file

    try:
        return load_public_key_file(path)
    except KeyFileError as exc:
        raise click.BadParameter(str(exc), param_hint="--public-key") from None


def require_signed_by(key: Any, checkpoints: list[tuple[str, AnyCheckpoint]]) -> None:
    """Refuse (exit 5) unless every checkpoint is signed by ``key``."""
    for where, checkpoint in checkpoints:
        if not isinstance(checkpoint, TreeCheckpoint):
            refuse(f"{where}: a head-only checkpoint carries no signature, and one by the "
                   "given key is required")
        try:
            checkpoint.verify_signature(key)
        except ProofError as exc:
            refuse(f"{where}: {exc}")


PROGRESS_FROM_BYTES: Final = 64 * 1024 * 1024
"""A trail this large takes seconds to read: show a bar (on a terminal only)."""


@contextlib.contextmanager
def progress_bar(trail: tuple[Source, ...], label: str
                 ) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on stderr over the bytes of ``trail``, when it is large and stderr
    a terminal (a pipe or a test gets the output alone)."""
    from governed_memory.audit.proving import trail_bytes

    total = trail_bytes(trail)
    if total < PROGRESS_FROM_BYTES or not _interactive():
        yield None
        return
    with click.progressbar(length=total, label=label, file=sys.stderr) as bar:
        yield bar.update


def _interactive() -> bool:
    return sys.stderr.isatty()
