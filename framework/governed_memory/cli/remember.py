"""``governed-memory remember --transcript FILE``: memories formed from a conversation,
each fact decided against what one exact scope holds, as the tenant's operator.

The transcript is JSON: a list of messages (``role``, ``content``, and optionally
``turn_id`` and ``source_type``), or an object with such a list under ``messages`` (the
REST route's body); ``-`` reads it from stdin. The language model is the profile's
``[stores.language_model]``; without one the command is refused (configuration, exit
7). A transcript that does not read is a usage error (exit 2) before the manager is
built; a message that does not hold is a validation error naming it (exit 2, a rejected
operation in the trail). Each decision is printed on a line (``--json``: the whole
result); every write was its own governed operation in the trail, and running the
command again on the same transcript writes nothing twice.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from governed_memory.cli.common import (
    creates_database,
    db_option,
    emit,
    json_option,
    operator,
    run_with_manager,
    scope_from,
    scope_options,
)
from governed_memory.remembering import (
    DEFAULT_CONFIDENCE_FLOOR,
    DEFAULT_WINDOW,
    MAX_WINDOW,
    RememberResult,
)

if TYPE_CHECKING:
    from governed_memory.manager import GovernedMemoryManager

MAX_TRANSCRIPT_BYTES = 16 * 1024 * 1024


def read_transcript(source: str) -> list[Any]:
    """The messages of a transcript file (``-``: stdin); a file that is not one is a
    usage error naming the option."""
    try:
        if source == "-":
            text = sys.stdin.read(MAX_TRANSCRIPT_BYTES + 1)
        else:
            with open(source, encoding="utf-8") as handle:
                text = handle.read(MAX_TRANSCRIPT_BYTES + 1)
    except OSError as exc:
        raise click.BadParameter(f"cannot read {source}: {exc.strerror}",
                                 param_hint="--transcript") from None
    except UnicodeDecodeError:
        raise click.BadParameter("not UTF-8 text", param_hint="--transcript") from None
    if len(text) > MAX_TRANSCRIPT_BYTES:
        raise click.BadParameter(f"larger than {MAX_TRANSCRIPT_BYTES} characters",
                                 param_hint="--transcript")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc.msg} (line {exc.lineno})",
                                 param_hint="--transcript") from None
    if isinstance(data, dict) and set(data) == {"messages"}:
        data = data["messages"]
    if not isinstance(data, list):
        raise click.BadParameter("a transcript is a JSON list of messages, or an object "
                                 "with one under \"messages\"", param_hint="--transcript")
    return data


def result_text(result: RememberResult) -> str:
    """One line per decision (what, which record, why), then the totals."""
    lines = []
    for decision in result.decisions:
        record = decision.record_id or "-"
        what = decision.content if decision.content is not None else "(not shown)"
        lines.append(f"{decision.decision.value:<16} {record:<26} {what}")
        lines.append(f"{'':<16} {decision.reason}" + (
            f" (was {decision.previous_id})" if decision.previous_id else ""))
    counts = ", ".join(f"{kind} {result.count(kind)}" for kind in
                       sorted({d.decision.value for d in result.decisions}))
    lines.append(f"{len(result.decisions)} facts ({counts or 'none'}); "
                 f"{result.model_calls} model calls ({result.model})")
    return "\n".join(lines)


@click.command()
@db_option
@scope_options
@click.option("--transcript", "transcript", required=True, metavar="FILE.json",
              help="the conversation: a JSON list of {role, content[, turn_id, "
                   "source_type]} (- for stdin)")
@click.option("--window", type=click.IntRange(1, MAX_WINDOW), default=DEFAULT_WINDOW,
              show_default=True, help="messages one model call reads")
@click.option("--confidence-floor", type=click.FloatRange(0, 1),
              default=DEFAULT_CONFIDENCE_FLOOR, show_default=True,
              help="below it a fact's source type is inferred (a profile may review it)")
@json_option
@creates_database
def remember(db: Path | None, transcript: str, window: int, confidence_floor: float,
             as_json: bool, **scope_kw: Any) -> None:
    """Form memories from a conversation transcript (JSON): each fact added, updated,
    superseded, unchanged, held for review or refused."""
    scope = scope_from(scope_kw)
    messages = read_transcript(transcript)

    async def work(manager: GovernedMemoryManager) -> RememberResult:
        # Without a model, remember refuses at once (MemoryConfigurationError: exit 7).
        return await manager.remember(operator(scope.tenant_id), scope, messages,
                                      window=window, confidence_floor=confidence_floor)

    emit(run_with_manager(db, work), as_json, result_text)
