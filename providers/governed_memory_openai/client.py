"""``OpenAICompatibleModel``: ``generate_text`` and ``generate_structured`` over HTTP.

Structured answers ask for ``response_format = json_schema`` first; a server that
refuses that (HTTP 400) is asked once more with ``json_object`` and the schema in the
system prompt, and remembered as such. Every failure (transport, timeout, non-2xx
status, an answer that is not the JSON asked for) raises ``LanguageModelError`` whose
message names the status or the problem, never the prompt, the answer or the key.

Config: ``model`` (required), ``base_url`` (default ``https://api.openai.com/v1``),
``api_key_env`` (the environment variable holding the key, default
``OPENAI_API_KEY``; a missing variable sends no key, which local servers accept),
``timeout_s`` (30), ``temperature`` (0), ``max_tokens`` (optional),
``structured_output`` (``json_schema`` or ``json_object``).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from typing import Any

import httpx
from governed_memory.errors import MemoryConfigurationError
from governed_memory.language_models import JsonObject, LanguageModelError

log = logging.getLogger(__name__)

_KEYS = frozenset({"model", "base_url", "api_key_env", "timeout_s", "temperature",
                   "max_tokens", "structured_output"})
_MODES = ("json_schema", "json_object")


class OpenAICompatibleModel:
    name = "openai"

    def __init__(self, model: str, *, base_url: str = "https://api.openai.com/v1",
                 api_key: str | None = None, timeout_s: float = 30.0,
                 temperature: float = 0.0, max_tokens: int | None = None,
                 structured_output: str = "json_schema",
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self.timeout_s = timeout_s
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.structured_output = structured_output
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAICompatibleModel(model={self.model!r}, base_url={self.base_url!r})"

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            headers = {"Content-Type": "application/json"}
            if self._api_key:
                headers["Authorization"] = f"Bearer {self._api_key}"
            self._client = httpx.AsyncClient(base_url=self.base_url, headers=headers,
                                             timeout=self.timeout_s,
                                             transport=self._transport)
        return self._client

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _complete(self, system: str, user: str,
                        response_format: Mapping[str, Any] | None) -> str:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": user}],
            "temperature": self.temperature,
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if response_format is not None:
            body["response_format"] = dict(response_format)
        try:
            response = await self._http().post("/chat/completions", json=body)
        except httpx.TimeoutException:
            raise LanguageModelError("the model did not answer in time") from None
        except httpx.HTTPError as exc:
            raise LanguageModelError(f"the model could not be reached ({type(exc).__name__})"
                                     ) from None
        if response.status_code != 200:
            raise _StatusError(response.status_code)
        try:
            payload = response.json()
            content = payload["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise LanguageModelError("the model's response is not a chat completion") from None
        if not isinstance(content, str):
            raise LanguageModelError("the model's answer holds no text")
        return content

    async def generate_text(self, *, system: str, user: str) -> str:
        return await self._complete(system, user, None)

    async def generate_structured(self, *, system: str, user: str,
                                  schema: JsonObject) -> JsonObject:
        if self.structured_output == "json_schema":
            fmt = {"type": "json_schema",
                   "json_schema": {"name": "answer", "schema": dict(schema), "strict": False}}
            try:
                return _object(await self._complete(system, user, fmt))
            except _StatusError as exc:
                if exc.status != 400:
                    raise
                log.warning("model server refused json_schema output; using json_object")
                self.structured_output = "json_object"
        described = (f"{system}\n\nAnswer with one JSON object following this JSON schema:\n"
                     f"{json.dumps(dict(schema), sort_keys=True)}")
        return _object(await self._complete(described, user, {"type": "json_object"}))


class _StatusError(LanguageModelError):
    def __init__(self, status: int) -> None:
        super().__init__(f"the model server answered HTTP {status}")
        self.status = status


def _object(text: str) -> JsonObject:
    stripped = text.strip()
    if stripped.startswith("```"):
        # Some servers fence JSON even in JSON mode.
        stripped = stripped.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(stripped)
    except ValueError:
        raise LanguageModelError("the model's answer is not JSON") from None
    if not isinstance(value, dict):
        raise LanguageModelError("the model's answer is not a JSON object")
    return value


def build_openai_model(config: Mapping[str, Any]) -> OpenAICompatibleModel:
    unknown = sorted(str(k) for k in config if k not in _KEYS)
    if unknown:
        raise MemoryConfigurationError(
            f"language model 'openai': unknown key(s) {', '.join(unknown)}")
    model = config.get("model")
    if not isinstance(model, str) or not model.strip():
        raise MemoryConfigurationError("model: the model name is required")
    base_url = config.get("base_url", "https://api.openai.com/v1")
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise MemoryConfigurationError("base_url: an http(s) URL")
    key_env = config.get("api_key_env", "OPENAI_API_KEY")
    if not isinstance(key_env, str) or not key_env:
        raise MemoryConfigurationError("api_key_env: the name of an environment variable")
    timeout = config.get("timeout_s", 30.0)
    if (isinstance(timeout, bool) or not isinstance(timeout, int | float)
            or not math.isfinite(timeout) or not 0 < timeout <= 600):
        raise MemoryConfigurationError("timeout_s: seconds in (0, 600]")
    temperature = config.get("temperature", 0.0)
    if (isinstance(temperature, bool) or not isinstance(temperature, int | float)
            or not 0 <= temperature <= 2):
        raise MemoryConfigurationError("temperature: a number in [0, 2]")
    max_tokens = config.get("max_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool)
                                   or not isinstance(max_tokens, int) or max_tokens < 1):
        raise MemoryConfigurationError("max_tokens: a positive integer")
    mode = config.get("structured_output", "json_schema")
    if mode not in _MODES:
        raise MemoryConfigurationError(f"structured_output: one of {', '.join(_MODES)}")
    return OpenAICompatibleModel(model, base_url=base_url, api_key=os.environ.get(key_env),
                                 timeout_s=float(timeout), temperature=float(temperature),
                                 max_tokens=max_tokens, structured_output=mode)
