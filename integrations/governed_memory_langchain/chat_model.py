"""``LangChainLanguageModel``: any LangChain chat model (``BaseChatModel``) behind the
language-model protocol, so it condenses questions, folds summaries, extracts facts and
reads conversations for ``remember``.

The prompt goes out as a system and a human message through ``ainvoke``. A structured
answer uses the chat model's own structured output (``with_structured_output``: tool
calling or a JSON mode, whichever the integration chose) when it has one, and otherwise
asks for one JSON object following the schema in the system prompt and parses the text.

The error contract is the OpenAI-compatible adapter's: every failure (the chat model
raising, no answer within ``timeout_s``, an answer without text, text that is not the
JSON object asked for) raises ``LanguageModelError`` (unavailable) whose message names
the problem or the exception's type, never the prompt, the answer or a key. Callers
degrade on it, or (``remember``) raise it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Mapping
from typing import Any, Final

from governed_memory.errors import GovernedMemoryError, MemoryConfigurationError
from governed_memory.language_models import JsonObject, LanguageModelError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable

__all__ = ["STRUCTURED_MODES", "LangChainLanguageModel"]

log = logging.getLogger(__name__)

STRUCTURED_MODES: Final = ("auto", "native", "json")
"""``auto``: the chat model's structured output when it has one, else JSON in text;
``native``: only its structured output (refused at once for a model without any);
``json``: always JSON in text, parsed here."""
SCHEMA_TITLE: Final = "answer"
"""The name a schema without a title is given: tool calling names its tool after it."""


class LangChainLanguageModel:
    """A LangChain chat model as a ``LanguageModel``. ``name`` is ``langchain``; ``model``
    says which chat model (its LangChain type and, when it has one, the model it serves:
    ``openai-chat/gpt-4o-mini``), so ``remember`` records ``langchain:<model>``."""

    name = "langchain"

    def __init__(self, chat_model: BaseChatModel, *, timeout_s: float = 30.0,
                 structured_output: str = "auto") -> None:
        if not isinstance(chat_model, BaseChatModel):
            raise MemoryConfigurationError(
                f"a LangChain chat model (BaseChatModel) is needed, not "
                f"{type(chat_model).__name__}")
        if (isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float)
                or not math.isfinite(timeout_s) or not 0 < timeout_s <= 600):
            raise MemoryConfigurationError("timeout_s: seconds in (0, 600]")
        if structured_output not in STRUCTURED_MODES:
            raise MemoryConfigurationError(
                f"structured_output: one of {', '.join(STRUCTURED_MODES)}")
        self.chat_model = chat_model
        self.timeout_s = float(timeout_s)
        self.structured_output = structured_output
        self.model = identity(chat_model)
        self._runnables: dict[str, Runnable[Any, Any] | None] = {}
        """The chat model's structured output per schema, made once (``None``: none)."""
        if structured_output == "native":
            try:
                _structured(chat_model, {"type": "object", "properties": {}})
            except NotImplementedError:
                raise MemoryConfigurationError(
                    f"structured_output: 'native', but {self.model} has no structured "
                    f"output of its own (use 'auto' or 'json')") from None

    def __repr__(self) -> str:  # the chat model's own repr may carry its settings
        return f"LangChainLanguageModel(model={self.model!r})"

    async def generate_text(self, *, system: str, user: str) -> str:
        answer = await self._invoke(self.chat_model, system, user)
        if not isinstance(answer, BaseMessage):
            raise LanguageModelError("the chat model's answer is not a message")
        text = answer.text
        if not text.strip():
            raise LanguageModelError("the model's answer holds no text")
        return text

    async def generate_structured(self, *, system: str, user: str,
                                  schema: JsonObject) -> JsonObject:
        if self.structured_output != "json":
            runnable = self._runnable(schema)
            if runnable is not None:
                return _parsed(await self._invoke(runnable, system, user))
        described = (f"{system}\n\nAnswer with one JSON object following this JSON schema:\n"
                     f"{json.dumps(dict(schema), sort_keys=True)}")
        return json_object(await self.generate_text(system=described, user=user))

    def _runnable(self, schema: JsonObject) -> Runnable[Any, Any] | None:
        """The chat model's own structured output for ``schema``, made once; ``None``
        (``auto``) when it has none or cannot take this schema: JSON in text then."""
        key = json.dumps(dict(schema), sort_keys=True)
        if key in self._runnables:
            return self._runnables[key]
        runnable: Runnable[Any, Any] | None = None
        try:
            runnable = _structured(self.chat_model, schema)
        except NotImplementedError:  # none at all: a model does not gain it later
            log.warning("chat model %s has no structured output; asking for JSON in text",
                        self.model)
            self.structured_output = "json"
        except Exception as exc:
            if self.structured_output == "native":
                raise LanguageModelError(f"the chat model cannot take the answer's schema "
                                         f"({type(exc).__name__})") from None
            log.warning("chat model %s cannot take a schema as structured output (%s); "
                        "asking for JSON in text", self.model, type(exc).__name__)
        self._runnables[key] = runnable
        return runnable

    async def _invoke(self, runnable: Runnable[Any, Any], system: str, user: str) -> Any:
        messages = [SystemMessage(content=system), HumanMessage(content=user)]
        try:
            async with asyncio.timeout(self.timeout_s):
                return await runnable.ainvoke(messages)
        except TimeoutError:
            raise LanguageModelError("the model did not answer in time") from None
        except GovernedMemoryError:
            raise
        except Exception as exc:
            # The type only: an integration's message may quote the request.
            if "timeout" in type(exc).__name__.lower():
                raise LanguageModelError("the model did not answer in time") from None
            raise LanguageModelError(f"the chat model failed ({type(exc).__name__})") from None


