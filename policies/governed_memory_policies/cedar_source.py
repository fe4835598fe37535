"""Cedar's errors turned into ones a policy author can act on: at a line, by ``@id``.

Cedar names policies by position (``policy3``) and its parse error names no line, but
the person who wrote the set knows them by their ``@id`` and finds them by line. So a
set's text is cut into its policies here, as Cedar counts them, and every error the
plugin raises or puts into a reason names the policy by its ``@id`` and places it in the
file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from governed_memory_policies.cedar_checks import Problem
from governed_memory_policies.policy_as_code import PolicySourceError, Source, first_line

if TYPE_CHECKING:
    import cedarpy


def statements(text: str) -> list[tuple[int, int, int]]:
    """(start, end, first line) of each policy in Cedar text, in order: what Cedar's
    positional ids (``policy0``, …) count. A policy ends at a ``;`` outside a string;
    Cedar's only comments are ``//`` to the end of the line."""
    found: list[tuple[int, int, int]] = []
    index, size, line = 0, len(text), 1
    start: int | None = None
    start_line = 1
    while index < size:
        char = text[index]
        if char == "\n":
            line += 1
        elif char == "/" and text.startswith("//", index):
            end = text.find("\n", index)
            index = size if end < 0 else end
            continue
        elif not char.isspace():
            if start is None:
                start, start_line = index, line
            if char == '"':
                index += 1
                while index < size and text[index] != '"':
                    if text[index] == "\\":
                        index += 1
                    elif text[index] == "\n":
                        line += 1
                    index += 1
            elif char == ";":
                found.append((start, index + 1, start_line))
                start = None
        index += 1
    if start is not None:
        found.append((start, size, start_line))
    return found


def line_of(starts: Sequence[int], policy_id: str | None) -> int | None:
    """The line a positional Cedar id (``policy3``) starts on."""
    if not policy_id or not policy_id.startswith("policy"):
        return None
    try:
        return starts[int(policy_id.removeprefix("policy"))]
    except (ValueError, IndexError):
        return None


def erring_policy(error: str, names: Mapping[str, str]) -> str | None:
    """The positional id of the policy a Cedar error names, if it names one."""
    for policy_id in names:
        if f"`{policy_id}`" in error or f" {policy_id}:" in error:
            return policy_id
    return None


def named(text: str, names: Mapping[str, str]) -> str:
    """Cedar's message with each positional id (`` `policy3` ``) as the policy's @id."""
    for policy_id, shown in names.items():
        if shown != policy_id:
            text = text.replace(f"`{policy_id}`", f"`{shown}`")
    return text


def evaluation_error(error: str, names: Mapping[str, str]) -> str:
    """``policy <@id>: <what failed>`` from Cedar's ``error while evaluating policy
    `policy3`: <what failed>``; Cedar's text, with @ids, when it names no policy."""
    policy = erring_policy(error, names)
    if policy is None:
        return named(error, names)
    _, marker, rest = error.partition(f"`{policy}`: ")
    detail = rest if marker else named(error, names)
    return f"policy {names[policy]}: {detail}"


def parse_error(policies: Source, exc: ValueError) -> PolicySourceError:
    """Cedar's parse error names no line: parse policy by policy to find it."""
    import cedarpy

    for index, (begin, end, line) in enumerate(statements(policies.text)):
        try:
            cedarpy.PolicySet.from_str(policies.text[begin:end])
        except ValueError as one:
            return PolicySourceError(f"does not parse: {first_line(one)}",
                                     source=policies.name, line=line, policy=f"policy{index}")
    return PolicySourceError(f"does not parse: {first_line(exc)}", source=policies.name)


def validation_error(policies: Source, schema: Source, starts: Sequence[int],
                     names: Mapping[str, str], errors: Sequence[cedarpy.ValidationError]
                     ) -> PolicySourceError:
    """Every validation error of the set, each placed at its policy's line and named by
    its ``@id``; the error itself placed at the first."""
    lines = []
    for error in errors:
        line = line_of(starts, error.policy_id)
        shown = names.get(error.policy_id, error.policy_id)
        message = named(error.error, names)
        lines.append(f"{shown} (line {line}): {message}" if line else f"{shown}: {message}")
    first = errors[0]
    return PolicySourceError(
        f"does not validate against the schema {schema.name}: " + "; ".join(lines),
        source=policies.name, line=line_of(starts, first.policy_id),
        policy=names.get(first.policy_id, first.policy_id) or None)


def never_applies(policies: Source, spans: Sequence[tuple[int, int, int]],
                  names: Mapping[str, str], problems: Sequence[Problem]
                  ) -> PolicySourceError:
    """One error for every policy that can never apply (or never take a branch it was
    written for), placed at the first."""
    placed = []
    for problem in problems:
        index = int(problem.policy_id.removeprefix("policy"))
        begin, end, line = spans[index]
        if problem.word is not None:
            line = _word_line(policies.text, begin, end, line, problem.word)
        placed.append((line, names.get(problem.policy_id, problem.policy_id), problem))
    line, shown, first = placed[0]
    more = "".join(f"; policy {name} (line {at}): {p.detail}" for at, name, p in placed[1:])
    return PolicySourceError(first.detail + more, source=policies.name, line=line,
                             policy=shown)


def _word_line(text: str, begin: int, end: int, line: int, word: str) -> int:
    """The line of the first whole ``word`` in ``text[begin:end]`` outside a comment;
    ``line`` (the policy's first) when there is none."""
    for number, row in enumerate(text[begin:end].split("\n")):
        code = _code_part(row)
        if re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", code):
            return line + number
    return line


def _code_part(row: str) -> str:
    """A line without its ``//`` comment (a ``//`` inside a string is kept)."""
    quoted = False
    index = 0
    while index < len(row):
        char = row[index]
        if char == "\\" and quoted:
            index += 2
            continue
        if char == '"':
            quoted = not quoted
        elif not quoted and row.startswith("//", index):
            return row[:index]
        index += 1
    return row
