"""Load-time checks that a Rego module's rules can apply to the requests this plugin sends.

Rego fails quietly where a typo is concerned: a reference to something that does not
exist is *undefined*, and an undefined expression makes its rule body fail, so a
``deny`` rule that reads ``input.resource.sensitivty`` simply never denies, and a rule
named ``denny`` is simply never read. rego-cpp compiles both without complaint. So the
module's text is read for the few references whose answer is known when the profile
loads, and a module is refused when:

- a rule is never used: the engine reads ``allow``, ``deny`` and ``review`` of the
  module's package, so any other rule must be used by one of them (a misspelt rule
  name is such a rule);
- it reads an ``input`` field a request never has (``input.resource.sensitivty``,
  ``input.principal.role``): the input's fields are fixed by
  :mod:`governed_memory_policies.policy_as_code`;
- it reads a ``data`` path that the data document does not hold (``data.teams.suport``):
  the document is fixed for the policy, so the path is undefined on every request; or a
  rule of its own package that it does not define (``data.<package>.restrictd``).

References are read with a small tokenizer (strings and comments skipped; ``import``
aliases followed). A reference through a variable (``r := input.resource; r.x``) is not
followed: that is a limit of these checks, not a promise.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from governed_memory_policies.policy_as_code import (
    CONTEXT_ATTRIBUTES,
    PRINCIPAL_ATTRIBUTES,
    RESOURCE_ATTRIBUTES,
)

DECISION_RULES: Final = ("allow", "deny", "review")
INPUT_FIELDS: Final[Mapping[str, tuple[str, ...] | None]] = {
    "principal": PRINCIPAL_ATTRIBUTES,
    "action": None,
    "action_kind": None,
    "resource": RESOURCE_ATTRIBUTES,
    "context": CONTEXT_ATTRIBUTES,
}
"""The input's fields, with the attributes of those that are objects."""

_TOKEN: Final = re.compile(r"""
    (?P<space>[ \t\r\f\v]+)
  | (?P<newline>\n)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<raw>`[^`]*`)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>\d[\d.eE+\-]*)
  | (?P<operator>:=|==|!=|<=|>=|[-+*/%|&<>=:,;.\[\](){}!$])
  | (?P<other>.)
""", re.VERBOSE)
_OPEN: Final = "([{"
_CLOSE: Final = ")]}"
_CONTINUES: Final = frozenset({":=", "=", "==", "!=", "<", ">", "<=", ">=", "if", "contains",
                               "else", ",", "+", "-", "*", "/", "%", "|", "&", ":", ".",
                               "in", "with", "as", "not", "some", "every", "default",
                               "import", "package"})
"""A token after which the next line goes on with the same statement."""


@attrs.frozen(slots=True)
class Token:
    kind: str
    text: str
    line: int
    depth: int
    """Brackets open before this token."""
    starts: bool
    """The first token of a top-level statement."""


@attrs.frozen(slots=True)
class Finding:
    line: int
    detail: str


def tokens(text: str) -> list[Token]:
    """The module's tokens, without spaces and comments."""
    found: list[Token] = []
    line, depth, fresh = 1, 0, True
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or "other"
        value = match.group()
        if kind == "newline":
            line += 1
            if depth == 0 and (not found or found[-1].text not in _CONTINUES):
                fresh = True
            continue
        if kind in ("space", "comment"):
            continue
        found.append(Token(kind, value, line, depth, fresh and depth == 0))
        fresh = False
        if kind == "raw":
            line += value.count("\n")
        if value in _OPEN:
            depth += 1
        elif value in _CLOSE:
            depth = max(0, depth - 1)
    return found


def find_problems(text: str, package: str, data: Any) -> list[Finding]:
    """Every unused rule, unknown input field and missing data path, in line order."""
    stream = tokens(text)
    heads = _rule_heads(stream)
    defined = set(heads.values())
    aliases = _imports(stream)
    used: set[str] = set(DECISION_RULES)
    findings: list[Finding] = []
    package_path = ["data", *package.split(".")]
    for index, token in enumerate(stream):
        if token.kind != "name" or index in heads or _after_dot(stream, index):
            continue
        if token.text in ("package", "import") and token.starts:
            continue
        used.add(token.text)
        if _in_statement(stream, index, ("package",)):
            continue
        path = _reference(stream, index)
        if path[0] in aliases:
            path = [*aliases[path[0]], *path[1:]]
        if path[0] == "input":
            findings.extend(_input_problem(path, token.line))
        elif path[0] == "data":
            if path[:len(package_path)] == package_path:
                if len(path) > len(package_path):
                    rule = path[len(package_path)]
                    used.add(rule)
                    if rule not in defined:
                        findings.append(Finding(token.line, _unknown(
                            ".".join(package_path), rule, sorted(defined),
                            f"package {package} defines", missing="is not defined")))
            else:
                findings.extend(_data_problem(path, data, token.line))
    for index, name in heads.items():
        if name not in used:
            guess = difflib.get_close_matches(name, DECISION_RULES, n=1)
            hint = f" (did you mean {guess[0]}?)" if guess else ""
            findings.append(Finding(stream[index].line, (
                f"rule {name} is never used{hint}: a decision reads only allow, deny and "
                f"review of package {package} (and the rules they use), so {name} would "
                "never apply")))
    return sorted(dict.fromkeys(findings), key=lambda f: f.line)