def identity(chat_model: BaseChatModel) -> str:
    """``<LangChain type>/<served model>`` (``openai-chat/gpt-4o-mini``), or the type
    alone: the same for every process built from the same settings."""
    try:
        kind = str(chat_model._llm_type)
    except Exception:  # an integration without one: its class says as much
        kind = type(chat_model).__name__
    served = getattr(chat_model, "model_name", None) or getattr(chat_model, "model", None)
    return f"{kind}/{served}" if isinstance(served, str) and served.strip() else kind


def _structured(chat_model: BaseChatModel, schema: Mapping[str, Any]) -> Runnable[Any, Any]:
    """The chat model's own structured output for ``schema``, the raw answer included so
    that a parsing failure is seen rather than raised (``NotImplementedError``: it has
    none). Tool calling names its tool after the schema's title: ``answer`` if none."""
    titled = dict(schema) if "title" in schema else {"title": SCHEMA_TITLE, **schema}
    return chat_model.with_structured_output(titled, include_raw=True)


def _parsed(answer: Any) -> JsonObject:
    if not isinstance(answer, Mapping):
        raise LanguageModelError("the chat model's structured answer is not a mapping")
    if answer.get("parsing_error") is not None:
        raise LanguageModelError("the model's answer is not the JSON asked for")
    parsed = answer.get("parsed")
    if parsed is None:
        raise LanguageModelError("the model's answer is not the JSON asked for")
    if hasattr(parsed, "model_dump"):  # an integration that parsed into pydantic
        parsed = parsed.model_dump()
    if not isinstance(parsed, dict):
        raise LanguageModelError("the model's answer is not a JSON object")
    return parsed


def json_object(text: str) -> JsonObject:
    """The one JSON object an answer holds; a fenced one (```json ... ```) is unfenced."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(stripped)
    except ValueError:
        raise LanguageModelError("the model's answer is not JSON") from None
    if not isinstance(value, dict):
        raise LanguageModelError("the model's answer is not a JSON object")
    return value
