"""``MemoryProfileSpec``: everything a deployment decides about memory, as one value.

A profile is referenced as ``id@version`` and pinned by its ``revision`` (the hash of
its canonical form), which goes into every event: an auditor can tell exactly which
rules governed an operation. Each section is a frozen attrs class that checks itself,
so a spec built in code is held to the same rules as one loaded from TOML; a broken
rule raises ``ProfileProblem`` naming the dotted path of the offending setting.

Some sections are enforced today (by the built-in policies and the manager, which
reads ``provider``, ``timeout_s``, ``retrieval.top_k`` and ``privacy.event_detail``); cache,
indexing, fallback, stores and context are declarations for the components that read
them, validated now so a profile written today keeps meaning the same thing.
"""

from __future__ import annotations

import enum
import hashlib
import math
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.converter import unstructure
from governed_memory.dedup import DedupMode
from governed_memory.errors import MemoryConfigurationError, MemoryValidationError
from governed_memory.limits import MAX_PAGE_SIZE, check_json_safe
from governed_memory.operation_context import ProfileRef
from governed_memory.operations import Operation
from governed_memory.principal import Permission, PrincipalKind
from governed_memory.profiles.versions import is_name, is_semver
from governed_memory.records import MemoryType
from governed_memory.scope import DIMENSIONS

CURRENT_SPEC_VERSION: Final = 1
REVISION_PREFIX: Final = "sha256:"


class ProfileProblems(MemoryConfigurationError):
    """Several broken rules found at once (a person fixes a profile in one pass)."""

    def __init__(self, problems: Sequence[ProfileProblem]) -> None:
        super().__init__("; ".join(str(problem) for problem in problems))
        self.problems = tuple(problems)


class ProfileProblem(MemoryConfigurationError):
    """One broken rule in a profile; ``path`` is dotted (``retrieval.top_k``)."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}" if path else detail)
        self.path = path
        self.detail = detail

    def within(self, prefix: str) -> ProfileProblem:
        """The same problem seen from an enclosing section."""
        if not prefix:
            return self
        return ProfileProblem(f"{prefix}.{self.path}" if self.path else prefix, self.detail)


def _checked_config(value: Mapping[str, Any] | None, path: str) -> Mapping[str, Any]:
    """A JSON-safe, deeply read-only copy of a config table."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ProfileProblem(path, f"expected a table, got {type(value).__name__}")
    try:
        check_json_safe(value, path)
    except MemoryValidationError as exc:
        raise ProfileProblem(exc.field or path, str(exc).removeprefix(f"{exc.field} ")
                             ) from None
    frozen: Mapping[str, Any] = _freeze(value)
    return frozen


