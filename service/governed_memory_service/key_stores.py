"""Which key store a command uses: the one value ``--keys`` (or ``$GOVERNED_MEMORY_KEYS``)
names, for ``serve``, ``mcp`` and the ``keys`` commands alike.

- a file path: the SQLite key store (:class:`~governed_memory_service.api_keys.ApiKeyStore`,
  the embedded default, ``$GOVERNED_MEMORY_HOME/keys.db`` when nothing is named);
- a ``postgresql://`` (or ``postgres://``) URI: the PostgreSQL key store
  (:class:`~governed_memory_service.postgres_keys.PostgresApiKeyStore`) in that
  database, in the schema ``governed_memory_keys``, or the one a ``schema`` query
  parameter names (``postgresql://host/db?schema=team_keys``; the parameter is ours and
  is taken out before the URI reaches libpq);
- ``profile``: the PostgreSQL database the profile's native provider keeps its memories
  in (its ``dsn``, else ``$GOVERNED_MEMORY_POSTGRES_DSN``, as the provider reads it), in
  the schema ``<the provider's schema>_keys``: beside the memories, never among them.

A URI may carry a password; ``$GOVERNED_MEMORY_KEYS`` keeps it out of the process
list, and no message, ``repr`` or log line here ever shows it (:meth:`describe`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import attrs
from governed_memory.errors import MemoryConfigurationError

from governed_memory_service.api_keys import ApiKeyStore, KeyStore, default_key_store_path

__all__ = ["KEYS_ENV", "PROFILE_KEYWORD", "KeyStoreLocation", "key_store_location",
           "refuse_memory_schema"]

KEYS_ENV: Final = "GOVERNED_MEMORY_KEYS"
PROFILE_KEYWORD: Final = "profile"
POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
POSTGRES_DSN_ENV: Final = "GOVERNED_MEMORY_POSTGRES_DSN"
"""Where the native provider reads its DSN when the profile names none."""
_PROVIDER_DEFAULT_SCHEMA: Final = "governed_memory"
_KEYS_SUFFIX: Final = "_keys"


@attrs.frozen(kw_only=True)
class KeyStoreLocation:
    """A key store, named but not opened: a SQLite ``path``, or a PostgreSQL ``dsn`` and
    ``schema``."""

    path: Path | None = None
    dsn: str | None = attrs.field(default=None, repr=False)
    schema: str | None = None
    where: str = ""
    """The host and database of a PostgreSQL store, for messages (no password)."""

    @property
    def is_postgres(self) -> bool:
        return self.dsn is not None

    def describe(self) -> str:
        if self.path is not None:
            return f"the key store {self.path}"
        return f"the PostgreSQL key store {self.where} (schema {self.schema})"

    def store(self, **options: Any) -> KeyStore:
        """The store, unopened; ``options`` go to the PostgreSQL store (cache TTL, …)."""
        if self.path is not None:
            return ApiKeyStore(self.path)
        from governed_memory_service.postgres_keys import PostgresApiKeyStore

        assert self.dsn is not None and self.schema is not None
        return PostgresApiKeyStore(self.dsn, schema=self.schema,
                                   description=self.describe(), **options)


def key_store_location(value: str | os.PathLike[str] | None, *,
                       profile: str | None = None) -> KeyStoreLocation:
    """The store ``value`` names (see the module docstring); ``None`` is
    ``$GOVERNED_MEMORY_KEYS``, else the default file. ``profile`` (a registered
    reference or a TOML file) is needed only for ``profile``."""
    from governed_memory_service.postgres_keys import DEFAULT_KEY_SCHEMA

    if value is None:
        value = os.environ.get(KEYS_ENV) or None
    if value is None:
        return KeyStoreLocation(path=default_key_store_path())
    text = os.fspath(value)
    if text == PROFILE_KEYWORD:
        return _from_profile(profile)
    if text.startswith(POSTGRES_SCHEMES):
        dsn, schema = _split_schema(text)
        return _postgres(dsn, schema or DEFAULT_KEY_SCHEMA)
    if "://" in text and not Path(text).exists():
        raise MemoryConfigurationError(
            f"--keys: {text.split('://', 1)[0]}:// is no key store (a file path, a "
            "postgresql:// URI, or `profile`)")
    if Path(text).is_dir():
        raise MemoryConfigurationError(f"--keys: {text} is a directory; name the key "
                                       "store's file (keys.db in it, say)")
    return KeyStoreLocation(path=Path(text))


def _split_schema(uri: str) -> tuple[str, str | None]:
    """The URI without our ``schema`` parameter, and the schema it named."""
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [v for k, v in query if k == "schema"]
    if len(schemas) > 1:
        raise MemoryConfigurationError("--keys: the URI names schema more than once")
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return urlunsplit(parts._replace(query=rest)), (schemas[0] if schemas else None)


def _postgres(dsn: str, schema: str) -> KeyStoreLocation:
    from governed_memory_service.postgres_keys import check_schema_name

    try:
        parts = urlsplit(dsn)
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        raise MemoryConfigurationError("--keys: the PostgreSQL URI does not parse") from None
    database = parts.path.lstrip("/") or "(default database)"
    return KeyStoreLocation(dsn=dsn, schema=check_schema_name(schema),
                            where=f"{host}{port}/{database}")


def _from_profile(profile: str | None) -> KeyStoreLocation:
    """The profile's native PostgreSQL database, schema ``<provider schema>_keys``."""
    if profile is None:
        raise MemoryConfigurationError("--keys profile: name the profile (--profile) whose "
                                       "PostgreSQL database keeps the keys")
    from governed_memory.plugins import PluginManager
    from governed_memory.profiles import resolve_profile

    spec = resolve_profile(profile, PluginManager.load())
    config = spec.provider.config
    if spec.provider.name != "native" or config.get("backend") != "postgres":
        raise MemoryConfigurationError(
            f"--keys profile: the profile {spec.key} keeps no PostgreSQL database (its "
            "provider is not the native one on backend \"postgres\"); name a key file or "
            "a postgresql:// URI")
    dsn = config.get("dsn", os.environ.get(POSTGRES_DSN_ENV))
    if not isinstance(dsn, str) or not dsn.strip():
        raise MemoryConfigurationError(
            f"--keys profile: the profile {spec.key} names no dsn and "
            f"${POSTGRES_DSN_ENV} is not set")
    memory_schema = config.get("schema", _PROVIDER_DEFAULT_SCHEMA)
    schema = f"{memory_schema}{_KEYS_SUFFIX}"
    if len(schema) > 63:
        raise MemoryConfigurationError(
            f"--keys profile: {schema!r} (the provider's schema + {_KEYS_SUFFIX!r}) is "
            "longer than PostgreSQL's 63 characters; name the store as a postgresql:// URI "
            "with ?schema=")
    if dsn.startswith(POSTGRES_SCHEMES):
        return _postgres(dsn, schema)
    from governed_memory_service.postgres_keys import check_schema_name

    return KeyStoreLocation(dsn=dsn, schema=check_schema_name(schema),
                            where="(the profile's database)")


def refuse_memory_schema(location: KeyStoreLocation, profile_spec: Any) -> None:
    """Refuse keys in the very schema the profile's provider keeps memories in: keys
    live in a schema of their own, never among the memory tables."""
    if not location.is_postgres or profile_spec is None:
        return
    config = profile_spec.provider.config
    if (profile_spec.provider.name == "native" and config.get("backend") == "postgres"
            and config.get("schema", _PROVIDER_DEFAULT_SCHEMA) == location.schema):
        raise MemoryConfigurationError(
            f"--keys: schema {location.schema!r} is where the profile keeps its memories; "
            "API keys live in a schema of their own (the default governed_memory_keys, "
            "or ?schema=)")
