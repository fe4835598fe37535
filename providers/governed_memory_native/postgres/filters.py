"""A search's hard filters as PostgreSQL SQL, for both ways a search reads candidates.

Lexical search (:mod:`postgres.lexical`) filters postings, which carry copies of a
record's validity and visibility so that most searches never join ``memory_records``;
vector candidates (:mod:`postgres.statements`) filter the records themselves. Both need
the same clauses over ``json`` metadata and entity ids, so they are written once here.
"""

from __future__ import annotations

from typing import Any

from governed_memory.errors import MemoryValidationError
from governed_memory.read_filters import SENSITIVITY_KEY

from governed_memory_native.storage.copies import dumps
from governed_memory_native.storage.values import SearchQuery


def _metadata_clause(index: int, name: str, value: Any) -> tuple[str, dict[str, Any]]:
    """Equality on one top-level key that respects JSON types (``"1"`` is not ``1``).

    Strings and booleans compare the stored JSON text of the value with its canonical
    encoding (every write stores ``snapshots.dumps`` output), which needs no unescaping
    and so works for any string; numbers compare numerically, as JSON numbers do.
    """
    key, val = f"mk{index}", f"mv{index}"
    member = f"(r.metadata::json -> %({key})s)"
    kind = f"json_typeof{member}"
    params: dict[str, Any] = {key: name}
    if value is None:
        return f"{kind} = 'null'", params
    if isinstance(value, bool | str):
        params[val] = dumps(value)
        expected = "'boolean'" if isinstance(value, bool) else "'string'"
        return f"({kind} = {expected} AND {member}::text = %({val})s)", params
    if isinstance(value, int):
        params[val] = value
        return f"({kind} = 'number' AND ({member}::text)::numeric = %({val})s::numeric)", params
    if isinstance(value, float):
        params[val] = value
        return f"({kind} = 'number' AND ({member}::text)::float8 = %({val})s::float8)", params
    raise MemoryValidationError("metadata_filter compares scalar values for equality",
                                field=f"metadata_filter.{name}")


def filter_clause(query: SearchQuery, copied: str = "r") -> tuple[str, dict[str, Any]]:
    """The type, entity, metadata, validity, visibility and event-time filters as one SQL
    boolean (``true`` when none).

    Validity and visibility are read from the ``copied`` alias: ``p`` (the postings,
    which carry copies of them) in a lexical search, ``r`` elsewhere. The other filters
    always need ``memory_records AS r``.
    """
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if query.memory_types:
        clauses.append("r.memory_type = ANY(%(types)s)")
        params["types"] = [kind.value for kind in query.memory_types]
    if query.entity_ids:
        clauses.append("EXISTS (SELECT 1 FROM json_array_elements_text(r.entity_ids::json)"
                       " AS e (v) WHERE e.v = ANY(%(entities)s))")
        params["entities"] = list(query.entity_ids)
    for index, (name, value) in enumerate(sorted(query.metadata_filter.items())):
        clause, values = _metadata_clause(index, name, value)
        clauses.append(clause)
        params.update(values)
    if query.valid_at is not None:
        clauses.append(f"({copied}.valid_from IS NULL OR {copied}.valid_from <= %(valid_at)s)"
                       f" AND ({copied}.invalid_at IS NULL OR {copied}.invalid_at > %(valid_at)s)")
        params["valid_at"] = query.valid_at
    if query.visibilities:
        clauses.append(f"{copied}.visibility = ANY(%(visibilities)s)")
        params["visibilities"] = [visibility.value for visibility in query.visibilities]
    if query.occurred_since is not None:
        clauses.append("coalesce(r.occurred_at, r.created_at) >= %(occurred_since)s")
        params["occurred_since"] = query.occurred_since
    if query.occurred_before is not None:
        clauses.append("coalesce(r.occurred_at, r.created_at) < %(occurred_before)s")
        params["occurred_before"] = query.occurred_before
    if query.source_types:
        clauses.append(_string_in("r.provenance", "source_type", "source_types"))
        params["source_types"] = [dumps(value) for value in query.source_types]
    if query.sensitivity:
        clauses.append(_string_in("r.metadata", SENSITIVITY_KEY, "sensitivity"))
        params["sensitivity"] = [dumps(label) for label in query.sensitivity]
    if query.exclude_sensitivity:
        clauses.append("NOT " + _string_in("r.metadata", SENSITIVITY_KEY,
                                           "exclude_sensitivity"))
        params["exclude_sensitivity"] = [dumps(label) for label in query.exclude_sensitivity]
    return ("(" + " AND ".join(clauses) + ")" if clauses else "true"), params


def _string_in(column: str, key: str, param: str) -> str:
    """Whether ``column``'s JSON object holds a string under ``key`` equal to one of the
    values bound as ``param``, never NULL (so ``NOT`` of it keeps a record without one).

    Compared as stored JSON text against each value's canonical encoding, as string
    metadata filters are (:func:`_metadata_clause`): no unescaping, so any string works."""
    member = f"({column}::json -> '{key}')"
    return (f"coalesce(json_typeof{member} = 'string'"
            f" AND {member}::text = ANY(%({param})s), false)")


def needs_records(query: SearchQuery) -> bool:
    """Whether a lexical search's filters read columns only ``memory_records`` has."""
    return query.reads_records()