def _rule_heads(stream: Sequence[Token]) -> dict[int, str]:
    """Token index → rule name, for each top-level statement that defines a rule."""
    heads: dict[int, str] = {}
    for index, token in enumerate(stream):
        if not token.starts or token.kind != "name":
            continue
        if token.text in ("package", "import", "else"):
            continue
        if token.text == "default":
            following = index + 1
            if following < len(stream) and stream[following].kind == "name":
                heads[following] = stream[following].text
            continue
        heads[index] = token.text
    return heads


def _imports(stream: Sequence[Token]) -> dict[str, list[str]]:
    """``import data.a.b`` makes ``b`` mean ``data.a.b``; ``… as c``, ``c``."""
    aliases: dict[str, list[str]] = {}
    for index, token in enumerate(stream):
        if not (token.starts and token.text == "import"):
            continue
        if index + 1 >= len(stream):
            continue
        path = _reference(stream, index + 1)
        if path[0] not in ("data", "input") or len(path) < 2:
            continue  # rego.v1, future.keywords: not documents
        end = index + 1 + _reference_length(stream, index + 1)
        alias = path[-1]
        if end + 1 < len(stream) and stream[end].text == "as" and stream[end + 1].kind == "name":
            alias = stream[end + 1].text
        aliases[alias] = path
    return aliases


def _after_dot(stream: Sequence[Token], index: int) -> bool:
    return index > 0 and stream[index - 1].text == "."


def _in_statement(stream: Sequence[Token], index: int, keywords: Sequence[str]) -> bool:
    """Whether the token belongs to a top-level statement starting with a keyword."""
    while index >= 0 and not stream[index].starts:
        index -= 1
    return index >= 0 and stream[index].text in keywords


def _reference(stream: Sequence[Token], index: int) -> list[str]:
    """``name``, then each ``.field`` and ``["field"]`` after it (a dynamic ``[x]`` ends
    what is known)."""
    path = [stream[index].text]
    at = index + 1
    while at < len(stream):
        token = stream[at]
        if token.text == "." and at + 1 < len(stream) and stream[at + 1].kind == "name":
            path.append(stream[at + 1].text)
            at += 2
        elif (token.text == "[" and at + 2 < len(stream) and stream[at + 1].kind == "string"
              and stream[at + 2].text == "]"):
            path.append(_unquote(stream[at + 1].text))
            at += 3
        else:
            break
    return path


def _reference_length(stream: Sequence[Token], index: int) -> int:
    at = index + 1
    while at + 1 < len(stream) and stream[at].text == "." and stream[at + 1].kind == "name":
        at += 2
    return at - index


def _unquote(literal: str) -> str:
    import json

    try:
        value = json.loads(literal)
    except ValueError:
        return literal[1:-1]
    return value if isinstance(value, str) else literal[1:-1]


def _input_problem(path: Sequence[str], line: int) -> list[Finding]:
    if len(path) < 2:
        return []
    field = path[1]
    if field not in INPUT_FIELDS:
        return [Finding(line, _unknown("input", field, tuple(INPUT_FIELDS),
                                       "the input has"))]
    attributes = INPUT_FIELDS[field]
    if len(path) < 3:
        return []
    if attributes is None:
        return [Finding(line, f"{'.'.join(path)} is never set: input.{field} is a string")]
    if path[2] not in attributes:
        return [Finding(line, _unknown(f"input.{field}", path[2], attributes,
                                       f"a request's {field} carries"))]
    return []


def _unknown(where: str, name: str, known: Sequence[str], lead: str, *,
             missing: str = "is never set") -> str:
    guess = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {guess[0]}?)" if guess else ""
    return f"{where}.{name} {missing}{hint}: {lead} {', '.join(known)}"


def _data_problem(path: Sequence[str], data: Any, line: int) -> list[Finding]:
    current = data
    for depth, key in enumerate(path[1:], start=1):
        if not isinstance(current, Mapping):
            return []  # an array or a value: indexing it is the module's business
        if key not in current:
            where = ".".join(path[:depth])
            guess = difflib.get_close_matches(key, [str(k) for k in current], n=1)
            hint = f" (did you mean {guess[0]}?)" if guess else ""
            held = ", ".join(sorted(str(k) for k in current)) or "nothing"
            return [Finding(line, f"{'.'.join(path[:depth + 1])} is not in the data "
                                  f"document{hint}: {where} holds {held}")]
        current = current[key]
    return []
