"""The read-time filters of a search: visibility, provenance source and sensitivity.

They answer "may this memory be shown here?" rather than "is it relevant?": an agent
that acts for the whole team reads only ``shared`` memories; a summary built from
user-stated facts leaves out what a tool imported; a prompt never receives a memory
labelled ``restricted``. So each filter is applied where the candidates are chosen (a
native datastore's ``WHERE``, before the top-k), never by dropping hits afterwards,
which would hand back fewer results than asked for while more matching ones existed.

A memory's **sensitivity label** is the string value of its ``metadata["sensitivity"]``,
the same value the Cedar and Rego policies see as ``resource.sensitivity`` when they
decide a write. Labels are free-form (``"public"``, ``"internal"``, ``"restricted"``, …)
with no order between them, so a search names labels, never a level: ``sensitivity``
keeps only records carrying one of the named labels, ``exclude_sensitivity`` leaves out
records carrying one of them (a record with no label, or a label that is not a string,
has none, and stays). Labels compare exactly: ``"Restricted"`` is another label.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from governed_memory.errors import MemoryValidationError
from governed_memory.limits import check_text
from governed_memory.records import MemoryRecord, Visibility

SENSITIVITY_KEY: Final = "sensitivity"
"""The metadata key holding a memory's sensitivity label (a string)."""

MAX_FILTER_VALUES: Final = 32
"""The most values one of these filters may name."""

MAX_FILTER_VALUE_BYTES: Final = 1024
"""The longest value one may name: a provenance field's own limit."""

VALUE_FILTERS: Final = ("source_types", "sensitivity", "exclude_sensitivity")
"""The filters that name values, in the order a search declares them."""


def sensitivity_label(metadata: Mapping[str, Any]) -> str | None:
    """The record's label: ``metadata["sensitivity"]`` when it is a string."""
    label = metadata.get(SENSITIVITY_KEY)
    return label if isinstance(label, str) else None


def check_visibility(value: object) -> None:
    if value is not None and not isinstance(value, Visibility):
        raise MemoryValidationError("visibility must be a Visibility (private or shared)",
                                    field="visibility")


def check_values(values: object, field: str) -> None:
    """A tuple of at most :data:`MAX_FILTER_VALUES` non-empty strings without NUL (a
    datastore's JSON functions disagree on NUL, so no filter could promise one answer)."""
    if not isinstance(values, tuple):
        raise MemoryValidationError(f"{field} must be a tuple of strings", field=field)
    if len(values) > MAX_FILTER_VALUES:
        raise MemoryValidationError(
            f"{field} names {len(values)} values; the limit is {MAX_FILTER_VALUES}",
            field=field)
    for index, value in enumerate(values):
        where = f"{field}[{index}]"
        check_text(value, where, max_bytes=MAX_FILTER_VALUE_BYTES)
        if "\x00" in value:
            raise MemoryValidationError(f"{where} cannot hold NUL", field=where)


def check_read_filters(visibility: object, source_types: object, sensitivity: object,
                       exclude_sensitivity: object) -> None:
    check_visibility(visibility)
    check_values(source_types, "source_types")
    check_values(sensitivity, "sensitivity")
    check_values(exclude_sensitivity, "exclude_sensitivity")
    assert isinstance(sensitivity, tuple) and isinstance(exclude_sensitivity, tuple)
    both = sorted(set(sensitivity) & set(exclude_sensitivity))
    if both:
        # Keeping and excluding a label at once is a mistake, not a query.
        raise MemoryValidationError(
            f"sensitivity label {both[0]!r} is both kept and excluded",
            field="exclude_sensitivity")


def passes_read_filters(record: MemoryRecord, *, visibility: Visibility | None,
                        source_types: tuple[str, ...], sensitivity: tuple[str, ...],
                        exclude_sensitivity: tuple[str, ...]) -> bool:
    """Whether ``record`` passes these filters (an empty one passes everything)."""
    if visibility is not None and record.visibility is not visibility:
        return False
    if source_types and record.provenance.source_type not in source_types:
        return False
    if sensitivity or exclude_sensitivity:
        label = sensitivity_label(record.metadata)
        if sensitivity and label not in sensitivity:
            return False
        if label is not None and label in exclude_sensitivity:
            return False
    return True


def label_problem(value: object) -> str | None:
    """Why ``value`` cannot be a label a profile names (``None`` when it can): what a
    search would refuse as one of its ``exclude_sensitivity`` values."""
    if not isinstance(value, str) or not value.strip():
        return "must be a non-empty label"
    try:
        check_values((value,), "label")
    except MemoryValidationError as exc:
        return exc.args[0].removeprefix("label[0] ") if exc.args else "is not a label"
    return None