def _config(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return _checked_config(value, "config")


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return types.MappingProxyType({str(k): _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _frozen_dict(value: Mapping[Any, Any] | None) -> Mapping[Any, Any]:
    return types.MappingProxyType(dict(value or {}))


def _positive(path: str, value: float | None) -> None:
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise ProfileProblem(path, f"must be a positive number of seconds, got {value}")


def _at_least_one(path: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ProfileProblem(path, f"must be at least 1, got {value}")


def _unique(path: str, values: tuple[Any, ...]) -> None:
    seen: set[Any] = set()
    for index, value in enumerate(values):
        if value in seen:
            raise ProfileProblem(f"{path}[{index}]", f"{value!r} is listed twice")
        seen.add(value)


# -- sections ------------------------------------------------------------------------------


@attrs.frozen(slots=True)
class ProviderSection:
    """Which registered provider stores the memories, and its own config table."""

    name: str = "native"
    config: Mapping[str, Any] = attrs.field(factory=dict, converter=_config)

    def __attrs_post_init__(self) -> None:
        if not self.name:
            raise ProfileProblem("name", "must name a registered provider")


STORE_NAMES: Final = frozenset({"cache", "embedder", "rates", "turns", "working_state"})
"""The stores a profile may name: the search cache's (``[cache]``), the embedder
(vector search), the write-rate windows' (``[quotas] rate_store``), and the
conversation and working-state tiers' stores."""


@attrs.frozen(slots=True)
class StoreSection:
    """A named backing store (a Redis for the cache, …) that other sections refer to."""

    kind: str
    config: Mapping[str, Any] = attrs.field(factory=dict, converter=_config)

    def __attrs_post_init__(self) -> None:
        if not self.kind:
            raise ProfileProblem("kind", "must name the kind of store")


@attrs.frozen(slots=True)
class ScopeSection:
    """Dimensions every new memory must be written with (``tenant_id`` always is)."""

    required: tuple[str, ...] = ("tenant_id",)

    def __attrs_post_init__(self) -> None:
        for index, name in enumerate(self.required):
            if name not in DIMENSIONS:
                raise ProfileProblem(f"required[{index}]",
                                     f"{name!r} is not a scope dimension "
                                     f"({', '.join(DIMENSIONS)})")
        _unique("required", self.required)


class RetrievalMode(enum.StrEnum):
    LEXICAL = "lexical"
    VECTOR = "vector"


class SnapshotStorage(enum.StrEnum):
    OFF = "off"
    BATCHED = "batched"
    SYNC = "sync"


SIGNALS: Final = ("lexical", "vector", "recency", "importance")
_MODE_NAMES: Final = frozenset(mode.value for mode in RetrievalMode)


@attrs.frozen(slots=True)
class RequestRankingSection:
    """What one search may change of the ranking (``[retrieval.request_ranking]``): its
    modes are always among the profile's; ``max_weight`` bounds every weight it sets."""

    allowed: bool = True
    max_weight: float = 4.0

    def __attrs_post_init__(self) -> None:
        if not math.isfinite(self.max_weight) or self.max_weight <= 0:
            raise ProfileProblem("max_weight", "must be a positive number")


@attrs.frozen(slots=True)
class RetrievalSection:
    modes: tuple[RetrievalMode, ...] = (RetrievalMode.LEXICAL,)
    top_k: int = 10
    """The default number of hits a search returns when the caller does not say."""
    weights: Mapping[str, float] = attrs.field(factory=dict, converter=_frozen_dict)
    recency_half_life_s: float | None = None
    snapshots: SnapshotStorage | None = None
    """How retrieval snapshots are stored: ``off``, ``batched`` (the provider default
    when unset: off the request path, no fsync per search) or ``sync`` (committed
    before the search returns)."""
    request_ranking: RequestRankingSection = attrs.field(factory=RequestRankingSection)

    def __attrs_post_init__(self) -> None:
        if not self.modes:
            raise ProfileProblem("modes", "at least one retrieval mode is needed")
        _unique("modes", self.modes)
        if not 1 <= self.top_k <= MAX_PAGE_SIZE:
            raise ProfileProblem("top_k", f"must be between 1 and {MAX_PAGE_SIZE}, "
                                          f"got {self.top_k}")
        for signal, weight in self.weights.items():
            if signal not in SIGNALS:
                raise ProfileProblem(f"weights.{signal}",
                                     f"unknown signal; known: {', '.join(SIGNALS)}")
            if not math.isfinite(weight) or weight < 0:
                raise ProfileProblem(f"weights.{signal}", "must be a non-negative number")
            if signal in _MODE_NAMES and signal not in self.modes:
                raise ProfileProblem(f"weights.{signal}",
                                     f"weights a mode that is not in modes ({signal!r})")
        _positive("recency_half_life_s", self.recency_half_life_s)
        if self.weights.get("recency", 0) > 0 and self.recency_half_life_s is None:
            raise ProfileProblem("weights.recency", "needs recency_half_life_s")


@attrs.frozen(slots=True)
class WriteSection:
    dedup: DedupMode = DedupMode.OFF
    similarity_threshold: float = 0.95
    """With ``dedup = "similarity"``: how similar (0-1, the embedder's cosine) a live
    record must be to count as the same memory."""
    require_idempotency_key: bool = False
    review_source_types: tuple[str, ...] = ()
    """Provenance source types whose new memories wait for ``approve`` or ``reject``."""
    read_only: bool = False
    allowed_memory_types: tuple[MemoryType, ...] = ()
    """Empty means every type."""

    def __attrs_post_init__(self) -> None:
        for index, source in enumerate(self.review_source_types):
            if not source or source != source.strip():
                raise ProfileProblem(f"review_source_types[{index}]",
                                     "must be a non-empty source type")
        _unique("review_source_types", self.review_source_types)
        _unique("allowed_memory_types", self.allowed_memory_types)
        threshold = self.similarity_threshold
        if isinstance(threshold, bool) or not 0 < threshold <= 1:
            raise ProfileProblem("similarity_threshold", "must be a number in (0, 1]")


@attrs.frozen(slots=True)
class RetentionSection:
    """How long memories live. A write never lives past ``max_ttl_s``."""

    default_ttl_s: float | None = None
    max_ttl_s: float | None = None
    ttl_by_type: Mapping[MemoryType, float] = attrs.field(factory=dict, converter=_frozen_dict)

    def __attrs_post_init__(self) -> None:
        _positive("default_ttl_s", self.default_ttl_s)
        _positive("max_ttl_s", self.max_ttl_s)
        for memory_type, ttl in self.ttl_by_type.items():
            _positive(f"ttl_by_type.{memory_type.value}", ttl)
        if self.max_ttl_s is None:
            return
        if self.default_ttl_s is not None and self.default_ttl_s > self.max_ttl_s:
            raise ProfileProblem("default_ttl_s", f"{self.default_ttl_s} is above max_ttl_s "
                                                  f"({self.max_ttl_s})")
        for memory_type, ttl in self.ttl_by_type.items():
            if ttl > self.max_ttl_s:
                raise ProfileProblem(f"ttl_by_type.{memory_type.value}",
                                     f"{ttl} is above max_ttl_s ({self.max_ttl_s})")

    def ttl_for(self, memory_type: MemoryType) -> float | None:
        """The lifetime a new memory of this type gets when the caller sets none."""
        ttl = self.ttl_by_type.get(memory_type, self.default_ttl_s)
        return ttl if ttl is not None else self.max_ttl_s

    @property
    def configured(self) -> bool:
        return bool(self.default_ttl_s or self.max_ttl_s or self.ttl_by_type)


class SecretGuardMode(enum.StrEnum):
    OFF = "off"
    REJECT = "reject"
    REDACT = "redact"


class PiiKind(enum.StrEnum):
    """What ``pii-redaction`` can find (the detectors live in the policies package;
    docs/domain-packs.md says what each matches and how it is validated)."""

    EMAIL = "email"
    PHONE = "phone"
    PAYMENT_CARD = "payment_card"
    IBAN = "iban"
    SSN = "ssn"
    IPV4 = "ipv4"
    IPV6 = "ipv6"


class EventDetail(enum.StrEnum):
    """``minimal`` leaves content hashes out of events: the hash of a short memory
    ("prefers decaf") can be found by hashing guesses."""

    STANDARD = "standard"
    MINIMAL = "minimal"


@attrs.frozen(slots=True)
class PrivacySection:
    secret_guard: SecretGuardMode = SecretGuardMode.OFF
    pii_redaction: bool = False
    pii_kinds: tuple[PiiKind, ...] = (PiiKind.EMAIL, PiiKind.PHONE)
    event_detail: EventDetail = EventDetail.STANDARD
    capture_content_in_traces: bool = False
    """Opt in to content and query text as span attributes (after redaction policies
    ran), for debugging a deployment whose traces are as protected as its data. Events,
    metrics and logs never carry content, whatever this says."""

    def __attrs_post_init__(self) -> None:
        if not self.pii_kinds:
            raise ProfileProblem("pii_kinds", "list at least one kind (or turn "
                                              "pii_redaction off)")
        _unique("pii_kinds", self.pii_kinds)


@attrs.frozen(slots=True)
class AccessSection:
    """Per-operation permissions demanded on top of the fixed scope rule (which
    already demands each operation's own permission)."""

    permissions: Mapping[Operation, Permission] = attrs.field(factory=dict,
                                                              converter=_frozen_dict)


RATE_STORE_PROVIDER: Final = "provider"
RATE_STORE_PROCESS: Final = "process"
BUILT_IN_RATE_STORES: Final = frozenset({RATE_STORE_PROVIDER, RATE_STORE_PROCESS})
_LIMITS: Final = ("max_records_per_tenant", "max_records_per_scope", "max_bytes_per_tenant",
                  "max_bytes_per_scope", "writes_per_minute_per_tenant",
                  "writes_per_minute_per_scope")


@attrs.frozen(slots=True)
class QuotaSection:
    max_records_per_tenant: int | None = None
    max_records_per_scope: int | None = None
    max_bytes_per_tenant: int | None = None
    max_bytes_per_scope: int | None = None
    writes_per_minute_per_tenant: int | None = None
    writes_per_minute_per_scope: int | None = None
    rate_store: str = RATE_STORE_PROVIDER
    """Where the writes-per-minute windows are counted: ``"provider"`` (the provider's
    own, kept in its storage; windows in this process, with a warning, if it keeps
    none), ``"process"`` (this process only: N processes admit up to N times a limit)
    or the name of a registered rate store (``"redis"``), configured by
    ``[stores.rates]``."""

    def __attrs_post_init__(self) -> None:
        for name in _LIMITS:
            _at_least_one(name, getattr(self, name))
        if not isinstance(self.rate_store, str) or not self.rate_store.strip():
            raise ProfileProblem("rate_store", "must name where write rates are counted "
                                 "(\"provider\", \"process\" or a registered rate store)")
        if self.rate_store != RATE_STORE_PROVIDER and not self.limits_rates:
            raise ProfileProblem("rate_store", f"is {self.rate_store!r}, but no "
                                 "writes_per_minute_per_tenant or writes_per_minute_per_scope "
                                 "limit counts there")

    @property
    def configured(self) -> bool:
        return any(getattr(self, name) is not None for name in _LIMITS)

    @property
    def limits_rates(self) -> bool:
        """A writes-per-minute limit is set (what ``rate_store`` is for)."""
        return (self.writes_per_minute_per_tenant is not None
                or self.writes_per_minute_per_scope is not None)

    @property
    def registered_rate_store(self) -> str | None:
        """The registered store ``rate_store`` names; ``None`` for the built-in choices."""
        return None if self.rate_store in BUILT_IN_RATE_STORES else self.rate_store

    @property
    def needs_usage(self) -> bool:
        """Record and byte limits need the provider to report usage."""
        return any(v is not None for v in (self.max_records_per_tenant,
                                           self.max_records_per_scope,
                                           self.max_bytes_per_tenant, self.max_bytes_per_scope))


class IndexingMode(enum.StrEnum):
    SYNC = "sync"
    ASYNC_OUTBOX = "async_outbox"


@attrs.frozen(slots=True)
class IndexingSection:
    mode: IndexingMode = IndexingMode.SYNC


class CacheStore(enum.StrEnum):
    MEMORY = "memory"
    REDIS = "redis"


@attrs.frozen(slots=True)
class CacheSection:
    enabled: bool = False
    store: CacheStore = CacheStore.MEMORY
    ttl_s: float = 60.0
    max_entries: int = 10_000

    def __attrs_post_init__(self) -> None:
        _positive("ttl_s", self.ttl_s)
        _at_least_one("max_entries", self.max_entries)


@attrs.frozen(slots=True)
class FallbackSection:
    """A provider to read from when the primary is unavailable (``None``: no fallback)."""

    provider: str | None = None
    config: Mapping[str, Any] = attrs.field(factory=dict, converter=_config)

    def __attrs_post_init__(self) -> None:
        if self.provider is None and self.config:
            raise ProfileProblem("config", "configures a fallback but names no provider")


@attrs.frozen(slots=True)
class ContextSection:
    """Budgets for the per-turn context built from memory."""

    budget_tokens: int = 2_000
    max_memories: int = 20
    max_turns: int = 20

    def __attrs_post_init__(self) -> None:
        for name in ("budget_tokens", "max_memories", "max_turns"):
            _at_least_one(name, getattr(self, name))


@attrs.frozen(slots=True)
class JwtClaimsSection:
    """Which verified claims carry the principal's parts (``[auth.jwt.claims]``)."""

    principal_id: str = "sub"
    tenant: str = "tenant_id"
    user: str = "user_id"
    kind: str = "kind"
    permissions: str = "permissions"
    default_kind: PrincipalKind = PrincipalKind.SERVICE

    def __attrs_post_init__(self) -> None:
        names = ("principal_id", "tenant", "user", "kind", "permissions")
        for name in names:
            if not getattr(self, name):
                raise ProfileProblem(name, "must name a claim")
        _unique("claims", tuple(getattr(self, name) for name in names))


JWT_ALGORITHMS: Final = frozenset({"HS256", "HS384", "HS512", "RS256", "RS384", "RS512",
                                   "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
                                   "EdDSA"})
"""The signature algorithms a profile may allow (never ``none``)."""


@attrs.frozen(slots=True)
class JwtSection:
    """How ``governed-memory serve`` verifies bearer JWTs (``[auth.jwt]``).

    The key itself is never in the profile (a profile's content is hashed into every
    event's revision and shipped in packs): ``key_file`` names a PEM public key or a
    file holding an HMAC secret, ``key_env`` an environment variable holding either;
    exactly one of them.
    """

    issuer: str
    audience: str
    algorithms: tuple[str, ...]
    key_file: str | None = None
    key_env: str | None = None
    leeway_s: float = 0.0
    claims: JwtClaimsSection = attrs.field(factory=JwtClaimsSection)

    def __attrs_post_init__(self) -> None:
        for name in ("issuer", "audience"):
            if not getattr(self, name):
                raise ProfileProblem(name, "must not be empty")
        if not self.algorithms:
            raise ProfileProblem("algorithms", "must allow at least one algorithm")
        for index, algorithm in enumerate(self.algorithms):
            if algorithm not in JWT_ALGORITHMS:
                raise ProfileProblem(f"algorithms[{index}]", f"{algorithm!r} is not one of "
                                     f"{', '.join(sorted(JWT_ALGORITHMS))}")
        _unique("algorithms", self.algorithms)
        if (self.key_file is None) == (self.key_env is None):
            raise ProfileProblem("key_file", "give exactly one of key_file and key_env")
        if not math.isfinite(self.leeway_s) or not 0 <= self.leeway_s <= 300:
            raise ProfileProblem("leeway_s", f"must be between 0 and 300 seconds, got "
                                             f"{self.leeway_s}")


@attrs.frozen(slots=True)
class AuthSection:
    """How the service authenticates callers; read by ``governed-memory serve`` and
    ``create_app`` only (an in-process manager takes its principal from the host).
    API keys need no section: they live in the service's key store."""

    jwt: JwtSection | None = None


class FsyncPolicy(enum.StrEnum):
    """When the hash-chained trail flushes an entry to disk."""

    ALWAYS = "always"
    INTERVAL = "interval"
    NEVER = "never"


AUDIT_SINK: Final = "audit"
"""The registered name of the hash-chained trail's sink, which ``[audit] path`` configures."""
_MIN_AUDIT_FILE_BYTES: Final = 4096


def _sink_configs(value: Mapping[str, Mapping[str, Any]] | None
                  ) -> Mapping[str, Mapping[str, Any]]:
    return types.MappingProxyType({name: _checked_config(config, f"sinks.{name}")
                                   for name, config in (value or {}).items()})


def _check_path(path: str, value: str | None) -> None:
    if value is not None and (not value.strip() or "\x00" in value):
        raise ProfileProblem(path, "must be a non-empty file system path")


@attrs.frozen(slots=True)
class AuditSection:
    """The profile's event sinks, and whether they are mandatory.

    ``path`` names the directory of the hash-chained trail (the built-in ``audit``
    sink) and the keys after it tune that trail; ``sinks`` configures any other
    registered event sink by name. ``governed_memory.sinks.build_sinks`` builds them,
    resolving relative paths against a base directory the host chooses (the CLI: the
    directory of its database). Every key but ``fail_closed`` and ``sinks`` configures
    the trail, so naming one without ``path`` is refused rather than ignored.
    """

    fail_closed: bool = False
    """Refuse any operation whose ``requested`` event the manager's sinks cannot all
    record, before a policy or the provider sees it (``AuditUnavailableError``). It
    needs something to record to: a profile with it and neither ``path`` nor ``sinks``
    is refused when it loads. See ``docs/compliance.md``."""
    path: str | None = None
    """The trail's directory (``audit-000001.jsonl``, … go in it)."""
    fsync: FsyncPolicy = FsyncPolicy.ALWAYS
    fsync_interval_s: float | None = None
    """Only with ``fsync = "interval"``: the longest an entry waits for its flush
    (1 s when unset)."""
    max_file_bytes: int | None = None
    """Rotate to the next file past this size (64 MiB when unset; at least 4096)."""
    checkpoint_path: str | None = None
    """A file the trail appends a checkpoint to every ``checkpoint_every`` entries.
    A checkpoint proves most when kept where the trail's writers cannot reach."""
    checkpoint_every: int | None = None
    sinks: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict,
                                                         converter=_sink_configs)
    """Other registered event sinks, by name, each with its config table."""

    def __attrs_post_init__(self) -> None:
        _check_path("path", self.path)
        _check_path("checkpoint_path", self.checkpoint_path)
        if self.fail_closed and self.path is None and not self.sinks:
            # Otherwise it loads, and then every operation is refused for want of a sink.
            raise ProfileProblem("path", "fail_closed = true needs a trail to record to: "
                                         "name its directory here (relative to the "
                                         "database's directory), or an "
                                         "[audit.sinks.<name>] table")
        if self.path is None:
            for name in ("fsync_interval_s", "max_file_bytes", "checkpoint_path",
                         "checkpoint_every"):
                if getattr(self, name) is not None:
                    raise ProfileProblem(name, "configures the hash-chained trail, but "
                                               "audit.path names none")
            if self.fsync is not FsyncPolicy.ALWAYS:
                raise ProfileProblem("fsync", "configures the hash-chained trail, but "
                                              "audit.path names none")
        if self.fsync_interval_s is not None:
            if self.fsync is not FsyncPolicy.INTERVAL:
                raise ProfileProblem("fsync_interval_s", 'only applies with fsync = '
                                                         '"interval"')
            _positive("fsync_interval_s", self.fsync_interval_s)
        if self.max_file_bytes is not None and self.max_file_bytes < _MIN_AUDIT_FILE_BYTES:
            raise ProfileProblem("max_file_bytes", f"must be at least "
                                                   f"{_MIN_AUDIT_FILE_BYTES}, got "
                                                   f"{self.max_file_bytes}")
        _at_least_one("checkpoint_every", self.checkpoint_every)
        if (self.checkpoint_every is None) != (self.checkpoint_path is None):
            missing = "checkpoint_path" if self.checkpoint_path is None else "checkpoint_every"
            present = "checkpoint_every" if missing == "checkpoint_path" else "checkpoint_path"
            raise ProfileProblem(present, f"needs {missing} too")
        for name in self.sinks:
            if not name:
                raise ProfileProblem("sinks", "a sink name must not be empty")
            if name == AUDIT_SINK:
                raise ProfileProblem(f"sinks.{name}", "the hash-chained trail is configured "
                                                      "by audit.path and the keys beside it")

    @property
    def trail_config(self) -> dict[str, Any] | None:
        """The ``audit`` sink's config for ``path`` (as written, unresolved), or
        ``None`` when the profile names no trail."""
        if self.path is None:
            return None
        config: dict[str, Any] = {"directory": self.path, "fsync": self.fsync.value}
        for name in ("fsync_interval_s", "max_file_bytes", "checkpoint_path",
                     "checkpoint_every"):
            value = getattr(self, name)
            if value is not None:
                config[name] = value
        return config


def _frozen_configs(value: Mapping[str, Mapping[str, Any]] | None
                    ) -> Mapping[str, Mapping[str, Any]]:
    return types.MappingProxyType({name: _checked_config(config, f"extra.{name}")
                                   for name, config in (value or {}).items()})


@attrs.frozen(slots=True)
class PoliciesSection:
    """Which policy plugins run, in order; ``extra`` configures third-party ones by name
    (built-in policies read their own sections of the profile instead)."""

    enabled: tuple[str, ...] = ()
    extra: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict,
                                                         converter=_frozen_configs)

    def __attrs_post_init__(self) -> None:
        for index, name in enumerate(self.enabled):
            if not name:
                raise ProfileProblem(f"enabled[{index}]", "must name a registered policy")
        _unique("enabled", self.enabled)
        for name in self.extra:
            if name not in self.enabled:
                raise ProfileProblem(f"extra.{name}", "configures a policy that is not "
                                                      "in enabled")


# -- the spec ------------------------------------------------------------------------------


# Settings that only mean something if a built-in policy enforces them. A profile that
# asks for one without enabling its policy would silently not get it, so that is an error.
_ENFORCED_BY: Final[tuple[tuple[str, str], ...]] = (
    ("privacy.secret_guard", "secret-guard"),
    ("privacy.pii_redaction", "pii-redaction"),
    ("retention", "retention"),
    ("write.review_source_types", "write-review"),
    ("write.read_only", "write-rules"),
    ("write.allowed_memory_types", "write-rules"),
    ("write.require_idempotency_key", "write-rules"),
    ("scope.required", "write-rules"),
    ("access.permissions", "permissions"),
    ("quotas", "quotas"),
)
"""(setting, the policy that enforces it): asking for the setting without enabling its
policy would be a setting without effect, so the profile is refused."""

_ASKS: Final[dict[str, Callable[[MemoryProfileSpec], bool]]] = {
    "privacy.secret_guard": lambda s: s.privacy.secret_guard is not SecretGuardMode.OFF,
    "privacy.pii_redaction": lambda s: s.privacy.pii_redaction,
    "retention": lambda s: s.retention.configured,
    "write.review_source_types": lambda s: bool(s.write.review_source_types),
    "write.read_only": lambda s: s.write.read_only,
    "write.allowed_memory_types": lambda s: bool(s.write.allowed_memory_types),
    "write.require_idempotency_key": lambda s: s.write.require_idempotency_key,
    "scope.required": lambda s: set(s.scope.required) - {"tenant_id"} != set(),
    "access.permissions": lambda s: bool(s.access.permissions),
    "quotas": lambda s: s.quotas.configured,
}


def enforcement_problems(asks: Callable[[str], bool],
                         enabled: Iterable[object]) -> list[ProfileProblem]:
    """A problem for each setting asked for whose policy is not enabled. ``asks`` says
    whether the profile sets a path: from a built spec, or (when some section could
    not even be built) from the raw table, so one broken section hides nothing else."""
    on = set(enabled)
    return [ProfileProblem(path, f"is enforced by policy {policy!r}, which is not in "
                                 "policies.enabled")
            for path, policy in _ENFORCED_BY if policy not in on and asks(path)]


@attrs.frozen(slots=True)
class MemoryProfileSpec:
    """A versioned profile. ``revision`` is derived from every other field."""

    id: str
    version: str
    spec_version: int = CURRENT_SPEC_VERSION
    description: str = ""
    timeout_s: float | None = 30.0
    """The provider call's deadline; ``None`` waits for ever."""
    provider: ProviderSection = attrs.field(factory=ProviderSection)
    stores: Mapping[str, StoreSection] = attrs.field(factory=dict, converter=_frozen_dict)
    scope: ScopeSection = attrs.field(factory=ScopeSection)
    retrieval: RetrievalSection = attrs.field(factory=RetrievalSection)
    write: WriteSection = attrs.field(factory=WriteSection)
    retention: RetentionSection = attrs.field(factory=RetentionSection)
    privacy: PrivacySection = attrs.field(factory=PrivacySection)
    access: AccessSection = attrs.field(factory=AccessSection)
    quotas: QuotaSection = attrs.field(factory=QuotaSection)
    indexing: IndexingSection = attrs.field(factory=IndexingSection)
    cache: CacheSection = attrs.field(factory=CacheSection)
    fallback: FallbackSection = attrs.field(factory=FallbackSection)
    context: ContextSection = attrs.field(factory=ContextSection)
    auth: AuthSection = attrs.field(factory=AuthSection)
    audit: AuditSection = attrs.field(factory=AuditSection)
    policies: PoliciesSection = attrs.field(factory=PoliciesSection)
    _revision: str = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not is_name(self.id):
            raise ProfileProblem("id", f"{self.id!r} is not a profile id (lowercase letters, "
                                       "digits, '.', '_', '-')")
        if not is_semver(self.version):
            raise ProfileProblem("version", f"{self.version!r} is not a semantic version "
                                            "(MAJOR.MINOR.PATCH)")
        if self.spec_version < 1 or self.spec_version > CURRENT_SPEC_VERSION:
            raise ProfileProblem("spec_version", f"{self.spec_version} is not a known schema "
                                                 f"version (1..{CURRENT_SPEC_VERSION})")
        _positive("timeout_s", self.timeout_s)
        found = self._store_problems()
        if (self.fallback.provider == self.provider.name
                and self.fallback.config == self.provider.config):
            # The same provider elsewhere (a replica) is a fallback; the very same one
            # is not.
            found.append(ProfileProblem("fallback.provider",
                                        "falls back to the primary provider"))
        found.extend(enforcement_problems(lambda path: _ASKS[path](self),
                                          self.policies.enabled))
        if self.write.dedup is DedupMode.SIMILARITY and (
                "embedder" not in self.stores or self.indexing.mode is not IndexingMode.SYNC):
            # The new memory's vector must exist before its write to be compared.
            found.append(ProfileProblem("write.dedup", "\"similarity\" needs an embedder "
                                        "([stores.embedder]) and [indexing] mode = \"sync\""))
        if len(found) == 1:
            raise found[0]
        if found:
            raise ProfileProblems(found)
        object.__setattr__(self, "_revision", _revision_of(self))

    def _store_problems(self) -> list[ProfileProblem]:
        """Every named store is read by something, and by what it says it is."""
        found = [ProfileProblem(f"stores.{name}", "is no store a profile can name (one of "
                                f"{', '.join(sorted(STORE_NAMES))})")
                 for name in self.stores if name not in STORE_NAMES]
        cache = self.stores.get("cache")
        if cache is not None:
            if not self.cache.enabled or self.cache.store is CacheStore.MEMORY:
                found.append(ProfileProblem(
                    "stores.cache", "names a cache store, but [cache] does not use one (it "
                    "needs enabled = true and a store other than \"memory\")"))
            elif cache.kind != self.cache.store.value:
                found.append(ProfileProblem("stores.cache.kind", f"is {cache.kind!r}, but "
                                            f"[cache] store is {self.cache.store.value!r}"))
        rates = self.stores.get("rates")
        registered = self.quotas.registered_rate_store
        if rates is not None:
            if registered is None:
                found.append(ProfileProblem(
                    "stores.rates", "configures a rate store, but [quotas] rate_store is "
                    f"{self.quotas.rate_store!r} (it needs the name of a registered rate "
                    "store, such as \"redis\")"))
            elif rates.kind != registered:
                found.append(ProfileProblem("stores.rates.kind", f"is {rates.kind!r}, but "
                                            f"[quotas] rate_store is {registered!r}"))
        return found

    @property
    def revision(self) -> str:
        """``sha256:`` + the hash of the canonical JSON of every other field."""
        return self._revision

    @property
    def key(self) -> str:
        return f"{self.id}@{self.version}"

    @property
    def ref(self) -> ProfileRef:
        """What events and spans carry."""
        return ProfileRef(self.id, self.version, self.revision)

    def canonical(self) -> dict[str, Any]:
        """The unstructured form that the revision hashes (the framework's converter:
        structuring it again gives an equal spec)."""
        data: dict[str, Any] = unstructure(self)
        return data


_LATER_SECTIONS: Final[Mapping[tuple[str, ...], Any]] = {
    ("auth",): AuthSection(),
    ("retrieval", "request_ranking"): RequestRankingSection(),
    ("quotas", "rate_store"): RATE_STORE_PROVIDER,
}
"""Sections added after profiles were published: hashed only when set away from their
default, so every earlier profile keeps the revision its events and packs recorded."""


def _revision_of(spec: MemoryProfileSpec) -> str:
    data = spec.canonical()
    for path, default in _LATER_SECTIONS.items():
        value: Any = spec
        for name in path:
            value = getattr(value, name)
        if value == default:
            table = data
            for name in path[:-1]:
                table = table[name]
            del table[path[-1]]
    text = canonical_json(data)
    return REVISION_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()
