"""API keys: stores that hold only a hash of each key's secret.

A key looks like ``gmk_<key id>_<secret>``. The key id is public (it names the key in
``list`` and ``revoke`` and in logs); the secret is 32 random bytes from ``secrets``,
shown once by :meth:`KeyStoreBase.create` and never stored, logged or put in an event.
A store keeps ``sha256(secret)``: a slow password hash (bcrypt, argon2) exists to stop
guessing of low-entropy human passwords, and a 256-bit random secret cannot be guessed,
so a fast hash loses nothing and keeps every request cheap. The comparison is
``hmac.compare_digest``, and an unknown key id is compared against a dummy digest, so
timing tells nothing about which key ids exist.

Two stores, one contract (:class:`KeyStore`): :class:`ApiKeyStore`, a SQLite file of its
own (the embedded default), and ``PostgresApiKeyStore``
(:mod:`governed_memory_service.postgres_keys`), a schema of its own in a PostgreSQL
database, for several worker processes or nodes that must all see one set of keys and
every revocation. Neither is the memory database's tables: credentials never travel
with a memory backup or export, an erasure of memories never touches them, and the
memory provider can be anything while keys stay put.
"""

from __future__ import annotations

import abc
import asyncio
import hashlib
import hmac
import json
import logging
import os
import secrets
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

import aiosqlite
import attrs
from governed_memory import Permission, Principal, PrincipalKind

__all__ = ["KEY_PREFIX", "ApiKey", "ApiKeyStore", "IssuedKey", "KeyStore", "KeyStoreBase",
           "default_key_store_path"]

log = logging.getLogger(__name__)

KEY_PREFIX = "gmk_"
_KEY_ID_HEX = 16
_DUMMY_DIGEST = hashlib.sha256(b"governed-memory: no such key").hexdigest()
KEY_COLUMNS = ("key_id, principal_id, kind, tenant_id, user_id, permissions, label,"
               " created_at, revoked_at")
"""The columns of a key's bindings, in :func:`key_from_row` order; both stores use them."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    key_id TEXT PRIMARY KEY,
    secret_sha256 TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    user_id TEXT,
    permissions TEXT NOT NULL,
    label TEXT,
    created_at REAL NOT NULL,
    revoked_at REAL
)
"""


def default_key_store_path() -> Path:
    """``$GOVERNED_MEMORY_HOME/keys.db``, else ``./.governed-memory/keys.db``: beside
    the CLI's default memory database, in its own file."""
    home = os.environ.get("GOVERNED_MEMORY_HOME")
    return (Path(home) if home else Path(".governed-memory")) / "keys.db"


def secret_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@attrs.frozen(kw_only=True)
class ApiKey:
    """What the store knows about a key: its identity and bindings, never its secret."""

    key_id: str
    principal_id: str
    kind: PrincipalKind
    tenant_id: str
    user_id: str | None
    permissions: tuple[Permission, ...]
    label: str | None
    created_at: float
    revoked_at: float | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def principal(self) -> Principal:
        """The principal a request made with this key acts as."""
        return Principal(self.principal_id, self.kind, tenant_id=self.tenant_id,
                         user_id=self.user_id, permissions=list(self.permissions))


@attrs.frozen(kw_only=True)
class IssuedKey:
    """A key just created: the only value that ever holds the full key string.

    ``repr`` hides the secret so that logging the value by mistake leaks nothing.
    """

    key: ApiKey
    token: str = attrs.field(repr=False)


@attrs.frozen(kw_only=True)
class StoredKey:
    """A key as a lookup returns it: its bindings and the digest of its secret."""

    key: ApiKey
    digest: str = attrs.field(repr=False)


