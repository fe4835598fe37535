"""The Mem0 provider's profile config, checked strictly and without any I/O.

One adapter, two clients: ``client = "local"`` runs the ``mem0ai`` library in this
process; ``client = "platform"`` talks to a Mem0 Platform host through mem0's own
``MemoryClient``. A typo (``vector_store.pth``) stops start-up with the key named; the
API key itself never sits in a profile, only the name of the variable that holds it.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import attrs
from governed_memory.errors import MemoryConfigurationError

HOME_ENV: Final = "GOVERNED_MEMORY_HOME"
DEFAULT_API_KEY_ENV: Final = "MEM0_API_KEY"
DEFAULT_HOST: Final = "https://api.mem0.ai"
DEFAULT_PREFIX: Final = "gm"
DEFAULT_DIMENSION: Final = 256
MAX_TIMEOUT_S: Final = 600.0

_COMMON: Final = frozenset({"client", "ledger_path", "namespace_prefix", "timeout_seconds",
                            "infer"})
_LOCAL: Final = frozenset({"vector_store", "embedder", "history_db_path", "mem0_dir"})
_PLATFORM: Final = frozenset({"host", "api_key_env"})


class ClientKind(enum.StrEnum):
    LOCAL = "local"
    PLATFORM = "platform"


class VectorStoreKind(enum.StrEnum):
    FAISS = "faiss"
    QDRANT = "qdrant"


@attrs.frozen(slots=True)
class EmbedderConfig:
    """``deterministic`` (the adapter's own hashed words, for tests and benchmarks) or any
    embedder a plugin registered under ``register_embedders`` (``hashing``, ``minilm``),
    built with ``options`` as its config. ``dimension`` is required for
    ``deterministic``; for a plugin it is optional and, when given, must match."""

    name: str = "deterministic"
    dimension: int | None = None
    options: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(slots=True)
class LocalConfig:
    vector_store: VectorStoreKind
    vector_path: str
    """A directory for faiss; a directory or ``":memory:"`` for Qdrant local."""
    collection: str
    history_db_path: str
    mem0_dir: Path
    embedder: EmbedderConfig


@attrs.frozen(slots=True)
class PlatformConfig:
    host: str
    api_key_env: str


@attrs.frozen(slots=True)
class Mem0Config:
    client: ClientKind
    ledger_path: str
    """The adapter's own SQLite ledger (revisions, history, idempotency, namespaces)."""
    namespace_prefix: str
    timeout_seconds: float
    local: LocalConfig | None = None
    platform: PlatformConfig | None = None

    @property
    def durable(self) -> bool:
        if self.ledger_path == ":memory:":
            return False
        if self.local is not None:
            return (self.local.vector_path != ":memory:"
                    and self.local.history_db_path != ":memory:")
        return True


def _home(environ: Mapping[str, str]) -> Path:
    home = environ.get(HOME_ENV)
    return (Path(home) if home else Path(".governed-memory")) / "mem0"


def _text(raw: Mapping[str, Any], name: str, default: str) -> str:
    value = raw.get(name, default)
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise MemoryConfigurationError(f"{name}: must be a non-empty string")
    return value


def _keys(raw: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    unknown = sorted(str(key) for key in raw if key not in known)
    if unknown:
        raise MemoryConfigurationError(
            f"unknown {where} key(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")


def _embedder(raw: object) -> EmbedderConfig:
    if raw is None:
        return EmbedderConfig()
    if not isinstance(raw, Mapping):
        raise MemoryConfigurationError("embedder: must be a table with name and dimension")
    _keys(raw, frozenset({"name", "dimension", "options"}), "embedder")
    name = _text(raw, "name", "deterministic")
    dimension = raw.get("dimension", DEFAULT_DIMENSION if name == "deterministic" else None)
    if dimension is not None and (isinstance(dimension, bool) or not isinstance(dimension, int)
                                  or not 8 <= dimension <= 8192):
        raise MemoryConfigurationError("embedder.dimension: must be an integer in 8..8192")
    options = raw.get("options", {})
    if not isinstance(options, Mapping):
        raise MemoryConfigurationError("embedder.options: must be a table")
    return EmbedderConfig(name=name, dimension=dimension, options=dict(options))


def _local(raw: Mapping[str, Any], base: Path) -> LocalConfig:
    store = raw.get("vector_store", {})
    if not isinstance(store, Mapping):
        raise MemoryConfigurationError("vector_store: must be a table")
    _keys(store, frozenset({"provider", "path", "collection"}), "vector_store")
    try:
        kind = VectorStoreKind(store.get("provider", "faiss"))
    except ValueError:
        raise MemoryConfigurationError(
            "vector_store.provider: must be 'faiss' or 'qdrant'") from None
    path = _text(store, "path", str(base / kind.value))
    if path == ":memory:" and kind is VectorStoreKind.FAISS:
        raise MemoryConfigurationError(
            "vector_store.path: faiss keeps its index in a directory; ':memory:' is Qdrant's")
    collection = _text(store, "collection", "governed_memory")
    return LocalConfig(
        vector_store=kind, vector_path=path, collection=collection,
        history_db_path=_text(raw, "history_db_path", str(base / "mem0-history.db")),
        mem0_dir=Path(_text(raw, "mem0_dir", str(base / "mem0-home"))),
        embedder=_embedder(raw.get("embedder")),
    )


def _timeout(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MemoryConfigurationError("timeout_seconds: must be a number of seconds")
    if not 0 < value <= MAX_TIMEOUT_S:
        raise MemoryConfigurationError(f"timeout_seconds: must be in (0, {MAX_TIMEOUT_S:g}]")
    return float(value)


def parse_config(raw: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Mem0Config:
    if not isinstance(raw, Mapping):
        raise MemoryConfigurationError("mem0 provider config must be a mapping")
    env = os.environ if environ is None else environ
    try:
        client = ClientKind(raw.get("client", ClientKind.LOCAL.value))
    except ValueError:
        raise MemoryConfigurationError("client: must be 'local' or 'platform'") from None
    _keys(raw, _COMMON | (_LOCAL if client is ClientKind.LOCAL else _PLATFORM),
          f"mem0 ({client.value} client) provider config")
    if raw.get("infer", False) is not False:
        # infer=True lets Mem0's LLM rewrite, merge or drop what was written, so one
        # governed write no longer maps onto one record; refused until that is mapped.
        raise MemoryConfigurationError(
            "infer: only false is supported; the adapter writes deliberate records")
    base = _home(env)
    prefix = _text(raw, "namespace_prefix", DEFAULT_PREFIX)
    if any(ch.isspace() or ch in "*:%" for ch in prefix) or len(prefix) > 64:
        raise MemoryConfigurationError(
            "namespace_prefix: at most 64 characters, no whitespace, '*', ':' or '%'")
    ledger = _text(raw, "ledger_path", str(base / "ledger.db"))
    timeout = _timeout(raw.get("timeout_seconds", 30.0))
    if client is ClientKind.LOCAL:
        return Mem0Config(client=client, ledger_path=ledger, namespace_prefix=prefix,
                          timeout_seconds=timeout, local=_local(raw, base))
    host = _text(raw, "host", DEFAULT_HOST)
    if not host.startswith(("http://", "https://")):
        raise MemoryConfigurationError("host: must be an http:// or https:// URL")
    return Mem0Config(
        client=client, ledger_path=ledger, namespace_prefix=prefix, timeout_seconds=timeout,
        platform=PlatformConfig(host=host.rstrip("/"),
                                api_key_env=_text(raw, "api_key_env", DEFAULT_API_KEY_ENV)),
    )
