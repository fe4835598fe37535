"""``rego``: an OPA Rego module and its data document decide, in process.

Teams that already write Open Policy Agent policies keep writing them; ``regopy``
(Microsoft's rego-cpp) evaluates the module without an OPA server. The input is the
same request the Cedar plugin sends (:mod:`governed_memory_policies.policy_as_code`),
one per scope the operation touches::

    input.principal   {principal_id, kind, tenant_id, user_id?, permissions: [...]}
    input.action      "add", "search", ...
    input.action_kind "read", "write", "index" or "maintenance"
    input.resource    {tenant_id, project_id?, ..., memory_type?, source_type?, ...}
    input.context     {profile_id, profile_version, profile_revision}

The module's package defines three rules, whose messages are the decision's reasons:

- ``deny``: a set of messages; any message denies;
- ``review``: a set of messages; any message holds a new memory for review;
- ``allow``: true when the operation may run; undefined or false denies, as Cedar does
  when no policy permits (write ``default allow := true`` to only take away).

Deny beats allow; review applies only to what would be allowed. An evaluation error
(conflicting rule values, a built-in function's error, an unknown function) or a
decision of the wrong shape denies. The module is compiled once into a bundle when the
profile loads, checked for rules and references that could never apply
(:mod:`governed_memory_policies.rego_checks`: a rule nothing reads, an ``input`` field a
request never has, a ``data`` path the document does not hold), and evaluated on sample
requests, so a module that cannot decide is refused before any operation runs.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs
from governed_memory.canonical import canonical_json
from governed_memory.operations import Operation
from governed_memory.policy import PolicyCheck, PolicyVerdict
from governed_memory.principal import Principal
from governed_memory.profiles.spec import MemoryProfileSpec

from governed_memory_policies.names import REGO
from governed_memory_policies.policy_as_code import (
    SAMPLE_CONTEXT,
    SAMPLE_PRINCIPALS,
    AccessRequest,
    CompiledSets,
    PolicySourceError,
    Source,
    access_requests,
    check_keys,
    context_attributes,
    first_line,
    missing_package,
    principal_attributes,
    read_json_document,
    read_source,
    sample_requests,
    set_hash,
    shorten,
    strictest,
)
from governed_memory_policies.rego_checks import find_problems

if TYPE_CHECKING:
    import regopy  # type: ignore[import-untyped]

log = logging.getLogger(__name__)

CODE_REVISION: Final = "1"
CONFIG_KEYS: Final = ("module", "module_file", "data", "data_file", "resource_package")
DECISION_PACKAGE: Final = "governed_memory_decision"
ENTRYPOINT: Final = f"{DECISION_PACKAGE}/decision"
_PACKAGE: Final = re.compile(r"package\s+([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"
                             r"\s*(?:#.*)?$")
_MESSAGE: Final = re.compile(r"\(errormsg (\d+):")
_OFFSET: Final = re.compile(r"\(error \d+:(?P<file>[^|]*)\|(?P<offset>\d+)\|")
_CACHE_SIZE: Final = 1024
DATA_EXAMPLE: Final = '{"teams": {"support": {"agents": ["agent:support-bot"]}}}'
"""The shape of ``data``, shown when a value does not have it."""
_IMPURE: Final = re.compile(r"\b(?:time\.now_ns|rand\.|uuid\.|http\.send|net\.lookup|"
                            r"opa\.runtime|io\.jwt\.decode_verify|"
                            r"crypto\.x509\.parse_and_verify)")
"""Built-ins whose answer can change from one call to the next: a module naming one (even
in a comment) has every decision evaluated afresh."""

_WRAPPER: Final = """package {decision}

import rego.v1

default allow := false

allow := data.{package}.allow

default deny := []

deny := data.{package}.deny

default review := []

review := data.{package}.review

