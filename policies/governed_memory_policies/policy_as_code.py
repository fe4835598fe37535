"""What the Cedar and Rego policies share: one request mapping, one way to read policy
files, one policy-set hash, one memo of compiled sets, one way to combine verdicts.

Both engines must see the same facts about an operation, or a compliance team that
writes a rule once in Cedar and once in Rego would get two answers. So an operation is
mapped here, once, to engine-neutral :class:`AccessRequest` values (one per scope the
operation touches, since each scope must be allowed on its own), and each engine only
renders them in its own shape. The mapping never carries content, query text, metadata
values (beyond the ``sensitivity`` label) or provenance source ids: a policy decides on
who, what operation and where, which is all that a reviewer signs off.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib.resources import files
from pathlib import Path, PurePosixPath
from typing import Any, Final, Generic, TypeVar

import attrs
from governed_memory.canonical import canonical_json
from governed_memory.errors import MemoryConfigurationError
from governed_memory.operations import Operation
from governed_memory.policy import PolicyCheck, PolicyVerdict
from governed_memory.principal import Principal
from governed_memory.profiles.spec import MemoryProfileSpec
from governed_memory.requests import AddRequest, GetRequest, UpdateRequest
from governed_memory.scope import DIMENSIONS

SENSITIVITY_KEY: Final = "sensitivity"
"""The metadata key whose string value a policy sees as the resource's ``sensitivity``
(a label such as ``"restricted"``); no other metadata value reaches a policy."""

RECORD_ATTRIBUTES: Final = ("record_id", "key", "memory_type", "source_type", "sensitivity",
                            "visibility")
RESOURCE_ATTRIBUTES: Final = (*DIMENSIONS, "scope_hash", *RECORD_ATTRIBUTES)
"""Every attribute a resource can have; only ``tenant_id`` is always present."""

PRINCIPAL_ATTRIBUTES: Final = ("principal_id", "kind", "tenant_id", "user_id", "permissions")
CONTEXT_ATTRIBUTES: Final = ("profile_id", "profile_version", "profile_revision")
STORE_RESOURCE_ID: Final = "store"
"""The resource of a store-wide operation (indexing, snapshot purges): no scope."""

MAX_REASON: Final = 300
"""A reason longer than this is cut: reasons go into every event of a refusal."""

T = TypeVar("T")


class PolicySourceError(MemoryConfigurationError):
    """A policy set that cannot be used, found when the profile loads.

    ``source`` names the file (or ``<inline …>``), ``line`` and ``policy`` the place in
    it when known, so that the person who wrote the policy can go straight there."""

    def __init__(self, detail: str, *, source: str | None = None, line: int | None = None,
                 policy: str | None = None) -> None:
        where = source or ""
        if where and line is not None:
            where += f":{line}"
        prefix = f"{where}: " if where else ""
        named = f"policy {policy}: " if policy else ""
        super().__init__(f"{prefix}{named}{detail}")
        self.source = source
        self.line = line
        self.policy = policy
        self.detail = detail


@attrs.frozen(slots=True)
class AccessRequest:
    """One scope of one operation, as both engines see it. Hashable, so that an engine
    can keep what it built from it (Cedar entities, a Rego input) for the next call."""

    action: str
    """The operation (``add``, ``search``, …)."""
    action_kind: str
    """``read``, ``write``, ``index`` or ``maintenance`` (the operation's event family)."""
    resource_id: str
    resource: tuple[tuple[str, str], ...]
    """Attribute name → value, sorted by name; absent attributes are left out."""

    def resource_dict(self) -> dict[str, str]:
        return dict(self.resource)


def principal_attributes(principal: Principal) -> dict[str, Any]:
    found: dict[str, Any] = {"principal_id": principal.principal_id,
                             "kind": principal.kind.value,
                             "tenant_id": principal.tenant_id,
                             "permissions": sorted(p.value for p in principal.permissions)}
    if principal.user_id is not None:
        found["user_id"] = principal.user_id
    return found


def context_attributes(profile: MemoryProfileSpec) -> dict[str, str]:
    """Constant for one built policy: the profile it was built from is the profile that
    governs every operation it sees."""
    return {"profile_id": profile.id, "profile_version": profile.version,
            "profile_revision": profile.revision}


def _record_attributes(request: object) -> dict[str, str]:
    """What the request says about the record it writes or names: never content. The
    stored record is not fetched (a policy runs before the provider), so an update names
    a memory type only when it changes it."""
    found: dict[str, str] = {}
    if isinstance(request, AddRequest):
        found["memory_type"] = str(request.memory_type)
        found["visibility"] = str(request.visibility)
        if request.key is not None:
            found["key"] = request.key
        if request.provenance.source_type is not None:
            found["source_type"] = request.provenance.source_type
        _sensitivity(request.metadata, found)
        return found
    if isinstance(request, UpdateRequest):
        found["record_id"] = request.record_id
        if request.memory_type is not None:
            found["memory_type"] = str(request.memory_type)
        if request.visibility is not None:
            found["visibility"] = str(request.visibility)
        if request.metadata is not None:
            _sensitivity(request.metadata, found)
        return found
    if isinstance(request, GetRequest):
        if request.record_id is not None:
            found["record_id"] = request.record_id
        if request.key is not None:
            found["key"] = request.key
        return found
    record_id = getattr(request, "record_id", None)  # delete, history, approve, reject
    if isinstance(record_id, str):
        found["record_id"] = record_id
    return found


def _sensitivity(metadata: Mapping[str, Any], found: dict[str, str]) -> None:
    label = metadata.get(SENSITIVITY_KEY)
    if isinstance(label, str):
        found["sensitivity"] = label


def access_requests(check: PolicyCheck) -> tuple[AccessRequest, ...]:
    """The operation as one request per scope it touches (a search over three scope
    levels is three requests, each of which must be allowed).

    An operation without a scope names what it touches instead: a data subject
    (``delete_user``: tenant and user), a tenant (``snapshot_header``), or the store
    (indexing and purges, resource ``store`` in the principal's tenant)."""
    operation = check.operation
    request = check.request
    record = _record_attributes(request)
    kind = operation.kind.value
    scopes = request.target_scopes()
    if scopes:
        found = []
        for scope in scopes:
            attributes = {**scope.dimensions(), "scope_hash": scope.scope_hash, **record}
            resource_id = scope.scope_hash + (f"/{record['record_id']}"
                                              if "record_id" in record else "")
            found.append(AccessRequest(operation.value, kind, resource_id,
                                       tuple(sorted(attributes.items()))))
        return tuple(found)
    tenant = getattr(request, "tenant_id", None)
    user = getattr(request, "user_id", None)
    if isinstance(tenant, str):
        attributes = {"tenant_id": tenant}
        if isinstance(user, str):
            attributes["user_id"] = user
            resource_id = f"subject:{tenant}/{user}"
        else:
            resource_id = f"tenant:{tenant}"
    else:
        attributes = {"tenant_id": check.principal.tenant_id}
        resource_id = STORE_RESOURCE_ID
    return (AccessRequest(operation.value, kind, resource_id,
                          tuple(sorted(attributes.items()))),)


def sample_requests(operation: Operation) -> tuple[AccessRequest, AccessRequest]:
    """Two requests for ``operation`` that between them use every attribute and leave
    out every optional one: checked when a profile loads, so that a schema or module
    that cannot take the requests this mapping sends is refused then, not on the first
    operation."""
    full = {name: f"sample-{name}" for name in RESOURCE_ATTRIBUTES}
    full.update(memory_type="note", visibility="private")
    return (AccessRequest(operation.value, operation.kind.value, "sample-full",
                          tuple(sorted(full.items()))),
            AccessRequest(operation.value, operation.kind.value, "sample-minimal",
                          (("tenant_id", "sample-tenant"),)))


SAMPLE_PRINCIPALS: Final = (
    {"principal_id": "sample-principal", "kind": "agent", "tenant_id": "sample-tenant",
     "user_id": "sample-user", "permissions": ["memory:read", "memory:write"]},
    {"principal_id": "sample-service", "kind": "service", "tenant_id": "sample-tenant",
     "permissions": []},
)
SAMPLE_CONTEXT: Final[Mapping[str, str]] = {
    "profile_id": "sample", "profile_version": "1.0.0", "profile_revision": "sha256:sample"}
"""The context of the sample requests: a profile's, as :func:`context_attributes` gives."""


def strictest(verdicts: Sequence[PolicyVerdict]) -> PolicyVerdict:
    """The strictest verdict over the requests of one operation (one per scope), with
    every distinct reason for it."""
    effect = max(v.effect for v in verdicts)
    reasons = list(dict.fromkeys(v.reason for v in verdicts if v.effect is effect))
    return PolicyVerdict(effect, shorten("; ".join(reasons)))


# -- configuration -------------------------------------------------------------------------


def check_keys(name: str, config: Mapping[str, Any], known: Iterable[str]) -> None:
    """A key this policy does not read would be a setting without effect: refused."""
    allowed = set(known)
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise MemoryConfigurationError(
            f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for policy "
            f"{name!r}; it reads {', '.join(sorted(allowed))}")


@attrs.frozen(slots=True)
class Source:
    """A policy document as read: ``name`` is how errors and docs refer to it."""

    name: str
    text: str


def read_source(config: Mapping[str, Any], key: str, *, required: bool) -> Source | None:
    """``key`` (the document inline) or ``<key>_file`` (a file), never both.

    A file is read from the package named by ``resource_package`` when one is given (a
    domain pack ships its policies as package resources, wherever it is installed), else
    it must be an absolute path: a policy is built from the profile's values, not from
    the file the profile was read from, so a relative path would depend on the working
    directory of whichever process loads the profile.
    """
    inline = config.get(key)
    path = config.get(f"{key}_file")
    if inline is not None and path is not None:
        raise MemoryConfigurationError(f"give {key} or {key}_file, not both")
    if inline is not None:
        if not isinstance(inline, str):
            raise MemoryConfigurationError(f"{key}: expected the document as a string, got "
                                           f"{type(inline).__name__}")
        return Source(f"<inline {key}>", inline)
    if path is None:
        if required:
            raise MemoryConfigurationError(f"needs {key} (the document inline) or "
                                           f"{key}_file")
        return None
    if not isinstance(path, str) or not path.strip():
        raise MemoryConfigurationError(f"{key}_file: expected a file name")
    return Source(path, _read_file(config, f"{key}_file", path))


def _read_file(config: Mapping[str, Any], key: str, path: str) -> str:
    package = config.get("resource_package")
    where = repr(path)
    try:
        if package is not None:
            if not isinstance(package, str) or not package:
                raise MemoryConfigurationError("resource_package: expected a package name")
            parts = PurePosixPath(path).parts
            if PurePosixPath(path).is_absolute() or ".." in parts:
                raise MemoryConfigurationError(
                    f"{key}: {path!r} must be relative to package {package!r}, inside it")
            try:
                root = files(package)
            except ModuleNotFoundError:
                raise MemoryConfigurationError(f"resource_package: no package named "
                                               f"{package!r} is installed") from None
            resource = root.joinpath(*parts)
            where = f"{path!r} in package {package!r}"
            return resource.read_text(encoding="utf-8")
        if not Path(path).is_absolute():
            raise MemoryConfigurationError(
                f"{key}: {path!r} is relative; give an absolute path, or resource_package "
                "naming the package that ships it")
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MemoryConfigurationError(f"{key}: cannot read {where}: "
                                       f"{type(exc).__name__}") from None


def read_json_document(config: Mapping[str, Any], key: str, *, expect: type, shape: str
                       ) -> tuple[Source, Any] | None:
    """A JSON document inline (a string of JSON, or the table or array itself) or from
    ``<key>_file``; a syntax error names its line, a value of another kind says what
    ``shape`` was expected (with an example)."""
    inline = config.get(key)
    if inline is not None and not isinstance(inline, str):
        if config.get(f"{key}_file") is not None:
            raise MemoryConfigurationError(f"give {key} or {key}_file, not both")
        value: Any = _plain(inline)
        source = Source(f"<inline {key}>", canonical_json(value))
    else:
        found = read_source(config, key, required=False)
        if found is None:
            return None
        source = found
        try:
            value = json.loads(source.text)
        except json.JSONDecodeError as exc:
            raise PolicySourceError(f"not valid JSON: {exc.msg}", source=source.name,
                                    line=exc.lineno) from None
    if not isinstance(value, expect):
        raise PolicySourceError(f"expected {shape}; got a JSON {json_kind(value)}",
                                source=source.name)
    return source, value


def json_kind(value: Any) -> str:
    """What JSON calls the kind of ``value`` (as parsed from JSON or TOML)."""
    for kind, name in ((bool, "boolean"), (Mapping, "object"), (list | tuple, "array"),
                       (str, "string"), (int | float, "number")):
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class CompiledSets(Generic[T]):
    """Policy sets compiled once, by set hash, and shared by every policy built from the
    same documents (a profile is built once to be checked and again for each manager);
    the oldest is dropped past ``limit``. Two threads compiling the same set at once
    both compile it; the one stored last is kept."""

    def __init__(self, limit: int = 32) -> None:
        self._limit = limit
        self._compiled: dict[str, T] = {}
        self._lock = threading.Lock()

    def get(self, digest: str, make: Callable[[], T]) -> T:
        """The set compiled under ``digest``, compiled by ``make`` if it is not kept
        (nothing is kept when it raises)."""
        with self._lock:
            cached = self._compiled.get(digest)
        if cached is not None:
            return cached
        compiled = make()
        with self._lock:
            if len(self._compiled) >= self._limit:
                self._compiled.pop(next(iter(self._compiled)))
            self._compiled[digest] = compiled
        return compiled


def set_hash(engine: str, documents: Mapping[str, Any]) -> str:
    """``sha256:`` over the engine's name and every document the decisions depend on
    (policy text as written; JSON documents in canonical form, so re-indenting a data
    file does not make a new policy set but changing a value does)."""
    body = canonical_json({"engine": engine, "documents": dict(documents)})
    return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


def shorten(reason: str) -> str:
    return reason if len(reason) <= MAX_REASON else reason[:MAX_REASON - 1] + "…"


def first_line(error: object) -> str:
    """An engine's error message as a reason: its first line, shortened (the type of
    the error when it has no message)."""
    text = str(error).strip()
    return shorten(text.splitlines()[0] if text else type(error).__name__)


def missing_package(name: str, package: str, extra: str) -> MemoryConfigurationError:
    return MemoryConfigurationError(f"policy {name!r} needs the {package} package "
                                    f"(pip install 'governed-memory[{extra}]')")
