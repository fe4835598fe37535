"""How an audit command ends, so that a script can tell an alarm from a wrong argument.

The exit codes are the ones ``governed-memory audit --help`` lists (and
:mod:`governed_memory.cli.audit` explains): a trail that does not verify says
``BROKEN`` and exits 1, a checkpoint or proof that does not hold says ``REFUSED`` and
exits 5, and JSON that is not strict is told as one line ``error (<code>): ...``.
Every command ends through these, so each outcome is told the same way everywhere.
"""

from __future__ import annotations

from typing import Final, NoReturn

import click

from governed_memory.audit.strict_json import INVALID_JSON, JsonDocumentError
from governed_memory.audit.verify import BROKEN, NO_TRAIL, NOT_A_TRAIL, Problem, TrailProblemError

EXIT_CODES = {BROKEN: 1, NOT_A_TRAIL: 3, NO_TRAIL: 4}
"""Exit code by ``Problem.kind`` (0: verified; 2: bad arguments, click's own)."""
EXIT_USAGE: Final = 2
EXIT_REFUSED: Final = 5
EXIT_NOT_WITHIN: Final = 6


def refuse(message: str) -> NoReturn:
    click.echo(f"REFUSED {message}", err=True)
    raise SystemExit(EXIT_REFUSED)


def bad_document(exc: JsonDocumentError) -> NoReturn:
    """A document that is not strict JSON: one line, ``error (<code>): <file>: <why>``;
    exit 2 if it is not JSON at all (no such document was given), else 5 (REFUSED: JSON
    that no writer of it produces, such as a duplicate key, is what an edit leaves)."""
    click.echo(f"error ({exc.code}): {exc}", err=True)
    raise SystemExit(EXIT_USAGE if exc.code == INVALID_JSON else EXIT_REFUSED)


def say_problem(problem: Problem) -> None:
    """Only damage is called BROKEN; the other kinds say what they are themselves."""
    prefix = "BROKEN " if problem.kind == BROKEN else ""
    click.echo(f"{prefix}{problem}", err=True)


def exit_for(problem: Problem) -> NoReturn:
    raise SystemExit(EXIT_CODES.get(problem.kind, 1))


def trail_failure(exc: Exception) -> NoReturn:
    """The exit for what proving over a trail ran into."""
    from governed_memory.audit.proving import EventNotInTreeError

    if isinstance(exc, TrailProblemError):
        say_problem(exc.problem)
        exit_for(exc.problem)
    if isinstance(exc, EventNotInTreeError):
        click.echo(str(exc), err=True)
        raise SystemExit(EXIT_NOT_WITHIN)
    refuse(str(exc))
