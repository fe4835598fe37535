"""A LangChain chat model from a profile's ``[stores.language_model]`` config
(``kind = "langchain"``), checked when the profile loads.

Config: ``class`` (required: the import path of a ``BaseChatModel`` subclass, such as
``langchain_openai.ChatOpenAI``, or of a function returning one, such as
``langchain.chat_models.init_chat_model``; ``module.Name`` or ``module:Name``),
``args`` (its keyword arguments, a table), ``timeout_s`` (30) and
``structured_output`` (``auto``, ``native`` or ``json``). A key the adapter does not
know, a class that is no chat model, an argument the class has no field for (a chat
model would ignore it) and arguments it refuses each stop the load with the key named.
An argument named like a secret (``api_key``, ``*_password``, ...) is refused too: the
integrations read their keys from the environment, and a profile is no place for one.

Constructing a chat model does no I/O (clients connect on the first call), so a
profile is checked against the installed packages without reaching a model.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from typing import Any, Final

from governed_memory.errors import MemoryConfigurationError
from langchain_core.language_models import BaseChatModel

from governed_memory_langchain.chat_model import LangChainLanguageModel

__all__ = ["KEYS", "build_langchain_model"]

KEYS: Final = frozenset({"class", "args", "timeout_s", "structured_output"})
SECRET_ARG: Final = re.compile(r"(^|_)(api_key|secret|password|credentials?|token)$",
                               re.IGNORECASE)
"""Argument names that hold a secret (``api_key``, ``openai_api_key``, ``token``; not
``max_tokens``)."""
_MAX_DETAIL: Final = 200


def build_langchain_model(config: Mapping[str, Any]) -> LangChainLanguageModel:
    unknown = sorted(str(k) for k in config if k not in KEYS)
    if unknown:
        raise MemoryConfigurationError(
            f"language model 'langchain': unknown key(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(KEYS))}")
    path = config.get("class")
    if not isinstance(path, str) or not path.strip():
        raise MemoryConfigurationError(
            "class: the import path of a LangChain chat model (module.ClassName) is required")
    args = config.get("args", {})
    if not isinstance(args, Mapping) or not all(isinstance(k, str) for k in args):
        raise MemoryConfigurationError("args: a table of the chat model's keyword arguments")
    secret = sorted(k for k in args if SECRET_ARG.search(k))
    if secret:
        raise MemoryConfigurationError(
            f"args.{secret[0]}: a secret does not belong in a profile; set the environment "
            f"variable the chat model reads it from")
    chat_model = _chat_model(path.strip(), dict(args))
    return LangChainLanguageModel(chat_model, timeout_s=config.get("timeout_s", 30.0),
                                  structured_output=config.get("structured_output", "auto"))


def _chat_model(path: str, args: dict[str, Any]) -> BaseChatModel:
    target = _imported(path)
    if isinstance(target, type):
        if not issubclass(target, BaseChatModel):
            raise MemoryConfigurationError(
                f"class: {path} is not a LangChain chat model (a BaseChatModel subclass)")
        unknown = sorted(set(args) - _fields(target))
        if unknown:  # a chat model ignores what it does not know: a typo would go unseen
            raise MemoryConfigurationError(
                f"args.{unknown[0]}: {target.__name__} takes no such argument")
    elif not callable(target):
        raise MemoryConfigurationError(f"class: {path} is neither a class nor a function")
    try:
        built = target(**args)
    except TypeError as exc:  # an argument it does not take
        raise MemoryConfigurationError(f"args: {path} refused them ({_detail(exc)})") from None
    except Exception as exc:
        raise MemoryConfigurationError(f"args: {path} refused them ({_refusal(exc)})") from None
    if not isinstance(built, BaseChatModel):
        raise MemoryConfigurationError(
            f"class: {path} made a {type(built).__name__}, not a LangChain chat model")
    return built


def _fields(model: type[BaseChatModel]) -> set[str]:
    """The keyword arguments a chat model class takes: its fields, by name and alias."""
    names: set[str] = set()
    for name, field in model.model_fields.items():
        names.add(name)
        for alias in (field.alias, field.validation_alias):
            if isinstance(alias, str):
                names.add(alias)
            elif alias is not None:  # AliasChoices: each choice that is a plain name
                names.update(c for c in getattr(alias, "choices", ()) if isinstance(c, str))
    return names


def _imported(path: str) -> Any:
    module_name, colon, attribute = path.partition(":")
    if not colon:
        module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        raise MemoryConfigurationError(f"class: {path!r} is not module.Name or module:Name")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise MemoryConfigurationError(
            f"class: cannot import {module_name} ({type(exc).__name__}: {exc}); "
            f"is its package installed?") from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise MemoryConfigurationError(f"class: {module_name} has no {attribute}"
                                           ) from None
    return target


def _refusal(exc: Exception) -> str:
    """Why a chat model refused its arguments: pydantic's field paths and messages
    (never the values given), or the exception's type and first line."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            found = errors(include_input=False, include_url=False)
        except Exception:
            found = None
        if isinstance(found, list) and found:
            return "; ".join(
                f"{'.'.join(str(p) for p in e.get('loc', ())) or '(model)'}: {e.get('msg', '')}"
                for e in found if isinstance(e, Mapping))
    return _detail(exc)


def _detail(exc: Exception) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return text if len(text) <= _MAX_DETAIL else text[:_MAX_DETAIL] + "..."
