"""What the click context carries from the root group to a command: the ``--profile``
chosen (the root's or the command's own) and whether the command may create its
database. Cheap to import: ``governed-memory --help`` runs the root option's callback.
"""

from __future__ import annotations

import os

import click

from governed_memory.cli.building import DEFAULT_PROFILE, PROFILE_ENV

_PROFILE_META = "governed_memory.profile"
_CREATES_META = "governed_memory.creates_database"


def remember_profile(ctx: click.Context, _: click.Parameter, value: str | None) -> None:
    """Keep ``--profile`` in the context: the root group's and a command's share one
    slot (``ctx.meta`` is shared down the chain), and the command's, parsed later,
    wins."""
    if value:
        ctx.meta[_PROFILE_META] = value


def current_profile() -> str:
    """``--profile`` (the command's, else the root group's), else
    ``$GOVERNED_MEMORY_PROFILE``, else ``local@1.0.0``."""
    ctx = click.get_current_context(silent=True)
    chosen = ctx.meta.get(_PROFILE_META) if ctx is not None else None
    return str(chosen or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE)


def allow_creating_database() -> None:
    """The running command may create its database (see ``common.creates_database``)."""
    click.get_current_context().meta[_CREATES_META] = True


def may_create_database() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(_CREATES_META))