decision := {{"allow": allow, "deny": deny, "review": review}}
"""
"""Reads the module's three rules with their defaults, as one entrypoint: one query a
decision, and a module without ``deny`` or ``review`` still decides."""


def _regopy() -> Any:
    """regopy ships no type information; imported when a policy is first built."""
    import regopy  # type: ignore[import-untyped, unused-ignore]

    return regopy


@attrs.frozen(slots=True, eq=False)
class CompiledModule:
    """A module and data document compiled once into a bundle, with the interpreter that
    runs it. rego-cpp's interpreter is not safe to share between threads, hence the
    lock; a decision holds it for one query."""

    bundle: regopy.Bundle
    runner: regopy.Interpreter
    lock: threading.Lock
    package: str
    set_hash: str
    pure: bool
    """No built-in whose answer changes between calls (time, randomness, the network)."""

    def query(self, value: regopy.Input) -> Any:
        """The decision object, or an :class:`_Failure` saying why there is none.

        Through ``regopy.rego_shared`` rather than ``Interpreter.query_bundle_entrypoint``:
        that one parses the output as JSON before returning it (and raises when rego-cpp
        reports an error as its output), so every decision would be parsed twice."""
        shared = _regopy().rego_shared
        with self.lock:
            self.runner.set_input(value)
            output = shared.rego_bundle_query_entrypoint(self.runner._impl, self.bundle._impl,
                                                         ENTRYPOINT)
            try:
                text = shared.rego_output_string(output) if shared.rego_output_ok(output) \
                    else ""
            finally:
                shared.rego_free_output(output)
        if text.startswith("{"):
            try:
                return (json.loads(text).get("expressions") or [None])[0]
            except json.JSONDecodeError:
                pass
        found = _MESSAGE.search(text)
        if found is None:
            return _Failure("")
        return _Failure(text[found.end():found.end() + int(found.group(1))])


@attrs.frozen(slots=True)
class _Failure:
    message: str


class RegoPolicy:
    name = REGO

    def __init__(self, compiled: CompiledModule, profile: MemoryProfileSpec) -> None:
        regopy = _regopy()
        self.compiled = compiled
        self.set_hash = compiled.set_hash
        self.revision = f"{CODE_REVISION}:{compiled.set_hash}"
        self._context = context_attributes(profile)
        self._input = regopy.Input
        self._inputs = functools.lru_cache(maxsize=_CACHE_SIZE)(self._input_uncached)
        # A decision is a pure function of the input unless the module asks the clock,
        # chance or the network: then it is evaluated every time, else remembered.
        self.remembers = compiled.pure
        self._decisions = (functools.lru_cache(maxsize=_CACHE_SIZE)(self._decide)
                           if compiled.pure else self._decide)

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        # On the loop: a hop to a thread costs about what a decision does
        # (bench/policy_cost.py), and rego-cpp's interpreter is locked for one query anyway.
        try:
            return self.decide(check.principal, access_requests(check))
        except Exception as exc:  # fail closed
            log.warning("Rego module %s failed: %r", self.set_hash, exc)
            return PolicyVerdict.deny(shorten(f"Rego evaluation failed: {exc}"))

    def decide(self, principal: Principal, requests: Sequence[AccessRequest]) -> PolicyVerdict:
        return self._decisions(principal, tuple(requests))

    def _decide(self, principal: Principal, requests: tuple[AccessRequest, ...]
                ) -> PolicyVerdict:
        return strictest([_verdict(request, self.compiled.query(self._inputs(principal, request)))
                          for request in requests])

    def _input_uncached(self, principal: Principal, request: AccessRequest) -> regopy.Input:
        """Kept (bounded): building an input crosses into rego-cpp once per value, which
        costs about as much as the query, and an agent repeats its principal and scopes."""
        return self._input(_document(principal_attributes(principal), request, self._context))


def _document(principal: Mapping[str, Any], request: AccessRequest,
              context: Mapping[str, str]) -> dict[str, Any]:
    return {"principal": dict(principal), "action": request.action,
            "action_kind": request.action_kind, "resource": request.resource_dict(),
            "context": dict(context)}


def _verdict(request: AccessRequest, decision: Any) -> PolicyVerdict:
    problem = _shape_problem(decision)
    if problem is not None:
        return PolicyVerdict.deny(problem)
    deny, review = decision["deny"], decision["review"]
    if deny:
        return PolicyVerdict.deny(shorten("; ".join(sorted(deny))))
    if decision["allow"] is not True:
        return PolicyVerdict.deny(f"no Rego rule allows {request.action}")
    if review:
        return PolicyVerdict.review(shorten("; ".join(sorted(review))))
    return PolicyVerdict.allow()  # `allow` carries no message: nothing to record


def _shape_problem(decision: Any) -> str | None:
    if isinstance(decision, _Failure):
        return shorten(f"Rego evaluation failed: {decision.message}" if decision.message else
                       "Rego evaluation failed (a rule conflict or a built-in function error)")
    if decision is None:
        return "Rego decision undefined"
    if not isinstance(decision, dict):
        return "Rego decision malformed"
    if not isinstance(decision.get("allow"), bool):
        return "Rego decision malformed: allow must be true or false"
    for rule in ("deny", "review"):
        messages = decision.get(rule)
        if not isinstance(messages, list) or not all(isinstance(m, str) for m in messages):
            return f"Rego decision malformed: {rule} must be a set of messages"
    return None


# -- loading -------------------------------------------------------------------------------

_COMPILED: CompiledSets[CompiledModule] = CompiledSets()


def build(config: Mapping[str, Any], profile: MemoryProfileSpec) -> RegoPolicy:
    check_keys(REGO, config, CONFIG_KEYS)
    try:
        _regopy()
    except ImportError:
        raise missing_package(REGO, "regopy", "rego") from None
    module = read_source(config, "module", required=True)
    assert module is not None
    data = read_json_document(config, "data", expect=dict,
                              shape=f"an object (the module's data), e.g. {DATA_EXAMPLE}")
    return RegoPolicy(compile_module(module, data), profile)


def compile_module(module: Source, data: tuple[Source, Any] | None = None) -> CompiledModule:
    """Compile and check a module, or raise :class:`PolicySourceError`."""
    documents = {"module": module.text, "data": data[1] if data else {}}
    digest = set_hash(REGO, documents)
    return _COMPILED.get(digest, lambda: _compile(module, data, digest))


def _compile(module: Source, data: tuple[Source, Any] | None, digest: str) -> CompiledModule:
    regopy = _regopy()
    package = package_of(module)
    builder = _interpreter()
    try:
        builder.add_module(module.name, module.text)
    except regopy.RegoError as exc:
        raise _rego_error(module, exc) from None
    if data is not None:
        try:
            builder.add_data_json(canonical_json(data[1]))
        except regopy.RegoError as exc:
            raise PolicySourceError(f"the data document was refused: {first_line(exc)}",
                                    source=data[0].name) from None
    builder.add_module("<governed-memory decision>",
                       _WRAPPER.format(decision=DECISION_PACKAGE, package=package))
    try:
        bundle = builder.build(None, [ENTRYPOINT])
    except regopy.RegoError as exc:
        raise _rego_error(module, exc) from None
    if not bundle.ok():
        raise PolicySourceError("does not compile", source=module.name)
    problems = find_problems(module.text, package, data[1] if data else {})
    if problems:
        first, rest = problems[0], problems[1:]
        more = "".join(f"; line {p.line}: {p.detail}" for p in rest)
        raise PolicySourceError(first.detail + more, source=module.name, line=first.line)
    runner = _interpreter()
    pure = _IMPURE.search(module.text) is None
    compiled = CompiledModule(bundle, runner, threading.Lock(), package, digest, pure)
    _check_samples(compiled, module)
    return compiled


def _interpreter() -> regopy.Interpreter:
    regopy = _regopy()
    interpreter = regopy.Interpreter()
    interpreter.strict_built_in_errors = True  # an erring built-in is an error, not undefined
    interpreter.log_level = regopy.LogLevel.NONE  # errors are raised, not printed to stdout
    return interpreter


def package_of(module: Source) -> str:
    """The module's package: its first statement, as Rego requires."""
    for number, raw in enumerate(module.text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        found = _PACKAGE.match(line)
        if found is None:
            raise PolicySourceError("must start with a package declaration (package "
                                    "a.b, dotted names only)", source=module.name,
                                    line=number)
        package = found.group(1)
        if package == DECISION_PACKAGE or package.startswith(DECISION_PACKAGE + "."):
            raise PolicySourceError(f"package {package} is reserved", source=module.name,
                                    line=number)
        return package
    raise PolicySourceError("is empty", source=module.name)


def _check_samples(compiled: CompiledModule, module: Source) -> None:
    """Every operation's request, with every optional attribute and with none, must
    get a well-formed decision: else the first real operation would deny."""
    regopy = _regopy()
    for principal, index in zip(SAMPLE_PRINCIPALS, (0, 1), strict=True):
        for operation in Operation:
            request = sample_requests(operation)[index]
            decision = compiled.query(regopy.Input(_document(principal, request, SAMPLE_CONTEXT)))
            problem = _shape_problem(decision)
            if problem is not None:
                raise PolicySourceError(f"fails on a sample {operation.value} request: "
                                        + problem.removeprefix("Rego "),
                                        source=module.name)


def _rego_error(module: Source, exc: Exception) -> PolicySourceError:
    """rego-cpp reports ``(error <n>:<file>|<offset>|<length> (errormsg <n>:<text>) …)``:
    the first message, and the line of its offset in the module."""
    text = str(exc)
    message = "does not compile"
    found = _MESSAGE.search(text)
    if found is not None:
        start = found.end()
        message = text[start:start + int(found.group(1))]
    line = None
    place = _OFFSET.search(text)
    if place is not None and place.group("file") == module.name:
        line = module.text.encode("utf-8")[:int(place.group("offset"))].count(b"\n") + 1
    return PolicySourceError(f"does not compile: {shorten(message)}", source=module.name,
                             line=line)
