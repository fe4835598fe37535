"""LangChain chat models for the adapter's tests: real ``BaseChatModel`` subclasses that
answer each call with a function of it, the same function a ``ScriptedModel`` answers
with, so a test can run one conversation through both and compare.

``RespondingChatModel`` has no structured output of its own (LangChain's base class
refuses ``with_structured_output`` without ``bind_tools``): the adapter asks it for JSON
in text. ``ToolCallingChatModel`` binds tools, so the adapter uses LangChain's own
structured output, and it answers with a tool call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

from governed_memory.language_models import ModelCall
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

JSON_ASKED = "Answer with one JSON object following this JSON schema:"
"""How the adapter asks a model without structured output for JSON."""


class RespondingChatModel(BaseChatModel):
    responder: Callable[[ModelCall], Any]
    calls: list[ModelCall] = Field(default_factory=list)
    tool_calls: list[str] = Field(default_factory=list)
    """The tool each structured call was asked to call (``ToolCallingChatModel``)."""
    model_name: str = "responder-1"

    @property
    def _llm_type(self) -> str:
        return "responding-fake"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  **kwargs: Any) -> ChatResult:
        assert [m.type for m in messages] == ["system", "human"]
        system, user = (str(m.content) for m in messages)
        tools = kwargs.get("tools")
        schema = tools[0]["function"]["parameters"] if tools else None
        call = ModelCall(system, user, bool(tools) or JSON_ASKED in system, schema)
        self.calls.append(call)
        reply = self.responder(call)
        if isinstance(reply, BaseException):
            raise reply
        if tools:
            name = tools[0]["function"]["name"]
            self.tool_calls.append(name)
            message = AIMessage(content="", tool_calls=[
                {"name": name, "args": dict(reply), "id": f"call-{len(self.calls)}"}])
        else:
            message = AIMessage(content=reply if isinstance(reply, str) else json.dumps(reply))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def tasks(self) -> list[str | None]:
        return [call.task for call in self.calls]


class ToolCallingChatModel(RespondingChatModel):
    model_name: str = "tool-caller-1"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools],
                         tool_choice=tool_choice, **kwargs)


class SilentChatModel(BaseChatModel):
    """Never answers: its call waits for ever (until the adapter's deadline)."""

    @property
    def _llm_type(self) -> str:
        return "silent-fake"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  **kwargs: Any) -> ChatResult:
        raise AssertionError("only called asynchronously")

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None,
                         **kwargs: Any) -> ChatResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class APITimeoutError(Exception):
    """Named like the timeout an integration's client raises (openai's)."""


def not_a_chat_model(**kwargs: Any) -> object:
    """A factory a profile may name that builds something else."""
    return object()
