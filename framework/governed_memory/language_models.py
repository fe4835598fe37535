"""The language-model protocol the context builder and extraction use, and a scripted
model for tests and documentation.

A model takes plain system and user strings and answers with text, or with a JSON
object for a schema. Nothing here needs a model: every feature that would call one
degrades without it, and a model that fails never fails a turn (the caller records
the degradation and moves on).

Adapters register through ``register_language_models``; the OpenAI-compatible HTTP
adapter lives in the ``governed_memory_openai`` plugin.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from governed_memory.errors import MemoryUnavailableError

JsonObject = Mapping[str, Any]


class LanguageModelError(MemoryUnavailableError):
    """The model could not answer (transport, refusal, malformed output). Callers in
    this package catch it and degrade; messages never quote prompts or answers."""

    code = "model_failed"


@runtime_checkable
class LanguageModel(Protocol):
    name: str

    async def generate_text(self, *, system: str, user: str) -> str: ...

    async def generate_structured(self, *, system: str, user: str,
                                  schema: JsonObject) -> JsonObject:
        """A JSON object meant to follow ``schema`` (callers still validate it)."""
        ...


TASK_PREFIX = "Task: "


def task_of(system: str) -> str | None:
    """The task a prompt names on its first line (``Task: summarize``), if any."""
    first = system.split("\n", 1)[0]
    return first.removeprefix(TASK_PREFIX).strip() if first.startswith(TASK_PREFIX) else None


@attrs.frozen(slots=True)
class ModelCall:
    system: str
    user: str
    structured: bool
    schema: JsonObject | None = None

    @property
    def task(self) -> str | None:
        return task_of(self.system)


Reply = str | Mapping[str, Any] | BaseException
Responder = Callable[[ModelCall], Reply]


class ScriptedModel:
    """A deterministic model: each call gets the next scripted reply, or the
    responder's answer for it. A reply that is an exception is raised (failure tests).

    Every call is recorded in ``calls`` so a test can assert how many the builder made
    and with which task.
    """

    name = "scripted"

    def __init__(self, script: Sequence[Reply] = (), *,
                 responder: Responder | None = None) -> None:
        self._script = list(script)
        self._responder = responder
        self.calls: list[ModelCall] = []

    def tasks(self) -> list[str | None]:
        return [call.task for call in self.calls]

    def push(self, *replies: Reply) -> None:
        self._script.extend(replies)

    def _reply(self, call: ModelCall) -> Reply:
        self.calls.append(call)
        if self._script:
            return self._script.pop(0)
        if self._responder is not None:
            return self._responder(call)
        raise LanguageModelError("the scripted model has no reply left")

    async def generate_text(self, *, system: str, user: str) -> str:
        reply = self._reply(ModelCall(system, user, False))
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, str):
            return reply
        return json.dumps(dict(reply))

    async def generate_structured(self, *, system: str, user: str,
                                  schema: JsonObject) -> JsonObject:
        reply = self._reply(ModelCall(system, user, True, schema))
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, str):
            try:
                reply = json.loads(reply)
            except ValueError:
                raise LanguageModelError("the scripted reply is not JSON") from None
        if not isinstance(reply, Mapping):
            raise LanguageModelError("the scripted reply is not a JSON object")
        return reply