@runtime_checkable
class KeyStore(Protocol):
    """What ``serve``, ``mcp`` and the ``keys`` commands ask of a key store; also a
    :class:`~governed_memory_service.authentication.CredentialVerifier`."""

    description: str
    """Where the keys are, for messages: never a password."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None: ...

    async def exists(self) -> bool:
        """Whether the store has been created (``keys list`` and ``revoke`` never
        create one); opens nothing that is not there."""
        ...

    async def create(self, *, tenant_id: str, kind: PrincipalKind | str,
                     permissions: Iterable[Permission | str],
                     user_id: str | None = None, principal_id: str | None = None,
                     label: str | None = None) -> IssuedKey: ...

    async def list(self, *, tenant_id: str | None = None,
                   include_revoked: bool = True) -> tuple[ApiKey, ...]: ...

    async def revoke(self, key_id: str) -> bool: ...

    def accepts(self, token: str) -> bool: ...

    async def verify(self, token: str) -> Principal | None: ...

    async def check(self) -> None:
        """A real round trip to the store (readiness); raises when it cannot be made."""
        ...


class KeyStoreBase(abc.ABC):
    """Issuing and verifying keys, the same for every store: a store supplies where
    rows go (``_insert``, ``_lookup``, ``list``, ``revoke``, ``check``)."""

    description: str = "a key store"

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    @abc.abstractmethod
    async def open(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def _insert(self, key: ApiKey, digest: str) -> None: ...

    @abc.abstractmethod
    async def _lookup(self, key_id: str) -> StoredKey | None:
        """The key with this id, revoked or not, or ``None``."""

    async def create(self, *, tenant_id: str, kind: PrincipalKind | str,
                     permissions: Iterable[Permission | str],
                     user_id: str | None = None, principal_id: str | None = None,
                     label: str | None = None) -> IssuedKey:
        """Issue a key bound to a tenant, an identity and permissions.

        ``principal_id`` defaults to ``<kind>:<user_id>`` for a user-bound key and
        ``<kind>:<key id>`` otherwise. The bindings are checked by building the
        principal now, so a key that could never authenticate is never issued.
        """
        key_id = secrets.token_hex(_KEY_ID_HEX // 2)
        secret = secrets.token_urlsafe(32)
        kind = PrincipalKind(kind)
        perms = tuple(sorted({Permission(p) for p in permissions}, key=lambda p: p.value))
        key = ApiKey(key_id=key_id,
                     principal_id=principal_id or f"{kind.value}:{user_id or key_id}",
                     kind=kind, tenant_id=tenant_id, user_id=user_id, permissions=perms,
                     label=label, created_at=time.time())
        key.principal()  # raises MemoryValidationError naming the bad binding
        await self._insert(key, secret_digest(secret))
        log.info("api key %s created for tenant %s", key_id, tenant_id)
        return IssuedKey(key=key, token=f"{KEY_PREFIX}{key_id}_{secret}")

    # -- verification (CredentialVerifier) ----------------------------------------------

    def accepts(self, token: str) -> bool:
        return token.startswith(KEY_PREFIX)

    async def verify(self, token: str) -> Principal | None:
        key_id, sep, secret = token.removeprefix(KEY_PREFIX).partition("_")
        if not sep or len(key_id) != _KEY_ID_HEX or not secret:
            return None
        stored = await self._lookup(key_id)
        digest = stored.digest if stored is not None else _DUMMY_DIGEST
        matches = hmac.compare_digest(secret_digest(secret).encode(), digest.encode())
        if stored is None or not matches or not stored.key.active:
            return None
        return stored.key.principal()


class ApiKeyStore(KeyStoreBase):
    """Create, list, revoke and verify API keys in one SQLite file (the embedded
    default). Every verification reads the file, so a revocation by ``keys revoke`` in
    another process counts from the next request.

    Also a :class:`~governed_memory_service.authentication.CredentialVerifier`: hand it
    to a ``BearerAuthenticator``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.description = f"the key store {self.path}"
        self._db: aiosqlite.Connection | None = None
        self._opening: asyncio.Lock | None = None

    async def open(self) -> None:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._db is not None:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = await aiosqlite.connect(self.path)
            try:
                await db.execute("PRAGMA journal_mode=WAL")
                await db.execute(_SCHEMA)
                await db.commit()
            except BaseException:
                await db.close()
                raise
            self._db = db

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await db.close()

    async def exists(self) -> bool:
        return self.path.is_file()

    async def _conn(self) -> aiosqlite.Connection:
        if self._db is None:
            await self.open()
        assert self._db is not None
        return self._db

    async def check(self) -> None:
        db = await self._conn()
        await db.execute_fetchall("SELECT 1 FROM api_keys LIMIT 1")

    async def _insert(self, key: ApiKey, digest: str) -> None:
        db = await self._conn()
        await db.execute(
            "INSERT INTO api_keys (key_id, secret_sha256, principal_id, kind, tenant_id,"
            " user_id, permissions, label, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key.key_id, digest, key.principal_id, key.kind.value, key.tenant_id,
             key.user_id, permissions_text(key.permissions), key.label, key.created_at))
        await db.commit()

    async def list(self, *, tenant_id: str | None = None,
                   include_revoked: bool = True) -> tuple[ApiKey, ...]:
        sql = f"SELECT {KEY_COLUMNS} FROM api_keys"
        clauses, args = [], []
        if tenant_id is not None:
            clauses.append("tenant_id = ?")
            args.append(tenant_id)
        if not include_revoked:
            clauses.append("revoked_at IS NULL")
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        db = await self._conn()
        async with db.execute(sql + " ORDER BY created_at, key_id", args) as cursor:
            rows = await cursor.fetchall()
        return tuple(key_from_row(tuple(row)) for row in rows)

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key at once; ``False`` if no active key has that id."""
        db = await self._conn()
        cursor = await db.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL",
            (time.time(), key_id))
        await db.commit()
        revoked = cursor.rowcount == 1
        if revoked:
            log.info("api key %s revoked", key_id)
        return revoked

    async def _lookup(self, key_id: str) -> StoredKey | None:
        db = await self._conn()
        # One round trip to the store's thread (execute, fetch and close together): this
        # runs on every request.
        rows = list(await db.execute_fetchall(
            f"SELECT {KEY_COLUMNS}, secret_sha256 FROM api_keys WHERE key_id = ?",
            (key_id,)))
        if not rows:
            return None
        row = tuple(rows[0])
        return StoredKey(key=key_from_row(row[:9]), digest=str(row[9]))


def permissions_text(permissions: Iterable[Permission]) -> str:
    return json.dumps([p.value for p in permissions])


def key_from_row(row: tuple[object, ...]) -> ApiKey:
    """An :class:`ApiKey` from the :data:`KEY_COLUMNS` of a row."""
    (key_id, principal_id, kind, tenant_id, user_id, permissions, label, created_at,
     revoked_at) = row
    return ApiKey(key_id=str(key_id), principal_id=str(principal_id),
                  kind=PrincipalKind(str(kind)), tenant_id=str(tenant_id),
                  user_id=None if user_id is None else str(user_id),
                  permissions=tuple(Permission(p) for p in json.loads(str(permissions))),
                  label=None if label is None else str(label),
                  created_at=float(str(created_at)),
                  revoked_at=None if revoked_at is None else float(str(revoked_at)))
