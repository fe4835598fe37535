"""The ``governed-memory`` command line: the root group and where each command lives.

Nothing here imports a command's module, the manager or a plugin: ``--help`` and
``--version`` print from the table below, and a command's module is imported when it
runs (see :mod:`governed_memory.cli.lazy`).
"""

from __future__ import annotations

import click

from governed_memory.cli.context import remember_profile
from governed_memory.cli.exit_codes import EXIT_HELP
from governed_memory.cli.lazy import LazyCommand, LazyGroup
from governed_memory.version import __version__

_CLI = "governed_memory.cli"


def _table(module: str, *commands: tuple[str, str, str]) -> dict[str, LazyCommand]:
    return {name: LazyCommand(f"{_CLI}.{module}:{attribute}", summary)
            for name, attribute, summary in commands}


COMMANDS: dict[str, LazyCommand] = {
    **_table("demo", ("demo", "demo", "Walk through governed memory on a fresh SQLite "
                                      "database, under the chat-assistant profile: from "
                                      "a remembered preference to the prompt it ends up "
                                      "in.")),
    **_table("providers", ("providers", "providers", "Registered memory providers.")),
    **_table("memories",
             ("add", "add", "Write a memory (CONTENT, or - to read it from stdin)."),
             ("get", "get", "Read one memory by id or key."),
             ("list", "list_", "Page through the memories of one exact scope, oldest first."),
             ("search", "search", "Search the memories of one exact scope."),
             ("put", "put", "Write CONTENT (or - for stdin) under KEY: added when the "
                            "key is new, else a new version; compare-and-set with "
                            "--expected-revision."),
             ("update", "update", "Change a memory: new CONTENT (or - for stdin) and/or "
                                  "fields; compare-and-set with --expected-revision."),
             ("delete", "delete", "Delete a memory (soft: a tombstone version; --hard: gone "
                                  "with its history)."),
             ("history", "history", "Every version of a memory, oldest first."),
             ("replay", "replay", "Replay a stored retrieval snapshot: what that search "
                                  "returned, at its versions.")),
    **_table("remember", ("remember", "remember", "Form memories from a conversation "
                                                  "transcript (JSON): each fact added, "
                                                  "updated, superseded, unchanged, held for "
                                                  "review or refused.")),
    **_table("blocks", ("blocks", "blocks", "Memory blocks: read and edit the named texts a "
                                            "profile declares, which every per-turn "
                                            "context places in the prompt.")),
    **_table("erasure",
             ("delete-user", "delete_user", "Erase a user in every scope of the tenant (and "
                                            "the conversation turns and memory blocks the "
                                            "profile keeps for them) and print the erasure "
                                            "receipt."),
             ("delete-all", "delete_all", "Erase every memory of one exact scope (not its "
                                          "sub-scopes)."),
             ("purge-expired", "purge_expired", "Physically remove the expired memories of "
                                                "one exact scope, page by page.")),
    **_table("review",
             ("approve", "approve", "Accept a memory held for review: it becomes active and "
                                    "visible."),
             ("reject", "reject", "Refuse a memory held for review: it is erased with its "
                                  "history."),
             ("review", "review", "The review queue: memories held for a reviewer's "
                                  "decision.")),
    **_table("profiles", ("profiles", "profiles", "Versioned memory profiles and the domain "
                                                  "packs that select them.")),
    **_table("policies", ("policies", "policies", "Registered policy plugins.")),
    **_table("conformance", ("conformance", "conformance", "Prove a registered provider "
                                                           "against the shared conformance "
                                                           "suite.")),
    **_table("audit", ("audit", "audit", "Verify, query and report on a hash-chained audit "
                                         "trail (the ``audit`` sink).")),
    **_table("indexing",
             ("worker", "worker", "Run the indexing and maintenance worker: embed what writes "
                                  "queued, enforce retrieval-snapshot retention and remove "
                                  "expired records of every scope, until SIGINT/SIGTERM "
                                  "(every round, every batch is governed)."),
             ("reindex", "reindex", "Re-embed, through the outbox, every live record lacking a "
                                    "vector of the profile's embedder (after the embedder or "
                                    "its model changed)."),
             ("outbox", "outbox", "Inspect and requeue the indexing outbox."),
             ("maintain", "maintain", "Run one maintenance round now: remove retrieval "
                                      "snapshots past their retention, then expired records "
                                      "of every scope, in bounded batches (every batch "
                                      "governed).")),
    **_table("extraction", ("extraction", "extraction", "Inspect and requeue the "
                                                        "extraction queue (turns whose "
                                                        "facts a worker extracts).")),
    **_table("plugin_commands", ("commands", "commands", "The commands plugins add (loads "
                                                         "every plugin, which --help does "
                                                         "not).")),
}
"""Every built-in command: its module and its short help (kept equal to the command's
own by a test)."""


@click.group(cls=LazyGroup, lazy=COMMANDS,
             epilog="Plugins add more commands (the service extra: serve, keys, mcp).\n\n"
                    "`governed-memory commands` lists them; docs/cli.md documents every "
                    "command.\n\n" + EXIT_HELP)
@click.version_option(__version__, prog_name="governed-memory")
@click.option("--profile", "profile", default=None, expose_value=False, is_eager=True,
              envvar="GOVERNED_MEMORY_PROFILE", callback=remember_profile,
              metavar="ID@VERSION|FILE",
              help="the profile every command below uses unless it names its own: a "
                   "registered reference or a TOML file [default: $GOVERNED_MEMORY_PROFILE, "
                   "else local@1.0.0]")
def cli() -> None:
    """Scoped, governed memory for LLM chat and agents.

    Every command is one governed operation (authorized, decided by the profile's
    policies, recorded in its audit trail) as the tenant's operator, on the SQLite
    database --db names (default $GOVERNED_MEMORY_HOME/memory.db, else
    ./.governed-memory/memory.db). add and worker create the database and its trail,
    demo its own in a fresh directory (and the service's serve, mcp and keys the files
    docs/service.md lists); every other command refuses one that does not exist.
    """


def main() -> None:
    """The command line, for a caller in Python: ends with ``SystemExit``."""
    cli()


def script() -> None:
    """The ``governed-memory`` console script: :func:`main`, then an exit that skips
    the interpreter's teardown (see :mod:`governed_memory.cli.fast_exit`)."""
    from governed_memory.cli.fast_exit import leave

    try:
        main()
    except SystemExit as done:
        leave(done.code)
    leave(0)


if __name__ == "__main__":
    script()
